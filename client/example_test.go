package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/events"
)

// The examples run against a whole ledger started for this package's
// tests (example_main_test.go): its address and a token per role, as
// `ledger token add` gives them to a site's tools.
var ledgerURL, producerToken, plannerToken, readerToken string

// setUp gives a pool a plan of two teams and a host of 16 slots, with
// the planner's token (the plan scope), in one atomic batch.
func setUp(ctx context.Context, pool string) {
	planner := client.New(ledgerURL, client.WithToken(plannerToken))
	plan, err := client.NewEvent(&events.PlanChange{Plan: events.Plan{
		Policy:    events.Policy{Reclaim: events.ReclaimShareRatio},
		Consumers: []events.Consumer{{Path: "/eng/dev"}, {Path: "/eng/qa"}},
	}})
	if err != nil {
		log.Fatal(err)
	}
	host, err := client.NewEvent(&events.HostUp{Host: "h1", Slots: 16})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := planner.Append(ctx, pool, plan, host); err != nil {
		log.Fatal(err)
	}
}

// A scheduler reports demand with a token that may append to its pools.
// A retry of the same event (same id, same content) is stored once: the
// ledger answers it as a duplicate, at the sequence of the first.
func ExampleClient_Append() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	setUp(ctx, "example-append")

	c := client.New(ledgerURL, client.WithToken(producerToken))
	ev, err := client.NewEvent(&events.Demand{Demands: map[string]int64{"/eng/dev": 12}})
	if err != nil {
		log.Fatal(err)
	}
	first, err := c.Append(ctx, "example-append", ev)
	if err != nil {
		log.Fatal(err)
	}
	again, err := c.Append(ctx, "example-append", ev) // say the answer was lost
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored once:", again[0].Seq == first[0].Seq, "duplicate:", again[0].Duplicate)
	// Output: stored once: true duplicate: true
}

// Events the ledger refuses come back as a *client.Error whose Code says
// why; errors.Is matches a Code.
func ExampleCode() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	setUp(ctx, "example-refused")

	c := client.New(ledgerURL, client.WithToken(producerToken))
	ev, err := client.NewEvent(&events.Demand{Demands: map[string]int64{"/eng/ops": 4}})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Append(ctx, "example-refused", ev)
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Code, "event", *e.Index, errors.Is(err, client.CodeUnknownConsumer))
	}

	// A plan needs the plan scope, which a producer's token lacks.
	plan, err := client.NewEvent(&events.PlanChange{Plan: events.Plan{Consumers: []events.Consumer{{Path: "/eng/ops"}}}})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Append(ctx, "example-refused", plan)
	fmt.Println(errors.Is(err, client.CodeMissingScope), client.IsRefused(err))
	// Output:
	// 422 unknown_consumer event 0 true
	// true true
}

// WaitProjected reads the allocations once the projection holds an
// appended event.
func ExampleClient_WaitProjected() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	setUp(ctx, "example-read")

	ev, err := client.NewEvent(&events.Demand{Demands: map[string]int64{"/eng/dev": 12, "/eng/qa": 6}})
	if err != nil {
		log.Fatal(err)
	}
	appended, err := client.New(ledgerURL, client.WithToken(producerToken)).Append(ctx, "example-read", ev)
	if err != nil {
		log.Fatal(err)
	}
	reader := client.New(ledgerURL, client.WithToken(readerToken))
	a, err := reader.WaitProjected(ctx, "example-read", appended[0].Seq)
	if err != nil {
		log.Fatal(err)
	}
	for _, cs := range a.Consumers {
		if cs.Leaf {
			fmt.Printf("%s holds %d of %d (target %d)\n", cs.Path, cs.Allocated, cs.Demand, cs.Target)
		}
	}
	// Output:
	// /eng/dev holds 10 of 12 (target 10)
	// /eng/qa holds 6 of 6 (target 6)
}

// AllDecisions reads a pool's decisions page after page.
func ExampleClient_AllDecisions() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	setUp(ctx, "example-decisions")

	producer := client.New(ledgerURL, client.WithToken(producerToken))
	var last uint64
	for _, d := range []map[string]int64{{"/eng/dev": 16}, {"/eng/qa": 8}} {
		ev, err := client.NewEvent(&events.Demand{Demands: d})
		if err != nil {
			log.Fatal(err)
		}
		res, err := producer.Append(ctx, "example-decisions", ev)
		if err != nil {
			log.Fatal(err)
		}
		last = res[0].Seq
	}
	reader := client.New(ledgerURL, client.WithToken(readerToken))
	if _, err := reader.WaitProjected(ctx, "example-decisions", last); err != nil {
		log.Fatal(err)
	}
	for d, err := range reader.AllDecisions(ctx, "example-decisions", 0) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(d.Kind, d.Consumer, d.FromConsumer, d.Slots, d.Rule)
	}
	// Output:
	// grant /eng/dev  16 share_ratio.grant
	// reclaim /eng/qa /eng/dev 8 share_ratio.reclaim
}

// WhatIf asks what a plan change would do to a live pool, without
// appending it: a reader's token suffices.
func ExampleClient_WhatIf() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	setUp(ctx, "example-whatif")
	ev, err := client.NewEvent(&events.Demand{Demands: map[string]int64{"/eng/dev": 16, "/eng/qa": 16}})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.New(ledgerURL, client.WithToken(producerToken)).Append(ctx, "example-whatif", ev); err != nil {
		log.Fatal(err)
	}

	three := int64(3)
	plan, err := client.NewWhatIfEvent(&events.PlanChange{Plan: events.Plan{
		Policy:    events.Policy{Reclaim: events.ReclaimShareRatio},
		Consumers: []events.Consumer{{Path: "/eng/dev", Share: &three}, {Path: "/eng/qa"}},
	}})
	if err != nil {
		log.Fatal(err)
	}
	reader := client.New(ledgerURL, client.WithToken(readerToken))
	res, err := reader.WhatIf(ctx, "example-whatif", client.WhatIfRequest{Events: []client.WhatIfEvent{plan}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("appended:", res.Appended)
	for _, c := range res.Consumers {
		if c.Changed && c.After.Leaf {
			fmt.Printf("%s: %d -> %d slots\n", c.Path, c.Before.Allocated, c.After.Allocated)
		}
	}
	for _, d := range res.Decisions {
		fmt.Println(d.Kind, d.Consumer, d.FromConsumer, d.Slots)
	}
	// Output:
	// appended: false
	// /eng/dev: 8 -> 12 slots
	// /eng/qa: 8 -> 4 slots
	// reclaim /eng/dev /eng/qa 4
}
