package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// Round 10 (helper-41): a query parameter a route does not take was
// ignored, so `decisions?from=100` (for from_seq) answered from the
// first event and `allocations?at=5` answered as of now, each 200 with
// nothing saying the parameter did nothing; one given twice was taken
// the first time. A body's unknown or repeated key is refused; so is a
// query's now: 400 naming the parameter and what the route takes, a
// token-shaped name not repeated, nothing appended (decision 482). Sent
// as a dashboard (read on its pool) and a scheduler (append) would.
func TestQueryParametersReadStrictly(t *testing.T) {
	reader, readerEntry, err := auth.Generate("dashboard", []auth.Scope{auth.ScopeRead}, []string{"p"})
	if err != nil {
		t.Fatal(err)
	}
	natsURL := testenv.NATS(t)
	l, _, writer := statusLedger(t, natsURL, testdb.New(t), readerEntry)
	l.token = reader
	pasted := "ldg_" + strings.Repeat("A", 43)
	for _, c := range []struct {
		name, path string
		words      []string
		not        string
	}{
		{"from for from_seq", "/v1/pools/p/decisions?from=100", []string{`"from"`, "takes from_seq, limit"}, ""},
		{"from_seq twice", "/v1/pools/p/decisions?from_seq=1&from_seq=99", []string{`"from_seq" given 2 times`}, ""},
		{"at on allocations", "/v1/pools/p/allocations?at=5", []string{`"at"`, "takes none"}, ""},
		{"seq twice on as-of", "/v1/pools/p/as-of?seq=5&seq=6", []string{`"seq" given 2 times`}, ""},
		{"a typo on the pools page", "/v1/pools?limt=5", []string{`"limt"`, "takes after, limit, prefix"}, ""},
		{"an unknown filter of the timeline", "/v1/pools/p/timeline?host=h1", []string{`"host"`, "takes before, consumer, kind, limit, rule"}, ""},
		{"a token pasted as a parameter", "/v1/pools/p/allocations?" + pasted, []string{"(not shown)"}, pasted},
		{"a token pasted as a value of one", "/v1/status?token=" + pasted, []string{`"token"`}, pasted},
		{"a query that is not one", "/v1/pools/p/decisions?from_seq=%zz", []string{"not a valid URL query"}, ""},
	} {
		resp, raw := l.request(http.MethodGet, c.path, "", nil)
		msg := errorOf(t, c.name, resp, raw, http.StatusBadRequest, "bad_request")
		checkOwnWords(t, c.name, msg, c.words...)
		if c.not != "" && strings.Contains(string(raw), c.not) {
			t.Errorf("%s: the answer repeats the token: %s", c.name, raw)
		}
	}
	// An append with a parameter is refused before anything is stored.
	n := streamMsgs(t, l.js)
	resp, raw := send(t, http.MethodPost, l.url+"/v1/pools/p/events?dry_run=1", `{"type":"host_up","data":{"host":"h1","slots":4}}`, writer, nil)
	checkOwnWords(t, "dry_run on an append", errorOf(t, "dry_run on an append", resp, raw, http.StatusBadRequest, "bad_request"), `"dry_run"`, "takes none")
	if m := streamMsgs(t, l.js); m != n {
		t.Fatalf("the stream holds %d messages after the refusal, want %d", m, n)
	}
	// What a route takes, each once, still goes through.
	for _, path := range []string{"/v1/pools/p/decisions?from_seq=1&limit=5", "/v1/pools?limit=5&prefix=p", "/v1/pools/p/allocations"} {
		if resp, raw := l.request(http.MethodGet, path, "", nil); resp.StatusCode == http.StatusBadRequest {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, raw)
		}
	}
	// The probes and the console's files take what a load balancer adds.
	for _, path := range []string{"/healthz?lb=1", "/console/?v=2"} {
		if resp, raw := l.request(http.MethodGet, path, "", nil); resp.StatusCode == http.StatusBadRequest {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, raw)
		}
	}
}
