package unrouted_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/unrouted"
)

// A server's mux answers 404 and 405 as text; wrapped, they are JSON
// with a reason (405 keeps Allow), a handler's http.NotFound too, and
// every other answer, JSON or text, passes through as it was.
func TestTextErrorsBecomeJSON(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "# metrics\n") })
	mux.HandleFunc("GET /gone", http.NotFound)
	mux.HandleFunc("GET /teapot", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "short and stout", http.StatusTeapot) })
	srv := httptest.NewServer(unrouted.JSON(mux, nil))
	defer srv.Close()
	for _, c := range []struct {
		method, path string
		status       int
		reason, body string
	}{
		{"GET", "/nothing", 404, unrouted.ReasonNotFound, ""},
		{"GET", "/gone", 404, unrouted.ReasonNotFound, ""},
		{"POST", "/metrics", 405, unrouted.ReasonMethodNotAllowed, ""},
		{"GET", "/metrics", 200, "", "# metrics\n"},
		{"GET", "/teapot", 418, "", "short and stout\n"},
	} {
		rq, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.status)
		}
		if c.reason == "" {
			if string(raw) != c.body {
				t.Errorf("%s %s: %q, want it untouched: %q", c.method, c.path, raw, c.body)
			}
			continue
		}
		var e struct{ Error, Reason string }
		if err := json.Unmarshal(raw, &e); err != nil || e.Reason != c.reason || !strings.Contains(e.Error, c.path) ||
			resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %s %q (%v), want JSON with reason %s naming the path", c.method, c.path, resp.Header.Get("Content-Type"), raw, err, c.reason)
		}
		if c.status == 405 && !strings.Contains(resp.Header.Get("Allow"), "GET") {
			t.Errorf("405 without Allow: %q", resp.Header.Get("Allow"))
		}
	}
}
