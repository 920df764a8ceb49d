package console_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/console"
	"github.com/cluster-ledger/ledger/internal/scenario"
)

// TestHostsShowTheirOwners reads who owns each host on the pool page, now
// and as of an earlier event: the ownership worked example
// (docs/rules.md#ownership-example: /A owns h1, /B
// owns h2, h3 is public) is appended through the API and projected, then
// a plan moves /B's ownership to /A (h3).
func TestHostsShowTheirOwners(t *testing.T) {
	s := newService(t)
	sc, err := scenario.ParseFile("../scenario/testdata/ownership/own-lend-return.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var evs []events.Payload
	for _, ev := range sc.Events() {
		evs = append(evs, ev.Payload)
	}
	seqs := s.send(t, "p", evs...)
	before := seqs[len(seqs)-1]
	plan := sc.Plan
	plan.Consumers = slices.Clone(plan.Consumers)
	plan.Consumers[0].Own = []events.OwnEntry{{Host: "h1"}, {Host: "h3"}}
	plan.Consumers[1].Own = nil
	after := s.send(t, "p", &events.PlanChange{Plan: plan})[0]
	s.waitProjected(t, "p", after)

	owners := func(hosts []console.Host) string {
		out := ""
		for _, h := range hosts {
			out += fmt.Sprintf("%s:%v ", h.Name, h.Owners)
		}
		return out
	}
	var pool console.PoolResponse
	getJSON(t, s.url+"/v1/pools/p", "", &pool)
	if got, want := owners(pool.Hosts), "h1:[{/A 4}] h2:[] h3:[{/A 4}] "; got != want {
		t.Errorf("owners now: %s, want %s", got, want)
	}
	var a console.AsOfResponse
	getJSON(t, s.url+fmt.Sprintf("/v1/pools/p/as-of?seq=%d", before), "", &a)
	if got, want := owners(a.Hosts), "h1:[{/A 4}] h2:[{/B 4}] h3:[] "; got != want {
		t.Errorf("owners as of the last demand (seq %d): %s, want %s", before, got, want)
	}
	a = console.AsOfResponse{}
	getJSON(t, s.url+fmt.Sprintf("/v1/pools/p/as-of?seq=%d", seqs[0]), "", &a)
	if got, want := owners(a.Hosts), ""; got != want {
		t.Errorf("owners as of the plan, before any host: %s, want none", got)
	}

	// The page shows them under each host.
	ctx := browser(t)
	run(t, ctx, "open the pool page",
		chromedp.Navigate(s.url+"/console/#/pool/p"),
		waitText(`#hosts [data-host="h3"] [data-k="owners"]`, "owned by /A 4"),
	)
	if n := countOf(t, ctx, `#hosts [data-host="h2"] [data-k="owners"]`); n != 0 {
		t.Errorf("h2, owned by nobody, shows %d owner lines", n)
	}
}

func countOf(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	var n int
	run(t, ctx, "count "+sel, chromedp.Func(func(c context.Context, tg *chromedp.Target) error {
		var err error
		n, err = chromedp.Evaluate[int](`document.querySelectorAll(`+jsString(sel)+`).length`)(c, tg)
		return err
	}))
	return n
}
