package domain

import (
	"slices"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
)

// TestPoolOrdersMatchSorts: rules 4's priority fold walks each pool's
// leaves in the entitled and the borrow orders dealt from the tree's
// leaves sorted once (poolOrders), and the tree sorts again the order its
// last sort left (inEntitledOrder, inBorrowOrder) rather than sorting
// from scratch. On random rules 4 logs with ownership under priority,
// after every event (waiting-since moves as leaves start waiting) every
// pool's lists equal that pool's leaves sorted on their own, and the
// tree's orders equal all its leaves sorted from path order.
func TestPoolOrdersMatchSorts(t *testing.T) {
	runs := 200
	if testing.Short() {
		runs = 40
	}
	checked := 0
	for seed := range uint64(runs) {
		p := NewPool("orders", WithDevelopmentRules())
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i, ev := range gen.GenerateOwned(gen.NewRand(seed+91000), 60).Events {
			if pc, ok := ev.(*events.PlanChange); ok {
				q := *pc
				q.Plan.Rules, q.Plan.Policy.Reclaim = int(RulesV4), events.ReclaimPriority
				ev = &q
			}
			at = at.Add(time.Second)
			if _, err := p.Apply(Event{Seq: uint64(i + 1), Time: at, Payload: ev}); err != nil || !p.hasPlan {
				continue
			}
			tr := p.t
			for _, o := range []struct {
				name   string
				order  func(a, b int32) int
				sorted func() []int32
				in     func(o *poolOrders, x int32) []int32
			}{
				{"entitled", tr.entitledOrder, tr.inEntitledOrder, func(o *poolOrders, x int32) []int32 { return o.entitledIn(tr, x) }},
				{"borrow", tr.borrowOrder, tr.inBorrowOrder, func(o *poolOrders, x int32) []int32 { return o.borrowIn(tr, x) }},
			} {
				if got, want := slices.Clone(o.sorted()), slices.SortedFunc(slices.Values(tr.leaves), o.order); !slices.Equal(got, want) {
					t.Fatalf("seed %d event %d: the tree's %s order %v, sorted from scratch %v", seed, i, o.name, got, want)
				}
				ord := newPoolOrders(tr)
				for x := range tr.nodes {
					n := &tr.nodes[x]
					if n.leaf {
						continue
					}
					want := slices.SortedFunc(slices.Values(tr.leaves[n.lo:n.hi]), o.order)
					if got := o.in(ord, int32(x)); !slices.Equal(got, want) {
						t.Fatalf("seed %d event %d: pool %s in the %s order %v, sorted on its own %v", seed, i, n.path, o.name, got, want)
					}
					checked++
				}
			}
		}
	}
	if checked < runs*20 {
		t.Fatalf("only %d pool orders checked", checked)
	}
	t.Logf("%d pool orders checked", checked)
}
