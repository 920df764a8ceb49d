package domain

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
)

// TestIncrementalFoldMatchesFull: on random logs with ownership whose
// plans the kept fold can take (incFoldable: share_ratio with preemption
// and balance, no max, one class group), the layered targets after every
// event equal computeLayeredTargets' from scratch: each leaf's own layer,
// total and part of every pool by lender.
func TestIncrementalFoldMatchesFull(t *testing.T) {
	runs := 400
	if testing.Short() {
		runs = 80
	}
	compared := 0
	for seed := range uint64(runs) {
		sc := gen.GenerateOwned(gen.NewRand(seed+71000), 60)
		pool := NewPool("inc")
		var diff string
		checked := 0
		pool.foldCheck = func(p *Pool) {
			checked++
			if diff == "" {
				diff = compareWithFull(p)
			}
		}
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		seq := uint64(0)
		for i, ev := range sc.Events {
			if pc, ok := ev.(*events.PlanChange); ok {
				ev = foldablePlan(pc, seed)
			}
			at = at.Add(time.Second)
			if _, err := pool.Apply(Event{Seq: seq + 1, Time: at, Payload: ev}); err != nil {
				continue
			}
			seq++
			if diff != "" {
				t.Fatalf("seed %d event %d (%T): %s", seed, i, ev, diff)
			}
		}
		compared += checked
	}
	if compared < runs*10 {
		t.Fatalf("only %d states compared", compared)
	}
	t.Logf("%d states compared", compared)
}

// foldablePlan makes a plan the kept fold takes: share_ratio with
// preemption and balance, no max; graces are kept on odd seeds (one class
// group or not, as they fall).
func foldablePlan(pc *events.PlanChange, seed uint64) *events.PlanChange {
	plan := pc.Plan
	plan.Policy = events.Policy{Reclaim: "share_ratio", Enforcement: plan.Policy.Enforcement, ReclaimForPreference: plan.Policy.ReclaimForPreference}
	plan.Consumers = slices.Clone(plan.Consumers)
	for i := range plan.Consumers {
		c := &plan.Consumers[i]
		c.Max = nil
		if seed%2 == 0 {
			c.ReclaimGrace, c.LendGrace = nil, nil
		}
	}
	return &events.PlanChange{Plan: plan}
}

// compareWithFull compares the pool's layered targets with a computation
// from scratch; "" when equal.
func compareWithFull(p *Pool) string {
	parts, tot := p.hostParts()
	full := computeLayeredTargets(p.t, layeredInput{parentEnf: p.mode.parent, own: tot, lend: func(id int32) bool { return p.t.nodes[id].lend },
		policy: divisionPolicy{shareRatio: true, preempt: true, balance: true}, held: p.heldByPool(parts)})
	inc := p.layered
	if !slices.Equal(inc.target, full.target) {
		return fmt.Sprintf("targets %v, from scratch %v", inc.target, full.target)
	}
	if !slices.Equal(inc.ownUse, full.ownUse) {
		return fmt.Sprintf("own layer %v, from scratch %v", inc.ownUse, full.ownUse)
	}
	if a, b := sumTakes(inc.takes), sumTakes(full.takes); !slices.Equal(a, b) {
		return fmt.Sprintf("takes %v, from scratch %v", a, b)
	}
	return ""
}

// sumTakes adds up takes by (pool, leaf, lender), sorted.
func sumTakes(ts []poolTake) []poolTake {
	var out []poolTake
	for _, t := range ts {
		i := slices.IndexFunc(out, func(o poolTake) bool { return o.pool == t.pool && o.leaf == t.leaf && o.lender == t.lender })
		if i < 0 {
			out = append(out, poolTake{pool: t.pool, leaf: t.leaf, lender: t.lender})
			i = len(out) - 1
		}
		out[i].slots += t.slots
	}
	slices.SortFunc(out, func(a, b poolTake) int {
		return cmp.Or(cmp.Compare(a.pool, b.pool), cmp.Compare(a.leaf, b.leaf), cmp.Compare(a.lender, b.lender))
	})
	return out
}

// TestKeptPlacementMatchesFull: on the same logs, every placement made
// over the leaves that are not quiet gives the moves of a placement over
// every leaf from the same state.
func TestKeptPlacementMatchesFull(t *testing.T) {
	runs := 400
	if testing.Short() {
		runs = 80
	}
	compared := 0
	for seed := range uint64(runs) {
		sc := gen.GenerateOwned(gen.NewRand(seed+71000), 60)
		pool := NewPool("inc")
		var diff string
		pool.placeCheck = func(p *Pool, moves []placeMove) {
			compared++
			if diff == "" {
				diff = compareWithFullPlacement(p, moves)
			}
		}
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		seq := uint64(0)
		for i, ev := range sc.Events {
			if pc, ok := ev.(*events.PlanChange); ok {
				ev = foldablePlan(pc, seed)
			}
			at = at.Add(time.Second)
			if _, err := pool.Apply(Event{Seq: seq + 1, Time: at, Payload: ev}); err != nil {
				continue
			}
			seq++
			if diff != "" {
				t.Fatalf("seed %d event %d (%T): %s", seed, i, ev, diff)
			}
		}
	}
	if compared < runs*10 {
		t.Fatalf("only %d placements compared", compared)
	}
	t.Logf("%d placements compared", compared)
}

// compareWithFullPlacement runs the placement over every leaf and
// compares its moves with the kept placement's; "" when equal.
func compareWithFullPlacement(p *Pool, moves []placeMove) string {
	idx := p.partIndex()
	in := placeInput{leaves: p.t.sortedLeaves, holders: p.holders(), target: func(l int32) Slots { return p.sh(l).target },
		due: func(l int32, add func(owner int32, want, ent Slots)) { p.inc.dueOf(p.t, l, add) }, room: make([]Slots, len(idx.parts))}
	for i, pt := range idx.parts {
		in.room[i] = pt.slots
	}
	in.transfers = p.shareRatioPairing(p.t.sortedLeaves)
	pl := place(p.t, p.hosts, idx, in, p.placeRules(), &placeBufs{})
	pl.release()
	full := pl.moves
	if !slices.Equal(full, moves) {
		return fmt.Sprintf("kept placement %v, over every leaf %v", moves, full)
	}
	return ""
}
