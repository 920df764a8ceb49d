package domain

import (
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
)

// TestRules4FillLeavesNoSlotIdle: under rules 4, share_ratio without
// preemption with ownership (ruling 4), after every event of random
// ownership logs no slot of a part stays free while a leaf that may hold
// it has unmet demand and room under its max (the final pass), and no
// leaf holds more than its demand.
func TestRules4FillLeavesNoSlotIdle(t *testing.T) {
	checked := 0
	no := false
	foldRules4Logs(t, 64000, events.Policy{Reclaim: "share_ratio", Preemption: &no}, func(p *Pool, r Result, seed uint64, i int, ev events.Payload) {
		if !p.onTotals() || !p.HasOwnership() {
			return
		}
		parts, _ := p.hostParts()
		p.sitsFor(parts)
		pl, cur := allocTotals(p)
		for _, l := range p.t.leaves {
			if cur[l] > p.t.nodes[l].eff {
				t.Fatalf("seed %d event %d: %s holds %d above its demand %d", seed, i, p.t.nodes[l].path, cur[l], p.t.nodes[l].eff)
			}
		}
		for k, part := range parts {
			free := part.slots
			for _, s := range p.sittingsOn(parts, part.host) {
				if s.part == k {
					free -= s.slots
				}
			}
			if free <= 0 {
				continue
			}
			checked++
			for _, l := range p.t.leaves {
				if p.t.nodes[l].eff > cur[l] && pl.headroom(l, cur) > 0 && p.t.mayUse(l, part.owner) {
					t.Fatalf("seed %d event %d (%T): %d slots of %s's part of %s idle while %s (demand %d, holds %d) may hold them",
						seed, i, ev, free, ownerName(p, part.owner), p.hosts[part.host].name, p.t.nodes[l].path, p.t.nodes[l].eff, cur[l])
				}
			}
		}
	})
	if checked == 0 {
		t.Fatal("no part was ever left with free slots: the check never ran")
	}
	t.Logf("%d parts with free slots checked", checked)
}

func ownerName(p *Pool, o int32) string {
	if o == noNode {
		return "the public"
	}
	return p.t.nodes[o].path
}

// TestRules4BalanceFalseOnTotals: under rules 4, share_ratio with
// preemption and balance: false with ownership (ruling 4), on random
// ownership logs: every reclaim lifts its claimant to at most its T0 and
// leaves its victim at least at its T0 ("never takes slots from one
// consumer to lift another above its own planned share"). (That an event
// changing no input decides nothing is ruling 12's property, not built: a
// return of an owner's own part and the compensating reclaim can still
// swap hosts on such an event.)
func TestRules4BalanceFalseOnTotals(t *testing.T) {
	reclaims := 0
	yes, no := true, false
	foldRules4Logs(t, 65000, events.Policy{Reclaim: "share_ratio", Preemption: &yes, Balance: &no}, func(p *Pool, r Result, seed uint64, i int, ev events.Payload) {
		if !p.HasOwnership() || p.layered.t0 == nil || p.layered.t0.made == nil {
			return
		}
		free := map[string]Slots{} // by consumer: what free slots gave it (the fill toward T comes after T0)
		for _, d := range r.Decisions {
			if d.Kind == KindGrant || d.Kind == KindLend {
				free[d.Consumer] += Slots(d.Slots)
			}
		}
		for _, d := range r.Decisions {
			if d.Kind != KindReclaim {
				continue
			}
			reclaims++
			c, v := p.t.byPath[d.Consumer], p.t.byPath[d.From]
			if a := p.t.nodes[c].alloc - free[d.Consumer]; a > p.layered.t0.made[c] {
				t.Fatalf("seed %d event %d: reclaims lift %s to %d (without free slots) above its T0 %d", seed, i, d.Consumer, a, p.layered.t0.made[c])
			}
			if a := p.t.nodes[v].alloc; a < p.layered.t0.made[v] {
				t.Fatalf("seed %d event %d: a reclaim takes %s to %d below its T0 %d", seed, i, d.From, a, p.layered.t0.made[v])
			}
		}
	})
	if reclaims == 0 {
		t.Fatal("no reclaim was made: the logs do not exercise the ruling")
	}
	t.Logf("%d reclaims checked against T0", reclaims)
}

// foldRules4Logs folds 300 random ownership logs (60 with -short), seeds
// from base, every plan under rules 4 with policy's reclaim, preemption
// and balance (its enforcement and reclaim_for_preference kept), and calls
// check after every event folded.
func foldRules4Logs(t *testing.T, base uint64, policy events.Policy, check func(p *Pool, r Result, seed uint64, i int, ev events.Payload)) {
	t.Helper()
	runs := 300
	if testing.Short() {
		runs = 60
	}
	for seed := range uint64(runs) {
		sc := gen.GenerateOwned(gen.NewRand(seed+base), 40)
		p := NewPool("rules4", WithDevelopmentRules())
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		seq := uint64(0)
		for i, ev := range sc.Events {
			at = at.Add(time.Second)
			if pc, ok := ev.(*events.PlanChange); ok {
				stamped := *pc
				stamped.Plan.Rules = int(RulesV4)
				pol := policy
				pol.Enforcement, pol.ReclaimForPreference = stamped.Plan.Policy.Enforcement, stamped.Plan.Policy.ReclaimForPreference
				stamped.Plan.Policy = pol
				ev = &stamped
			}
			r, err := p.Apply(Event{Seq: seq + 1, Time: at, Payload: ev})
			if err != nil {
				continue
			}
			seq++
			check(p, r, seed, i, ev)
		}
	}
}

// TestRules4PrivateSlotsComeBack: section 5's property "a slot privately
// owned by X is used outside X's subtree only while no descendant of X
// with unmet demand could use it", under rules 4 on totals (ruling 4: no
// preemption, or balance false), after every event of random ownership
// logs: no leaf outside a parent owner X sits on X's private part while a
// leaf under X that may hold it is below its target with room under its
// ancestors' max (docs/decisions.md #324; the reference model's disputes
// 08 and 11).
func TestRules4PrivateSlotsComeBack(t *testing.T) {
	yes, no := true, false
	checked := 0
	for _, pol := range []events.Policy{{Reclaim: "share_ratio", Preemption: &no}, {Reclaim: "share_ratio", Preemption: &yes, Balance: &no}} {
		foldRules4Logs(t, 66000, pol, func(p *Pool, r Result, seed uint64, i int, ev events.Payload) {
			if !p.onTotals() || !p.HasOwnership() {
				return
			}
			parts, _ := p.hostParts()
			pl, cur := allocTotals(p)
			for _, s := range p.sittings(parts) {
				x := parts[s.part].owner
				if x == noNode || p.t.nodes[x].leaf || p.t.contains(x, s.leaf) {
					continue
				}
				checked++
				n := &p.t.nodes[x]
				for _, d := range p.t.leaves[n.lo:n.hi] {
					if p.t.nodes[d].alloc < p.sh(d).target && p.t.mayUse(d, x) && pl.headroom(d, cur) > 0 {
						t.Fatalf("seed %d event %d (%T): %s sits on %d of %s's private slots on %s while %s, under %s, holds %d below its target %d",
							seed, i, ev, p.t.nodes[s.leaf].path, s.slots, n.path, p.hosts[parts[s.part].host].name, p.t.nodes[d].path, n.path, p.t.nodes[d].alloc, p.sh(d).target)
					}
				}
			}
		})
	}
	if checked == 0 {
		t.Fatal("no leaf ever sat on another branch's private slots: the check never ran")
	}
	t.Logf("%d sittings of outsiders on private parts checked", checked)
}

// allocTotals is a placement over p's tree and, as the placement keeps
// them (placement.hold), every leaf's allocation with each parent's sum.
func allocTotals(p *Pool) (*placement, []Slots) {
	pl := &placement{t: p.t, leaves: p.t.sortedLeaves}
	cur := make([]Slots, len(p.t.nodes))
	for _, l := range p.t.leaves {
		pl.hold(cur, l, p.t.nodes[l].alloc)
	}
	return pl, cur
}
