package api_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/metrics"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/nats-io/nats.go/jetstream"
)

// A producer that swaps its two strings (client.New(url,
// client.WithToken(pool)) and Append(ctx, token, ...)), or a script that
// puts $LEDGER_TOKEN where the pool goes, sends its bearer token as the
// pool name of the URL. The token must not be written where others read
// it: the access log, /metrics (a refusal's pool label), and above all
// the log itself, where a plan would make it a pool name forever, listed
// to every reader of every pool. A name of a token's shape is refused as
// a pool name (400 invalid_pool, not echoed), and an invalid pool name
// is not logged. Each as the identity that would send it: a producer and
// a planner of every pool, a reader, Prometheus.
func TestTokenAsPoolNameIsNeitherLoggedNorStored(t *testing.T) {
	producer, pe := mustToken(t, "scheduler", []auth.Scope{auth.ScopeAppend}, auth.AllPools)
	planner, le := mustToken(t, "planner", []auth.Scope{auth.ScopePlan}, auth.AllPools)
	reader, re := mustToken(t, "dashboard", []auth.Scope{auth.ScopeRead}, auth.AllPools)
	scraper, me := mustToken(t, "prometheus", []auth.Scope{auth.ScopeMetrics}, auth.AllPools)
	tokens, err := auth.New(pe, le, re, me)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	natsURL, dbURL := testenv.NATS(t), testenv.Postgres(t)
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- api.Serve(ctx, api.ServeConfig{HTTPAddr: "127.0.0.1:0", NATSURL: natsURL, NATSCreds: testenv.Creds(t, natsURL, natsauth.Ledger),
			DatabaseURL: dbURL, Migrate: true, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
			Options: []api.Option{api.WithTokens(tokens), api.WithMetrics(metrics.New())},
			Ready:   func(a string) { ready <- a }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	var url string
	select {
	case a := <-ready:
		url = "http://" + a
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the API did not start within 60s")
	}
	actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer acancel()

	plan, _ := client.NewEvent(&events.PlanChange{Plan: events.Plan{Consumers: []events.Consumer{{Path: "/a"}}}})
	demand, _ := client.NewEvent(&events.Demand{Demands: map[string]int64{"/a": 1}})
	// The producer's strings swapped: its pool as the token, its token as
	// the pool.
	_, err = client.New(url, client.WithToken("gpu")).Append(actx, producer, demand)
	if !errors.Is(err, client.CodeUnauthenticated) {
		t.Errorf("swapped producer: %v, want 401", err)
	}
	// A valid token with another's token as the pool: refused, for every
	// route, and not echoed.
	for name, c := range map[string]*client.Client{"producer": client.New(url, client.WithToken(producer)), "planner": client.New(url, client.WithToken(planner))} {
		ev := demand
		if name == "planner" {
			ev = plan
		}
		_, err := c.Append(actx, reader, ev)
		if !errors.Is(err, client.CodeInvalidPool) || strings.Contains(err.Error(), reader) {
			t.Errorf("%s appending to a token-named pool: %v, want invalid_pool without the name", name, err)
		}
	}
	for _, path := range []string{"allocations", "decisions", "timeline"} {
		var out any
		err := client.New(url, client.WithToken(reader)).Get(actx, "/v1/pools/"+producer+"/"+path, &out)
		var ce *client.Error
		// (The console's routes answer a bad pool name bad_request.)
		if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || !strings.Contains(ce.Message, "shape of a bearer token") || strings.Contains(err.Error(), producer) {
			t.Errorf("reading %s of a token-named pool: %v, want 400 without the name", path, err)
		}
	}
	// Nothing stored under it.
	js := testenv.JetStream(t, natsURL)
	st, err := js.Stream(actx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(actx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		t.Fatal(err)
	}
	for subj := range info.State.Subjects {
		if strings.Contains(subj, "ldg_") {
			t.Errorf("the log holds %s", subj)
		}
	}
	// Neither the log nor the metrics show a token.
	series := scrapeMetrics(t, url, scraper)
	for s := range series {
		for _, tok := range []string{producer, planner, reader} {
			if strings.Contains(s, tok) {
				t.Errorf("/metrics shows a token: %s", s)
			}
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		for _, tok := range []string{producer, planner, reader, scraper} {
			if strings.Contains(line, tok) {
				t.Errorf("a log line shows a token: %s", line)
			}
		}
	}
}
