package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/contract"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// errorOf decodes an error answer and checks its status and reason.
func errorOf(t *testing.T, what string, resp *http.Response, raw []byte, status int, reason string) string {
	t.Helper()
	var e client.ErrorBody
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Errorf("%s: answer %d %q is not an error body: %v", what, resp.StatusCode, raw, err)
		return ""
	}
	if resp.StatusCode != status || e.Reason != reason || e.Error == "" {
		t.Errorf("%s: got %d %+v, want %d %s", what, resp.StatusCode, e, status, reason)
	}
	return e.Error
}

// Every refused request appends nothing; each gets its status and reason.
func TestAccessRefusals(t *testing.T) {
	natsURL := testenv.NATS(t)
	l := newLedger(t, natsURL)
	setup(l, "p")
	n := streamMsgs(t, l.js)
	body := `{"type":"demand","data":{"demands":{"/a":1}}}`
	path := "/v1/pools/p/events"
	cases := []struct {
		name   string
		hdr    map[string]string
		status int
		reason string
	}{
		{"no token", map[string]string{"Authorization": ""}, 401, "unauthenticated"},
		{"unknown token", map[string]string{"Authorization": "Bearer ldg_nope"}, 401, "unauthenticated"},
		{"basic auth", map[string]string{"Authorization": "Basic YWRtaW46YWRtaW4="}, 401, "unauthenticated"},
		{"text/plain", map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type"},
		{"no content type", map[string]string{"Content-Type": ""}, 415, "unsupported_media_type"},
		{"form", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"evil origin", map[string]string{"Origin": "http://evil.example"}, 403, "origin_not_allowed"},
		// The attack of the issue: a page's text/plain POST, even with a token.
		{"evil origin, text/plain", map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}, 403, "origin_not_allowed"},
	}
	for _, c := range cases {
		resp, raw := l.request(http.MethodPost, path, body, c.hdr)
		errorOf(t, c.name, resp, raw, c.status, c.reason)
		if c.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", c.name)
		}
	}
	// Reads need a token too.
	resp, raw := send(t, http.MethodGet, l.url+"/v1/pools/p/allocations", "", "", nil)
	errorOf(t, "read without a token", resp, raw, 401, "unauthenticated")
	if m := streamMsgs(t, l.js); m != n {
		t.Errorf("stream holds %d messages after refusals, want %d", m, n)
	}
	// A charset parameter is still JSON.
	resp, raw = l.request(http.MethodPost, path, body, map[string]string{"Content-Type": "application/json; charset=utf-8"})
	if resp.StatusCode != 200 {
		t.Errorf("application/json; charset=utf-8: %d %s", resp.StatusCode, raw)
	}
}

// A token may only do what its scopes allow on its pools, and the
// producer recorded is the token's name whatever the request claims.
func TestScopesAndProducer(t *testing.T) {
	natsURL := testenv.NATS(t)
	admin := newLedger(t, natsURL)
	setup(admin, "p")
	setup(admin, "q")

	sched, e1 := mustToken(t, "scheduler", []auth.Scope{auth.ScopeAppend}, "p")
	ops, e2 := mustToken(t, "ops", []auth.Scope{auth.ScopePlan}, auth.AllPools)
	reader, e3 := mustToken(t, "dashboard", []auth.Scope{auth.ScopeRead}, auth.AllPools)
	tokens, err := auth.New(e1, e2, e3)
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger(t, natsURL, api.WithTokens(tokens))
	post := func(token, pool, body string) (*http.Response, []byte) {
		return send(t, http.MethodPost, l.url+"/v1/pools/"+pool+"/events", body, token, nil)
	}
	n := streamMsgs(t, l.js)
	demandA := `{"type":"demand","data":{"demands":{"/a":1}}}`
	hostUp := `{"type":"host_up","data":{"host":"h2","slots":1}}`
	refusals := []struct {
		name, token, pool, body string
		reason                  string
	}{
		{"append token on another pool", sched, "q", demandA, "pool_not_allowed"},
		{"append token sends a host", sched, "p", hostUp, "missing_scope"},
		{"append token sends a plan in an array", sched, "p", `[` + demandA + `,{"type":"plan","data":{"plan":{"consumers":[{"path":"/z"}]}}}]`, "missing_scope"},
		{"plan token sends a demand", ops, "p", demandA, "missing_scope"},
		{"read token writes", reader, "p", demandA, "missing_scope"},
		{"producer claimed", sched, "p", `{"type":"demand","producer":"someone-else","data":{"demands":{"/a":1}}}`, "producer_mismatch"},
	}
	for _, c := range refusals {
		resp, raw := post(c.token, c.pool, c.body)
		errorOf(t, c.name, resp, raw, 403, c.reason)
	}
	if m := streamMsgs(t, l.js); m != n {
		t.Fatalf("stream holds %d messages after refusals, want %d", m, n)
	}
	resp, raw := send(t, http.MethodGet, l.url+"/v1/pools/p/allocations", "", sched, nil)
	errorOf(t, "append token reads", resp, raw, 403, "missing_scope")

	for _, ok := range []struct{ token, body, producer string }{
		{sched, demandA, "scheduler"},
		{sched, `{"type":"demand","producer":"scheduler","data":{"demands":{"/a":2}}}`, "scheduler"},
		{ops, hostUp, "ops"},
	} {
		if resp, raw := post(ok.token, "p", ok.body); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", ok.body, resp.StatusCode, raw)
		}
		got := poolEvents(t, l.js, "p")
		if p := got[len(got)-1].stored.Envelope.Producer; p != ok.producer {
			t.Errorf("%s: producer %q, want the token's name %q", ok.body, p, ok.producer)
		}
	}
}

func mustToken(t *testing.T, name string, scopes []auth.Scope, pools ...string) (string, auth.Entry) {
	t.Helper()
	token, e, err := auth.Generate(name, scopes, pools)
	if err != nil {
		t.Fatal(err)
	}
	return token, e
}

// An allowed origin is served (with CORS headers, and its preflight is
// answered); every other origin is refused on every route.
func TestAllowedOrigin(t *testing.T) {
	l := newLedger(t, testenv.NATS(t), api.WithAllowedOrigins("https://console.example"))
	setup(l, "p")
	resp, raw := l.request(http.MethodPost, "/v1/pools/p/events", `{"type":"demand","data":{"demands":{"/a":1}}}`,
		map[string]string{"Origin": "https://console.example"})
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "https://console.example" {
		t.Errorf("allowed origin: %d %s, CORS %q", resp.StatusCode, raw, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	resp, _ = l.request(http.MethodOptions, "/v1/pools/p/events", "", map[string]string{"Origin": "https://console.example"})
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Headers") == "" {
		t.Errorf("preflight of an allowed origin: %d %v", resp.StatusCode, resp.Header)
	}
	for _, m := range []string{http.MethodOptions, http.MethodGet} {
		resp, raw = l.request(m, "/healthz", "", map[string]string{"Origin": "https://console.example.evil"})
		errorOf(t, m+" from another origin", resp, raw, 403, "origin_not_allowed")
	}
	// The server's own pages (the console) may read, not write.
	self := l.url // http://127.0.0.1:port
	if resp, raw = l.request(http.MethodGet, "/v1/pools/p/allocations", "", map[string]string{"Origin": self}); resp.StatusCode == 403 {
		t.Errorf("same-origin read: %d %s", resp.StatusCode, raw)
	}
	resp, raw = l.request(http.MethodPost, "/v1/pools/p/events", `{"type":"demand","data":{"demands":{"/a":1}}}`, map[string]string{"Origin": self})
	errorOf(t, "same-origin POST", resp, raw, 403, "origin_not_allowed")
}

// Other handlers mounted on the server (the console) get the same checks.
func TestHandleRead(t *testing.T) {
	l := newLedger(t, testenv.NATS(t))
	l.srv.HandleRead("GET /console/{pool}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := api.IdentityFrom(r.Context())
		_, _ = w.Write([]byte(id.Name))
	}))
	// The handler is the test's own, no route of the API: its answers
	// are not checked against the API's contract.
	get := func(token string) (*http.Response, []byte) {
		rq, _ := http.NewRequest(http.MethodGet, l.url+"/console/p", nil)
		if token != "" {
			rq.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := contract.Unchecked().Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp, raw
	}
	resp, raw := get(l.token)
	if resp.StatusCode != 200 || string(raw) != "admin" {
		t.Errorf("console with the admin token: %d %q", resp.StatusCode, raw)
	}
	resp, raw = get("")
	errorOf(t, "console without a token", resp, raw, 401, "unauthenticated")
}
