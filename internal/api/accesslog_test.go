package api_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// Every request gets one access line with the answer's request id, the
// token's name (never the token), the pool, method, route, status,
// latency and bytes; every line of the log is JSON.
func TestAccessLog(t *testing.T) {
	var logs syncBuffer
	l := newLedger(t, testenv.NATS(t), api.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	type sent struct {
		method, path, body, token string
		status                    int
		tokenName, pool, route    string
	}
	cases := []sent{
		{"POST", "/v1/pools/p/events", `{"type":"host_up","data":{"host":"h1","slots":4}}`, l.token, 200, "admin", "p", "POST /v1/pools/{pool}/events"},
		{"POST", "/v1/pools/p/events", `{"type":"release","data":{"consumer":"/nobody","slots":1}}`, l.token, 422, "admin", "p", "POST /v1/pools/{pool}/events"},
		{"POST", "/v1/pools/p/events", `{"type":"demand","data":{"demands":{"/a":1}}}`, "ldg_not-a-known-token", 401, "", "p", "POST /v1/pools/{pool}/events"},
		{"GET", "/v1/pools/q/allocations", "", l.token, 503, "admin", "q", "GET /v1/pools/{pool}/allocations"},
		{"GET", "/healthz", "", "", 0, "", "", "GET /healthz"},
		{"GET", "/no/such/route", "", l.token, 404, "", "", "unmatched"},
	}
	ids := map[string]sent{}
	for _, c := range cases {
		resp, raw := send(t, c.method, l.url+c.path, c.body, c.token, nil)
		if c.status != 0 && resp.StatusCode != c.status {
			t.Fatalf("%s %s: %d %s, want %d", c.method, c.path, resp.StatusCode, raw, c.status)
		}
		c.status = resp.StatusCode
		id := resp.Header.Get(api.RequestIDHeader)
		if id == "" {
			t.Fatalf("%s %s: no request id", c.method, c.path)
		}
		ids[id] = c
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", line, err)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if rec[k] == nil {
				t.Errorf("log line without %s: %s", k, line)
			}
		}
		if strings.Contains(line, l.token) || strings.Contains(line, "ldg_not-a-known-token") || strings.Contains(line, "Bearer") {
			t.Errorf("a log line shows a token: %s", line)
		}
		if rec["msg"] != "http request" {
			continue
		}
		c, ok := ids[rec["request_id"].(string)]
		if !ok {
			t.Errorf("access line with a request id no answer carried: %s", line)
			continue
		}
		seen++
		want := map[string]any{"token": c.tokenName, "pool": c.pool, "method": c.method, "route": c.route, "status": float64(c.status)}
		for k, v := range want {
			if rec[k] != v {
				t.Errorf("%s %s: access line %s=%v, want %v: %s", c.method, c.path, k, rec[k], v, line)
			}
		}
		if b, _ := rec["bytes"].(float64); b <= 0 {
			t.Errorf("%s %s: access line counts %v bytes: %s", c.method, c.path, rec["bytes"], line)
		}
		if _, ok := rec["latency_ms"].(float64); !ok {
			t.Errorf("%s %s: no latency_ms: %s", c.method, c.path, line)
		}
	}
	if seen != len(cases) {
		t.Errorf("%d access lines for %d requests:\n%s", seen, len(cases), logs.String())
	}
}
