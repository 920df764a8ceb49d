package producer

import (
	"context"
	"errors"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/events"
)

// env reads what the ledger's test gives this module: the address and a
// token per role.
func env(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: this module's test runs from the ledger's TestClientFromAnotherModule", name)
	}
	return v
}

// TestProducer uses the library from outside the ledger's module: an
// atomic batch, demand under the job's id and its retry stored once,
// typed refusals, allocations once projected, decisions, a what-if.
func TestProducer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := env(t, "LEDGER_URL")
	s := &Scheduler{Pool: env(t, "LEDGER_POOL"),
		Planner: client.New(url, client.WithToken(env(t, "LEDGER_PLANNER_TOKEN"))),
		Jobs:    client.New(url, client.WithToken(env(t, "LEDGER_PRODUCER_TOKEN")))}
	reader := client.New(url, client.WithToken(env(t, "LEDGER_READER_TOKEN")))

	if err := s.Declare(ctx, map[string]int64{"/batch": 1, "/web": 3}, map[string]int64{"n1": 20, "n2": 20}); err != nil {
		t.Fatalf("declare: %v", err)
	}
	first, err := s.Want(ctx, "job-42", "/batch", 40)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Want(ctx, "job-42", "/batch", 40) // the scheduler restarted and sends it again
	if err != nil || !again.Duplicate || again.Seq != first.Seq {
		t.Fatalf("a retry of job-42: %+v, %v; want a duplicate of %+v", again, err, first)
	}
	// The same id with other content is a conflict, not a duplicate.
	_, err = s.Want(ctx, "job-42", "/batch", 41)
	var e *client.Error
	if !errors.Is(err, client.CodeIDConflict) || !errors.As(err, &e) || e.Status != http.StatusConflict {
		t.Fatalf("job-42 with other content: %v, want 409 id_conflict", err)
	}
	if _, err := s.Want(ctx, "job-43", "/gpu", 1); !errors.Is(err, client.CodeUnknownConsumer) {
		t.Fatalf("demand of a team not in the plan: %v, want unknown_consumer", err)
	}
	// The producer's token may not plan, nor read.
	ev, _ := client.NewEvent(&events.HostDown{Host: "n1"})
	if _, err := s.Jobs.Append(ctx, s.Pool, ev); !errors.Is(err, client.CodeMissingScope) {
		t.Fatalf("host_down with the producer's token: %v, want missing_scope", err)
	}
	if _, err := s.Jobs.Allocations(ctx, s.Pool); !errors.Is(err, client.CodeMissingScope) {
		t.Fatalf("a read with the producer's token: %v, want missing_scope", err)
	}

	web, err := s.Want(ctx, "job-44", "/web", 40)
	if err != nil {
		t.Fatal(err)
	}
	a, err := reader.WaitProjected(ctx, s.Pool, web.Seq)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]int64{}
	for _, c := range a.Consumers {
		held[c.Path] = c.Allocated
	}
	if held["/batch"] != 10 || held["/web"] != 30 {
		t.Fatalf("allocations %v; want /batch 10 and /web 30 (shares 1:3 of 40 slots)", held)
	}
	var reclaimed int64
	for d, err := range reader.AllDecisions(ctx, s.Pool, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if d.Kind == "reclaim" && d.Consumer == "/web" && d.FromConsumer == "/batch" {
			reclaimed += d.Slots
		}
	}
	if reclaimed != 30 {
		t.Fatalf("/web reclaimed %d slots from /batch, want 30", reclaimed)
	}

	// What if /batch's share were 3 too? Nothing is appended.
	three := int64(3)
	plan, err := client.NewWhatIfEvent(&events.PlanChange{Plan: events.Plan{Policy: events.Policy{Reclaim: events.ReclaimShareRatio},
		Consumers: []events.Consumer{{Path: "/batch", Share: &three}, {Path: "/web", Share: &three}}}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := reader.WhatIf(ctx, s.Pool, client.WhatIfRequest{Events: []client.WhatIfEvent{plan}})
	if err != nil {
		t.Fatal(err)
	}
	after := map[string]int64{}
	for _, c := range w.Consumers {
		if c.After != nil {
			after[c.Path] = c.After.Allocated
		}
	}
	if w.Appended || w.At.Seq != web.Seq || after["/batch"] != 20 || after["/web"] != 20 {
		t.Fatalf("what-if: appended %v at %+v, after %v; want nothing appended, at %d, 20 and 20", w.Appended, w.At, after, web.Seq)
	}
}
