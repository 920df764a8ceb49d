package metrics_test

import (
	"net/http"
	"testing"

	"github.com/cluster-ledger/ledger/internal/metrics"
)

// A real API and a real projector share a registry; the test appends,
// gets refusals, waits for the projection, and checks that the scraped
// figures are what it did and what PostgreSQL holds.
func TestScrapeMatchesWhatHappened(t *testing.T) {
	reg := metrics.New()
	s := newStack(t, reg)
	s.runProjector(reg.Projector())

	// Unauthenticated, unknown and under-scoped scrapes are refused.
	if code, _ := scrape(t, s.url, ""); code != http.StatusUnauthorized {
		t.Fatalf("scrape without a token: %d, want 401", code)
	}
	if code, _ := scrape(t, s.url, "ldg_not-a-token"); code != http.StatusUnauthorized {
		t.Fatalf("scrape with an unknown token: %d, want 401", code)
	}
	if code, _ := scrape(t, s.url, s.appender); code != http.StatusForbidden {
		t.Fatalf("scrape with a token without the metrics scope: %d, want 403", code)
	}

	// Pool a: a plan, two hosts (one request), then demands; /hi's demand
	// takes slots back from /lo (priority reclaim).
	must := func(pool, body string) {
		t.Helper()
		if code, reason := s.post(s.appender, pool, body); code != http.StatusOK {
			t.Fatalf("POST %s %s: %d %s", pool, body, code, reason)
		}
	}
	must("a", planA)
	must("a", "["+hostUp("h1", 8)+","+hostUp("h2", 8)+"]")
	const demandsA = 5
	for i := range demandsA - 1 {
		must("a", demand("/lo", 10+i))
	}
	must("a", demand("/hi", 12))
	must("b", "["+planB+","+hostUp("h1", 4)+","+demand("/x", 6)+"]")
	okRequests := 3 + demandsA

	const refusedA = 3 // demands on a consumer the plan does not name
	for range refusedA {
		if code, reason := s.post(s.appender, "a", demand("/nope", 1)); code != http.StatusUnprocessableEntity || reason != "unknown_consumer" {
			t.Fatalf("demand on /nope: %d %s", code, reason)
		}
	}
	if code, reason := s.post("", "a", demand("/lo", 1)); code != http.StatusUnauthorized {
		t.Fatalf("append without a token: %d %s", code, reason)
	}

	const appended = 1 + 2 + demandsA + 3 // events stored: a's plan, 2 hosts, demands; b's 3
	f := waitFor(t, s.url, s.other, "the projector to commit every event", func(f families) bool {
		n, _ := f.value("ledger_projector_events_total", "projector", "projector")
		lag, _ := f.value("ledger_projector_lag_events", "projector", "projector")
		return n == appended && lag == 0
	})

	// API figures: what the test did.
	f.must(t, 1, "ledger_api_events_total", "pool", "a", "type", "plan", "outcome", "appended")
	f.must(t, 2, "ledger_api_events_total", "pool", "a", "type", "host_up", "outcome", "appended")
	f.must(t, demandsA, "ledger_api_events_total", "pool", "a", "type", "demand", "outcome", "appended")
	f.must(t, 1, "ledger_api_events_total", "pool", "b", "type", "demand", "outcome", "appended")
	f.must(t, refusedA, "ledger_api_refusals_total", "pool", "a", "reason", "unknown_consumer")
	f.must(t, 1, "ledger_api_refusals_total", "pool", "", "reason", "unauthenticated")
	f.must(t, float64(okRequests), "ledger_api_append_requests_total", "outcome", "ok")
	f.must(t, refusedA+1, "ledger_api_append_requests_total", "outcome", "refused")
	f.must(t, float64(okRequests), "ledger_api_append_duration_seconds", "outcome", "ok")
	f.must(t, float64(okRequests), "ledger_http_requests_total", "route", "POST /v1/pools/{pool}/events", "code", "200")
	f.must(t, refusedA, "ledger_http_requests_total", "route", "POST /v1/pools/{pool}/events", "code", "422")
	if _, ok := f.value("ledger_api_append_errors_total"); ok {
		t.Error("append errors recorded, but no append failed")
	}

	// Projector figures: what PostgreSQL holds.
	f.must(t, s.queryInt(`SELECT count(*) FROM events`), "ledger_projector_events_total", "projector", "projector")
	f.must(t, s.queryInt(`SELECT stream_seq FROM projector_offsets WHERE name = 'projector'`), "ledger_projector_committed_sequence", "projector", "projector")
	f.must(t, 0, "ledger_projector_lag_seconds", "projector", "projector")
	f.must(t, 0, "ledger_projector_halted_pools", "projector", "projector")
	f.must(t, 0, "ledger_projector_replay_pools", "projector", "projector")
	f.must(t, 0, "ledger_projector_replaying", "projector", "projector")
	if n, _ := f.value("ledger_projector_commit_duration_seconds", "projector", "projector"); n < 2 {
		t.Errorf("%v batch commits observed; the batch size of 7 needs at least 2", n)
	}
	for _, pool := range []string{"a", "b"} {
		f.must(t, s.queryInt(`SELECT sum(slots) FROM hosts WHERE pool = $1 AND up`, pool), "ledger_pool_capacity_slots", "pool", pool)
		f.must(t, s.queryInt(`SELECT sum(allocated) FROM consumer_state WHERE pool = $1 AND leaf`, pool), "ledger_pool_allocated_slots", "pool", pool)
		f.must(t, s.queryInt(`SELECT sum(borrowed) FROM consumer_state WHERE pool = $1 AND leaf`, pool), "ledger_pool_borrowed_slots", "pool", pool)
		f.must(t, s.queryInt(`SELECT sum(demand) FROM consumer_state WHERE pool = $1 AND leaf`, pool), "ledger_pool_demand_slots", "pool", pool)
		f.must(t, s.queryInt(`SELECT coalesce(sum(greatest(demand - allocated, 0)), 0) FROM consumer_state WHERE pool = $1 AND leaf`, pool),
			"ledger_pool_unmet_demand_slots", "pool", pool)
	}
	reclaims := s.queryInt(`SELECT count(*) FROM decisions WHERE pool = 'a' AND kind = 'reclaim'`)
	if reclaims == 0 {
		t.Fatal("the scenario made no reclaim decision: it no longer tests the reclaim counter")
	}
	f.must(t, reclaims, "ledger_pool_reclaims_total", "pool", "a")
	t.Logf("pool a: capacity %v, allocated %v, unmet %v, reclaims %v",
		first(f.value("ledger_pool_capacity_slots", "pool", "a")), first(f.value("ledger_pool_allocated_slots", "pool", "a")),
		first(f.value("ledger_pool_unmet_demand_slots", "pool", "a")), reclaims)
}

func first(v float64, _ bool) float64 { return v }
