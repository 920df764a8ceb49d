package domain

import (
	"fmt"

	"github.com/cluster-ledger/ledger/events"
)

// Rules version 4's plan fields (docs/rules.md#version-4): three
// behaviours of the YARN Capacity Scheduler. Priority
// bands and zero shares live in the sibling split (split.go), which every
// target computation calls; this file validates the fields, resolves who
// is pinned, and computes the floors of a pool with pins.

// checkYARNFieldsKnown refuses a plan that names priority_bands or
// preemptable under a rules version that does not know them (1 to 3), as
// the builds before version 4 refused an unknown field: malformed, before
// any check but the version's (they refused it while decoding), so a log
// they stored keeps its chain. A version the pool does not fold at all
// (version 4 without the development switch, or a later one) is refused
// by validateRules first, whatever the plan names: a projector stops on it
// rather than guess (decisions.md #261).
func checkYARNFieldsKnown(plan events.Plan) error {
	v := RulesOf(plan)
	if !plan.NamesYARNFields() || behaviourOf(v).yarn {
		return nil
	}
	return refuse(events.ErrMalformed, "the plan names priority_bands or preemptable, which %v does not know (they need rules v%d)", v, int(RulesV4))
}

// zeroSharesAllowed reports whether the plan's consumers may have share 0:
// rules 4 under reclaim share_ratio (under priority the borrowing limit is
// the share, so a zero share could never borrow).
func zeroSharesAllowed(plan events.Plan) bool {
	return behaviourOf(RulesOf(plan)).yarn && plan.Policy.ReclaimOrDefault() == events.ReclaimShareRatio
}

func zeroShareHint(s int64) string {
	if s != 0 {
		return ""
	}
	return fmt.Sprintf(" (a zero share needs rules v%d and reclaim %q)", int(RulesV4), events.ReclaimShareRatio)
}

// checkYARNWithoutOwnership refuses a rules-4 plan that combines
// priority_bands: true, preemptable: false or a zero share with ownership:
// version 4 defines them for pools without ownership only. The fields at
// their defaults decide as if absent, so they are accepted (decisions.md
// #264, as the reference model reads it, #240).
func checkYARNWithoutOwnership(plan events.Plan) error {
	if !behaviourOf(RulesOf(plan)).yarn || !plan.HasOwnership() || !usesYARN(plan) {
		return nil
	}
	return refuse(ErrUnsupportedWithOwnership, "the plan combines priority_bands, preemptable: false or a zero share with ownership (own, lend or reclaim_for_preference); %v defines them for pools without ownership", RulesOf(plan))
}

// usesYARN reports whether a plan uses a field of version 4 other than at
// its default: priority_bands true, preemptable false, a zero share.
func usesYARN(plan events.Plan) bool {
	if plan.Policy.PriorityBandsOrDefault() || plan.HasZeroShare() {
		return true
	}
	for _, c := range plan.Consumers {
		if c.Preemptable != nil && !*c.Preemptable {
			return true
		}
	}
	return false
}

// pinLeaves resolves preemptable's inheritance: a consumer is pinned when
// it, or else its nearest ancestor that names the field, says false (top
// level: not pinned). Ids are in path order, so a parent is resolved
// before its children.
func (t *tree) pinLeaves(specs map[string]events.Consumer) {
	for id := 1; id < len(t.nodes); id++ {
		n := &t.nodes[id]
		n.pinned = t.nodes[n.parent].pinned
		if c, ok := specs[n.path]; ok && c.Preemptable != nil {
			n.pinned = !*c.Preemptable
		}
		t.hasPins = t.hasPins || (n.pinned && len(n.children) == 0)
	}
}

// floors sets every consumer's floor F of the share_ratio targets in a pool
// with pins, from the allocations now (the rebalance's start, after the
// event's releases and trims): a pinned leaf keeps what it holds, another
// leaf min(a, P); a parent under parent enforcement max(min(A, P), its
// children's floors), under leaf enforcement its children's floors. In a
// pool without pins every floor is 0 and nothing is computed.
func (p *Pool) floors() {
	if !p.yarnFloors() {
		return
	}
	t, floor, planned := p.t, p.pub.div.floor, p.pub.div.planned
	for id := len(t.nodes) - 1; id > 0; id-- { // children before parents
		n := &t.nodes[id]
		if n.leaf {
			floor[id] = minSlots(n.alloc, planned[id])
			if n.pinned {
				floor[id] = n.alloc
			}
			continue
		}
		var sum Slots
		for _, c := range n.children {
			sum += floor[c]
		}
		floor[id] = sum
		if p.mode.parent {
			floor[id] = maxSlots(minSlots(n.alloc, planned[id]), sum)
		}
	}
}

// yarnFloors reports whether the share_ratio targets have floors: a pool
// with pins (under priority a pin only skips the leaf as a victim).
func (p *Pool) yarnFloors() bool { return p.mode.shareRatio && p.t.hasPins }
