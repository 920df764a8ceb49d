package metrics_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/metrics"
)

// A projector restarted on a projection without saved states (the one
// before it was killed) rebuilds its pools from the log;
// its own /metrics listener (metrics.Serve, as `projector
// --metrics-listen` runs it) reports the rebuild, and refuses scrapes
// without a metrics token.
func TestProjectorListenerReportsReplay(t *testing.T) {
	reg := metrics.New()
	s := newStack(t, reg)
	stop := s.runProjector(reg.Projector())
	for _, pool := range []string{"a", "b"} {
		if code, reason := s.post(s.appender, pool, "["+planB+","+hostUp("h1", 4)+","+demand("/x", 2)+","+demand("/x", 3)+"]"); code != http.StatusOK {
			t.Fatalf("POST %s: %d %s", pool, code, reason)
		}
	}
	waitFor(t, s.url, s.admin, "the first projector", func(f families) bool {
		n, _ := f.value("ledger_projector_events_total", "projector", "projector")
		return n == 8
	})
	stop()
	// A projector that stops saves each pool's state, so the next one
	// starts without folding the log; one killed (kill -9) saves nothing:
	// drop the saved states, and the next start rebuilds every pool from
	// the log, as this test wants to see reported.
	if _, err := s.ownerDB.Exec(context.Background(), `DELETE FROM saved_states`); err != nil {
		t.Fatal(err)
	}

	// The second projector has its own registry and listener.
	reg2 := metrics.New()
	token, e, err := auth.Generate("prometheus", []auth.Scope{auth.ScopeMetrics}, []string{auth.AllPools})
	if err != nil {
		t.Fatal(err)
	}
	reader, e2, _ := auth.Generate("reader", []auth.Scope{auth.ScopeRead}, []string{auth.AllPools})
	tokens, err := auth.New(e, e2)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr, served := make(chan string, 1), make(chan error, 1)
	go func() { served <- metrics.Serve(ctx, "127.0.0.1:0", reg2, tokens, quiet, func(a string) { addr <- a }) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("metrics.Serve: %v", err)
		}
	}()
	base := "http://" + <-addr
	s.runProjector(reg2.Projector())
	if code, _ := scrape(t, base, ""); code != http.StatusUnauthorized {
		t.Errorf("listener without a token: %d, want 401", code)
	}
	if code, _ := scrape(t, base, reader); code != http.StatusForbidden {
		t.Errorf("listener with a read token: %d, want 403", code)
	}
	// A path or method the listener lacks is answered in JSON too.
	for _, m := range []string{http.MethodGet + " /nothing", http.MethodPost + " /metrics"} {
		method, path, _ := strings.Cut(m, " ")
		rq, _ := http.NewRequest(method, base+path, nil)
		resp, err := http.DefaultClient.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); (resp.StatusCode != 404 && resp.StatusCode != 405) || ct != "application/json" {
			t.Errorf("listener, %s: %d %s, want 404 or 405 in JSON", m, resp.StatusCode, ct)
		}
	}
	f := waitFor(t, base, token, "the rebuild", func(f families) bool {
		done, _ := f.value("ledger_projector_replay_pools_done", "projector", "projector")
		return done == 2
	})
	f.must(t, 2, "ledger_projector_replay_pools", "projector", "projector")
	f.must(t, 0, "ledger_projector_replaying", "projector", "projector")
	// No snapshot yet (one every 10000 events): every event is folded again.
	f.must(t, s.queryInt(`SELECT count(*) FROM events`), "ledger_projector_replayed_events_total", "projector", "projector")
	f.must(t, 0, "ledger_projector_lag_events", "projector", "projector")
	if _, ok := f.value("ledger_projector_events_total", "projector", "projector"); ok {
		t.Error("the restarted projector counts events projected before it started")
	}
}
