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

// shareRatioTargets brings T up to date. The memo holds while no base is
// re-split and no floor moves: a pool whose maxima may re-split (leaf
// enforcement) marks the whole tree at any change of E (markDirty), and
// in a pool with pins the floors follow the allocations, which any event
// may move, so the whole tree is recomputed every event (decisions.md
// #262).
func (p *Pool) shareRatioTargets() {
	if p.yarnFloors() {
		p.dirtyAll = true
	}
	if p.dirtyAll {
		p.markAllDirty()
	}
	if !p.targetsDirty {
		return
	}
	p.targetsDirty = false
	p.floors()
	if p.mode.parent {
		p.waterFill(0, p.pub.capacity)
		return
	}
	start := p.dynamicShares(0, p.pub.capacity)
	if p.yarnFloors() {
		start = p.starts(0)
	}
	p.surplus(0, minSlots(p.pub.capacity, p.t.nodes[0].eff)-start)
}

// priorityTargets brings G up to date: the planned share under leaf
// enforcement, water-filled inside each top-level branch whose E moved
// under parent enforcement.
func (p *Pool) priorityTargets() {
	if !p.mode.parent {
		if p.dirtyAll {
			for _, id := range p.t.leaves {
				p.setTarget(id, p.sh(id).planned)
			}
		}
		return
	}
	tops := p.dirtyTops
	if p.dirtyAll {
		tops = p.t.tops
	}
	for _, top := range tops {
		p.markSubtree(top)
		p.waterFill(top, p.sh(top).planned)
	}
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
