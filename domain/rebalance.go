package domain

// rebalance is step 3 of the fold: bring G or T up to date, then hand out
// free slots and reclaim by the pool's policy.
func (p *Pool) rebalance() {
	p.updateTargets()
	if p.mode.owned {
		p.rebalanceOwned()
		return
	}
	if p.mode.shareRatio {
		p.rebalanceShareRatio()
		return
	}
	p.rebalancePriority()
}

// updateTargets recomputes G (priority) or T (share_ratio) where inputs
// changed (targets.go), and touches and refiles the leaves whose target
// moved.
func (p *Pool) updateTargets() {
	if p.mode.owned {
		p.updateLayeredTargets()
		return
	}
	if p.mode.shareRatio {
		p.shareRatioTargets()
	} else {
		p.priorityTargets()
	}
	if p.allTouch { // every consumer is reported; every leaf's queues may have moved
		for _, id := range p.t.leaves {
			p.refile(id)
		}
	} else {
		for _, id := range p.movedTargets {
			p.touch(id)
			p.refile(id)
		}
	}
	p.movedTargets = p.movedTargets[:0]
}

// headroom is how many more slots claimant may gain from victim (noNode:
// from free slots) without taking an ancestor above its max. Ancestors the
// two share do not count: a move inside a subtree keeps its total
// (decisions.md #13).
func (p *Pool) headroom(claimant, victim int32) Slots {
	h := Unlimited
	for a := p.t.nodes[claimant].parent; a > 0; a = p.t.nodes[a].parent {
		if victim != noNode && p.t.contains(a, victim) {
			break
		}
		if n := &p.t.nodes[a]; n.maxCap != Unlimited {
			h = minSlots(h, n.maxCap-n.alloc)
		}
	}
	return maxSlots(h, 0)
}
