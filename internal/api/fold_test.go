package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// publishEnvelope stores an envelope on subject as a process holding the
// ledger's NATS identity could, around the API (the tests' ledger runs
// without signing keys, so the API's view trusts it as it would a signed
// event).
func publishEnvelope(t *testing.T, l *ledger, subject, envPool string, p events.Payload) {
	t.Helper()
	env, err := events.New("raw-"+subject, envPool, "raw", time.Now().UTC(), p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := l.js.Publish(ctx, subject, b); err != nil {
		t.Fatal(err)
	}
}

// TestAPIFoldsAsTheProjector: the API validates appends against the log
// folded through the projector's own function, so an event stored under
// one pool's subject whose envelope names another pool counts for
// nothing in the API either: a demand only that event's plan would allow
// is refused, where the projector would refuse it after the append.
func TestAPIFoldsAsTheProjector(t *testing.T) {
	l := newLedger(t, testenv.NATS(t))
	setup(l, "p1")
	plan := &events.PlanChange{Plan: events.Plan{Rules: 3, Consumers: []events.Consumer{{Path: "/a"}, {Path: "/b"}, {Path: "/intruder"}}}}
	publishEnvelope(t, l, "ledger.p1.plan", "other", plan)

	status, _, e := l.post("p1", demand(map[string]int{"/intruder": 1}))
	if status != http.StatusUnprocessableEntity || e.Reason != "unknown_consumer" {
		t.Fatalf("demand for a consumer only a mismatched envelope's plan names: %d %+v, want 422 unknown_consumer", status, e)
	}
	l.mustPost("p1", demand(map[string]int{"/a": 1}))
}

// TestAPIRefusesPoolNeedingNewerLedger: a pool whose log holds a plan
// naming a rules version this build lacks is not appended to: 503
// needs_newer_ledger naming the sequence, never a refusal recorded in the
// API's view that a newer projector would not make.
func TestAPIRefusesPoolNeedingNewerLedger(t *testing.T) {
	l := newLedger(t, testenv.NATS(t))
	setup(l, "p1")
	publishEnvelope(t, l, "ledger.p1.plan", "p1", &events.PlanChange{Plan: events.Plan{Rules: 99, Consumers: []events.Consumer{{Path: "/a"}}}})

	status, _, e := l.post("p1", demand(map[string]int{"/a": 1}))
	if status != http.StatusServiceUnavailable || e.Reason != api.ReasonNeedsNewer {
		t.Fatalf("append after a plan of rules version 99: %d %+v, want 503 %s", status, e, api.ReasonNeedsNewer)
	}
	l.mustPost("p2", plan(consumer("/a"))) // other pools go on
}
