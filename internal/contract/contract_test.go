package contract_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/contract"
)

// TestDocument: openapi.json is a valid OpenAPI 3.1 document (the
// validator checks it against the specification's schema).
func TestDocument(t *testing.T) {
	if _, err := contract.New(); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Fatalf("openapi.json: version %q, %v; want 3.1.x", doc.OpenAPI, err)
	}
}

// route is a pattern of http.ServeMux: "GET /v1/pools/{pool}".
var route = regexp.MustCompile(`"((?:GET|POST|PUT|DELETE|PATCH|HEAD) (/[^"]*))"`)

// TestEveryRouteIsDescribed reads the routes the server registers (the
// API's, the console's, the probes') from their sources, and checks that
// the document describes each, with its method, and nothing else.
func TestEveryRouteIsDescribed(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	described := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "options" { // a preflight, answered for every path (the API's cors)
				described[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	registered := map[string]string{}
	for _, dir := range []string{"../api", "../console", "../health"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var code []string // the source without its comment lines
			for _, line := range strings.Split(string(src), "\n") {
				if !strings.HasPrefix(strings.TrimSpace(line), "//") {
					code = append(code, line)
				}
			}
			for _, m := range route.FindAllStringSubmatch(strings.Join(code, "\n"), -1) {
				p := strings.TrimSuffix(m[1], "{$}") // "GET /{$}" is the exact root
				p = regexp.MustCompile(`\{([a-z_]+)\.\.\.\}`).ReplaceAllString(p, "{$1}")
				registered[p] = f
			}
		}
	}
	// The console's static files are served under /console/ (a subtree
	// pattern): the page and each asset.
	if _, ok := registered["GET /console/"]; ok {
		registered["GET /console/{asset}"] = registered["GET /console/"]
	}
	if len(registered) < 10 {
		t.Fatalf("found only %d routes in the sources: the scan is broken", len(registered))
	}
	for r, f := range registered {
		if !described[r] {
			t.Errorf("%s (%s) is not in openapi.json", r, f)
		}
	}
	for r := range described {
		if _, ok := registered[r]; !ok {
			t.Errorf("openapi.json describes %s, which the server does not register", r)
		}
	}
	t.Logf("%d routes: %v", len(registered), slices.Sorted(func(yield func(string) bool) {
		for r := range registered {
			if !yield(r) {
				return
			}
		}
	}))
}

// TestChecker: an answer the document describes passes; one with a field
// it does not list, or a status the operation does not list, is a
// violation; the server's 404 to a route the API does not have is not.
func TestChecker(t *testing.T) {
	c, err := contract.New()
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) *http.Request {
		r, err := http.NewRequest(http.MethodGet, "http://ledger.example"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	js := http.Header{"Content-Type": {"application/json"}}
	text := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	c.Check(get("/v1/pools/p/allocations"), 200, js, []byte(`{"pool":"p","seq":3,"consumers":[],"hosts_allocations":[]}`))
	c.Check(get("/no/such/route"), 404, text, []byte("404 page not found\n"))
	if err := c.Err(); err != nil {
		t.Fatalf("answers the contract describes: %v", err)
	}
	for _, bad := range []struct {
		path   string
		status int
		h      http.Header
		body   string
	}{
		{"/v1/pools/p/allocations", 200, js, `{"pool":"p","seq":3,"consumers":[],"hosts_allocations":[],"extra":1}`},
		{"/v1/pools/p/allocations", 200, js, `{"pool":"p","seq":-1,"consumers":[],"hosts_allocations":[]}`},
		{"/v1/pools/p/allocations", 418, js, `{"error":"x","reason":"teapot"}`},
		{"/v1/pools/p/allocations", 503, text, "busy"},
		{"/v1/pools/p/unknown", 200, js, `{}`},
	} {
		c, _ := contract.New()
		c.Check(get(bad.path), bad.status, bad.h, []byte(bad.body))
		if c.Err() == nil {
			t.Errorf("GET %s answered %d %s: no violation", bad.path, bad.status, bad.body)
		}
	}
}
