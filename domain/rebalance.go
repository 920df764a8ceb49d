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
// changed, and refiles the leaves whose target moved.
func (p *Pool) updateTargets() {
	if p.mode.owned {
		p.updateLayeredTargets()
		return
	}
	switch {
	case p.yarnFloors():
		// The floors follow the allocations, which any event may move:
		// the whole tree is recomputed every event (decisions.md #262).
		p.dirtyAll = true
	case p.mode.shareRatio && !(!p.mode.parent && p.t.hasMax):
		p.updateShareRatioTargets()
		return
	}
	if !p.dirtyAll && len(p.dirtyTops) == 0 {
		return
	}
	t := p.t
	scope := t.leaves
	if !p.dirtyAll {
		scope = nil
		for _, top := range p.dirtyTops {
			scope = append(scope, t.leaves[t.nodes[top].lo:t.nodes[top].hi]...)
		}
	}
	prev := p.prevTargets[:0]
	for _, id := range scope {
		prev = append(prev, p.sh(id).target)
	}
	p.prevTargets = prev
	p.computeTargets()
	for i, id := range scope {
		if p.allTouch || p.sh(id).target != prev[i] {
			p.touch(id)
			p.refile(id)
		}
	}
}

// updateShareRatioTargets runs the incremental passes of targets.go.
func (p *Pool) updateShareRatioTargets() {
	if p.allTouch {
		p.markAllDirty()
		for _, id := range p.t.leaves {
			p.refile(id)
		}
	}
	if !p.targetsDirty {
		return
	}
	p.targetsDirty = false
	if p.mode.parent {
		p.fillInc(0, p.pub.capacity)
		return
	}
	p.pdynInc(0, p.pub.capacity)
	p.surplusInc(0, minSlots(p.pub.capacity, p.t.nodes[0].eff)-p.sh(0).base)
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

// computeTargets is the full computation: G in priority mode, and T in
// share_ratio/leaf mode when a max may force a re-split.
func (p *Pool) computeTargets() {
	t := p.t
	switch {
	case !p.mode.shareRatio && !p.mode.parent:
		for _, id := range t.leaves {
			p.sh(id).target = p.sh(id).planned
		}
	case !p.mode.shareRatio:
		tops := p.dirtyTops
		if p.dirtyAll {
			tops = t.tops
		}
		for _, top := range tops {
			p.waterFill(top, p.sh(top).planned)
		}
	default:
		p.shareRatioTargets()
	}
}

// shareRatioTargets computes T from scratch for every node, from the E now
// in the nodes (and, in a pool with pins, the floors of the allocations
// now): water-filled under parent enforcement, base plus surplus under leaf
// enforcement (docs/rules.md#shares, #version-4).
func (p *Pool) shareRatioTargets() {
	p.floors()
	if p.mode.parent {
		p.waterFill(0, p.pub.capacity)
	} else {
		p.dynamicShares(0, p.pub.capacity)
		start := p.bases(0)
		if p.yarnFloors() {
			start = p.starts(0)
		}
		p.surplus(0, minSlots(p.pub.capacity, p.t.nodes[0].eff)-start)
	}
	p.sumTargets(0)
}
