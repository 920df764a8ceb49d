package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/projections/query"
)

// testPoolsNowAndAsOf checks the pool views against each other (the
// console's past comes from the engine: internal/console's as-of tests).
func testPoolsNowAndAsOf(t *testing.T, p *projected) {
	ctx := context.Background()
	sums, err := query.PoolSummaries(ctx, p.db)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 1 {
		t.Fatalf("%d summaries, want the seed pool's", len(sums))
	}
	s := sums[0]
	if s.Pool != "seed" || s.Seq != p.last || s.FirstSeq != 1 || s.LastType != "demand" || s.Time == nil ||
		s.Allocated != 100 || s.Leaves != 3 || s.Consumers != 4 || s.Rules != 1 || !json.Valid(s.Plan) {
		t.Fatalf("summary %+v", s)
	}
	if one, err := query.PoolSummaries(ctx, p.db, "nowhere"); err != nil || len(one) != 0 {
		t.Fatalf("summary of an unknown pool: %v, %v", one, err)
	}
	consumers, err := query.PlanConsumers(ctx, p.db, "seed")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range consumers {
		if c.Allocated != seedAllocated[c.Path] || c.Planned == nil || c.Share < 1 {
			t.Fatalf("plan consumer %+v", c)
		}
	}
	hosts, err := query.Hosts(ctx, p.db, "seed")
	if err != nil || len(hosts) == 0 {
		t.Fatalf("hosts %v, %v", hosts, err)
	}
	var capacity int64
	for _, h := range hosts {
		if h.Up {
			capacity += h.Slots
		}
	}
	if capacity != s.Capacity {
		t.Fatalf("hosts sum to %d slots up, summary says %d", capacity, s.Capacity)
	}
	if now, err := query.HoldersByHost(ctx, p.db, "seed"); err != nil || len(now) == 0 {
		t.Fatalf("holders %v, %v", now, err)
	}
	seqs, err := query.AllProjectedSeqs(ctx, p.db)
	if err != nil || len(seqs) != 1 || seqs["seed"] != p.last {
		t.Fatalf("AllProjectedSeqs: %v, %v", seqs, err)
	}
}

func testHistoryQuestions(t *testing.T, p *projected) {
	ctx := context.Background()
	if s, err := query.LastSeqAtOrBefore(ctx, p.db, "seed", p.last+100); err != nil || s != p.last {
		t.Fatalf("LastSeqAtOrBefore past the end: %d, %v", s, err)
	}
	// Event i was stamped Epoch + i seconds and has sequence i+1.
	if s, err := query.LastSeqAtTime(ctx, p.db, "seed", scenario.Epoch.Add(2*time.Second+time.Millisecond)); err != nil || s != 3 {
		t.Fatalf("LastSeqAtTime(+2s) = %d, %v; want 3", s, err)
	}
	b, err := query.EventsAround(ctx, p.db, "seed", 3)
	if err != nil || b.First != 1 || b.Last != p.last || b.Prev == nil || *b.Prev != 2 || b.Next == nil || *b.Next != 4 {
		t.Fatalf("EventsAround(3) = %+v, %v", b, err)
	}
	if b, err := query.EventsAround(ctx, p.db, "seed", 1); err != nil || b.Prev != nil {
		t.Fatalf("EventsAround(1) = %+v, %v; want no previous event", b, err)
	}
}

func testTimelineAndDecisionAt(t *testing.T, p *projected) {
	ctx := context.Background()
	all := allDecisions(t, p)
	var pages []query.Decision
	f := query.TimelineFilter{Limit: 2}
	for {
		page, err := query.Timeline(ctx, p.db, "seed", f)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			pages = append(pages, e.Decision)
			if e.EventType == "" || e.Time.IsZero() {
				t.Fatalf("timeline entry without its event: %+v", e)
			}
		}
		last := page[len(page)-1]
		f.BeforeSeq, f.BeforeOrdinal = last.EventSeq, last.Ordinal
	}
	slices.Reverse(pages)
	if fmt.Sprint(pages) != fmt.Sprint(all) {
		t.Fatalf("timeline pages, oldest first:\n%v\nwant\n%v", pages, all)
	}
	f = query.TimelineFilter{Consumer: "/B", Limit: 1000}
	sub, err := query.Timeline(ctx, p.db, "seed", f)
	if err != nil || len(sub) == 0 {
		t.Fatalf("timeline of /B: %v, %v", sub, err)
	}
	for _, e := range sub {
		if e.Consumer[:2] != "/B" && (len(e.FromConsumer) < 2 || e.FromConsumer[:2] != "/B") {
			t.Fatalf("timeline of /B holds %+v", e)
		}
	}
	last := all[len(all)-1]
	d, ok, err := query.DecisionAt(ctx, p.db, "seed", last.EventSeq, last.Ordinal)
	if err != nil || !ok || fmt.Sprint(d) != fmt.Sprint(last) {
		t.Fatalf("DecisionAt: %+v, %v, %v; want %+v", d, ok, err, last)
	}
	if _, ok, err := query.DecisionAt(ctx, p.db, "seed", last.EventSeq, 9999); err != nil || ok {
		t.Fatalf("DecisionAt a missing ordinal: %v, %v", ok, err)
	}
}
