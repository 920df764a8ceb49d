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
	runs := 300
	if testing.Short() {
		runs = 60
	}
	checked := 0
	for seed := range uint64(runs) {
		sc := gen.GenerateOwned(gen.NewRand(seed+64000), 40)
		p := NewPool("fill", WithDevelopmentRules())
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		seq := uint64(0)
		for i, ev := range sc.Events {
			at = at.Add(time.Second)
			if pc, ok := ev.(*events.PlanChange); ok {
				stamped := *pc
				stamped.Plan.Rules = int(RulesV4)
				no := false
				stamped.Plan.Policy = events.Policy{Reclaim: "share_ratio", Enforcement: stamped.Plan.Policy.Enforcement, Preemption: &no,
					ReclaimForPreference: stamped.Plan.Policy.ReclaimForPreference}
				ev = &stamped
			}
			if _, err := p.Apply(Event{Seq: seq + 1, Time: at, Payload: ev}); err != nil {
				continue
			}
			seq++
			if !p.onTotals() || !p.HasOwnership() {
				continue
			}
			parts, _ := p.hostParts()
			p.sitsFor(parts)
			cur := make([]Slots, len(p.t.nodes))
			for _, l := range p.t.leaves {
				cur[l] = p.t.nodes[l].alloc
				if cur[l] > p.t.nodes[l].eff {
					t.Fatalf("seed %d event %d: %s holds %d above its demand %d", seed, i, p.t.nodes[l].path, cur[l], p.t.nodes[l].eff)
				}
			}
			pl := &placement{t: p.t, leaves: p.t.sortedLeaves}
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
		}
	}
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
