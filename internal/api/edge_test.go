package api_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
)

// The red team's F17: a path no route takes, and a method a route does
// not take, are answered in the API's error shape with a code (not
// net/http's text), to a client without a token and to a dashboard's
// read token alike; 405 keeps its Allow header.
func TestUnroutedAnswersAreJSON(t *testing.T) {
	e := newExposed(t)
	for _, c := range []struct {
		name, method, path, token string
		status                    int
		reason                    string
	}{
		{"an unknown path without a token", http.MethodGet, "/v1/nothing", "", 404, api.ReasonNotFound},
		{"an unknown path with a read token", http.MethodGet, "/v1/pools/p/nothing", e.reader, 404, api.ReasonNotFound},
		{"an asset the console lacks", http.MethodGet, "/console/nothing.js", e.reader, 404, api.ReasonNotFound},
		{"GET on the events endpoint", http.MethodGet, "/v1/pools/p/events", e.reader, 405, api.ReasonMethodNotAllowed},
		{"DELETE on the events endpoint", http.MethodDelete, "/v1/pools/p/events", "", 405, api.ReasonMethodNotAllowed},
		{"PUT on allocations", http.MethodPut, "/v1/pools/p/allocations", e.reader, 405, api.ReasonMethodNotAllowed},
	} {
		resp, raw := send(t, c.method, e.url+c.path, "", c.token, nil)
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q: %s", c.name, ct, raw)
		}
		msg := errorOf(t, c.name, resp, raw, c.status, c.reason)
		if !strings.Contains(msg, c.path) {
			t.Errorf("%s: %q does not name the path", c.name, msg)
		}
		if c.status == 405 && !strings.Contains(resp.Header.Get("Allow"), "POST") && !strings.Contains(resp.Header.Get("Allow"), "GET") {
			t.Errorf("%s: Allow %q", c.name, resp.Header.Get("Allow"))
		}
	}
}

// The red team's F20, as ledger serve runs (api.Serve's timeouts): a
// client without a token that announces a body and trickles it is
// answered 401 and its connection closed at once, not held while the
// server reads the rest (net/http went on reading it for the minute of
// its read timeout); a producer with a token whose body trickles is
// answered 408 body_timeout after api.BodyTimeout, and nothing is
// stored.
func TestSlowBodies(t *testing.T) {
	s := serve(t, api.ConnLimits{})
	addr := strings.TrimPrefix(s.url, "http://")
	trickle := func(token string) (status string, answered, closed time.Duration) {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		auth := ""
		if token != "" {
			auth = "Authorization: Bearer " + token + "\r\n"
		}
		if _, err := io.WriteString(conn, "POST /v1/pools/p/events HTTP/1.1\r\nHost: ledger\r\nContent-Type: application/json\r\n"+auth+
			"Content-Length: 4000\r\n\r\n{\"type\":\"demand\","); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		defer close(stop)
		go func() { // a byte every 200 ms: 4,000 bytes would take 13 minutes
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
					if _, err := conn.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
		_ = conn.SetReadDeadline(time.Now().Add(90 * time.Second))
		br := bufio.NewReader(conn)
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		answered = time.Since(start)
		_, _ = io.Copy(io.Discard, br) // until the server closes the connection
		return strings.TrimSpace(line), answered, time.Since(start)
	}
	status, answered, closed := trickle("")
	t.Logf("without a token: %q after %v, connection closed after %v", status, answered.Round(time.Millisecond), closed.Round(time.Millisecond))
	if !strings.Contains(status, "401") || closed > 3*time.Second {
		t.Errorf("without a token, a trickled body: %q, connection held %v (want 401 and closed within 3 s)", status, closed)
	}
	status, answered, closed = trickle(s.producer)
	t.Logf("with a producer's token: %q after %v, connection closed after %v", status, answered.Round(time.Millisecond), closed.Round(time.Millisecond))
	if !strings.Contains(status, "408") || answered < api.BodyTimeout-time.Second || closed > api.BodyTimeout+5*time.Second {
		t.Errorf("a producer's trickled body: %q after %v, closed after %v (want 408 after %v)", status, answered, closed, api.BodyTimeout)
	}
}

// The red team's F12: a dashboard's read token, revoked (`ledger token
// revoke`: the tokens file loses its entry, and the running server
// reloads it), no longer keeps its open live stream: the stream ends
// within seconds, and a new one is refused 401. Another token's stream
// stays open.
func TestRevokedTokenClosesItsLiveStreams(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.jsonl")
	dashboard, de := mustToken(t, "dashboard", []auth.Scope{auth.ScopeRead}, "p")
	wallboard, we := mustToken(t, "wallboard", []auth.Scope{auth.ScopeRead}, auth.AllPools)
	for _, e := range []auth.Entry{de, we} {
		if err := auth.AppendFile(file, e); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tokens, err := auth.Watch(ctx, file, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	e := newExposed(t, api.WithTokens(tokens))
	open := func(token, query string) <-chan time.Time {
		t.Helper()
		rq, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/v1/live"+query, nil)
		rq.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(rq)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("live stream: %v %v", resp, err)
		}
		ended := make(chan time.Time, 1)
		go func() {
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			ended <- time.Now()
		}()
		return ended
	}
	dashboardEnded := open(dashboard, "?pool=p")
	wallboardEnded := open(wallboard, "")
	time.Sleep(1500 * time.Millisecond) // past a recheck: a token in force keeps its stream
	select {
	case <-dashboardEnded:
		t.Fatal("the dashboard's stream ended while its token was in force")
	default:
	}
	revoked := time.Now()
	if _, err := auth.RevokeFile(file, "dashboard"); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-dashboardEnded:
		t.Logf("the revoked token's live stream ended %v after the revocation", at.Sub(revoked).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked token's live stream is still open 5 s after the revocation")
	}
	resp, raw := send(t, http.MethodGet, e.url+"/v1/live?pool=p", "", dashboard, nil)
	errorOf(t, "a new stream of the revoked token", resp, raw, http.StatusUnauthorized, api.ReasonUnauthenticated)
	select {
	case <-wallboardEnded:
		t.Fatal("another token's live stream ended with the revocation")
	case <-time.After(2 * time.Second):
	}
}
