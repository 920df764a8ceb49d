package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// queryParams is, for each route of the API under /v1/ (its ServeMux
// pattern, "GET /v1/pools/{pool}/decisions"), the query parameters its
// OpenAPI description names. A body is read strictly (an unknown or
// repeated key is refused); so is a query under /v1/: a parameter the
// route does not take (`from=100` for `from_seq=100`, `at=` on
// allocations) was ignored and the answer was the default one, from the
// first sequence or as of now, with nothing telling the caller its
// parameter did nothing; a parameter given twice was taken the first
// time. Both are 400 bad_request, naming the parameter and those the
// route takes (decision 482). The probes, /metrics and the console's
// static files are left alone: load balancers and scrapers may add
// parameters of their own to them.
var queryParams = mustQueryParams(OpenAPI)

func mustQueryParams(doc []byte) map[string][]string {
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		panic(fmt.Sprintf("api: openapi.json: %v", err))
	}
	out := map[string][]string{}
	for path, ops := range d.Paths {
		if !strings.HasPrefix(path, "/v1/") || path == "/v1/openapi.json" {
			continue
		}
		for method, raw := range ops {
			if method != "get" && method != "post" {
				continue // a CORS preflight carries the query of the request it asks for
			}
			var op struct {
				Parameters []struct {
					Name string `json:"name"`
					In   string `json:"in"`
				} `json:"parameters"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				continue // not an operation (a path's own parameters, a summary)
			}
			names := []string{}
			for _, p := range op.Parameters {
				if p.In == "query" {
					names = append(names, p.Name)
				}
			}
			sort.Strings(names)
			out[strings.ToUpper(method)+" "+path] = names
		}
	}
	return out
}

// shownParam is what of a query parameter's name a refusal repeats: a
// short plain name; anything else (a token pasted there included) is
// not shown.
var shownParam = regexp.MustCompile(`^[A-Za-z0-9_.\-\[\]]{1,32}$`)

// strictQuery refuses a request under /v1/ whose query has a parameter
// its route does not take, or one parameter twice.
func strictQuery(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery == "" {
			mux.ServeHTTP(w, r)
			return
		}
		_, pattern := mux.Handler(r)
		takes, ok := queryParams[pattern]
		if !ok {
			mux.ServeHTTP(w, r)
			return
		}
		r.Pattern = pattern // the route's metrics count a refusal here too
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			writeError(w, badRequest(ReasonBadRequest, "the query is not a valid URL query (a %% not followed by two hexadecimal digits, or a ;): %s", takesWords(takes)))
			return
		}
		keys := make([]string, 0, len(q))
		for k := range q {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			name := "a query parameter (not shown)"
			if shownParam.MatchString(k) && !strings.HasPrefix(k, "ldg_") {
				name = fmt.Sprintf("query parameter %q", k)
			}
			if !contains(takes, k) {
				writeError(w, badRequest(ReasonBadRequest, "unknown %s: %s", name, takesWords(takes)))
				return
			}
			if len(q[k]) > 1 {
				writeError(w, badRequest(ReasonBadRequest, "%s given %d times: give it once", name, len(q[k])))
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}

func takesWords(takes []string) string {
	if len(takes) == 0 {
		return "this endpoint takes none"
	}
	return "this endpoint takes " + strings.Join(takes, ", ")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
