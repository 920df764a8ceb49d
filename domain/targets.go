package domain

// The targets of a pool without ownership: G under priority, T under
// share_ratio (docs/rules.md#shares), each pass written once. Every pass
// is memoized: a node is recomputed only when it is dirty (E changed in
// its subtree since the last pass) or its quota moved, so a demand event's
// work follows its path instead of the tree's size. Computing from scratch
// is the same passes with every node dirty (markAllDirty): a plan or a
// capacity change, a pool whose maxima may re-split the bases or whose
// floors follow the allocations, and balance: false's T0.
//
// The passes write each leaf's target and note those that moved
// (movedTargets); the caller touches and refiles them.

// markPath notes that E changed at a leaf: its path must be revisited.
func (p *Pool) markPath(id int32) {
	p.targetsDirty = true
	sh, nodes := p.pub.sh, p.t.nodes
	for n := id; n != noNode && !sh[n].dirty; n = nodes[n].parent {
		sh[n].dirty = true
	}
}

// markAllDirty forgets every memo.
func (p *Pool) markAllDirty() {
	for i := range p.pub.sh {
		p.pub.sh[i].dirty = true
	}
	p.targetsDirty = true
}

// markSubtree forgets the memo of id's subtree.
func (p *Pool) markSubtree(id int32) {
	p.pub.sh[id].dirty = true
	for _, c := range p.t.nodes[id].children {
		p.markSubtree(c)
	}
}

// waterFill splits q down from id over the children with demand, capped
// by E: T under share_ratio with parent enforcement (a parent's T is the
// sum of its leaves'), G inside a top-level branch under priority with
// parent enforcement (a parent's G is the quota it was given).
func (p *Pool) waterFill(id int32, q Slots) {
	n, s := &p.t.nodes[id], p.sh(id)
	if !s.dirty && q == s.memoQ {
		return
	}
	s.dirty, s.memoQ = false, q
	if n.leaf {
		p.setTarget(id, q)
		return
	}
	p.splitChildren(id, q, splitFill)
	var sum Slots
	sh := p.pub.sh
	for _, c := range n.children {
		if cs := &sh[c]; cs.dirty || cs.tmp != cs.memoQ {
			p.waterFill(c, cs.tmp)
		}
		sum += sh[c].target
	}
	s.target = sum
	if !p.mode.shareRatio {
		s.target = q
	}
}

// dynamicShares splits q down from id as Pdyn, the planned share over the
// consumers with E > 0 (share_ratio, leaf enforcement), and returns the
// subtree's base B, bottom-up: B(l) = min(E, Pdyn), never below the leaf's
// floor; a parent whose children's bases exceed its E re-splits E over
// them, and the root, when floors take its children's above C, re-splits
// C. A leaf's start is min(E, Pdyn), before its floor. A re-split lowers
// bases below what their memo says, so a pool where one may happen is
// computed with every node dirty (updateTargets).
func (p *Pool) dynamicShares(id int32, q Slots) Slots {
	n, s := &p.t.nodes[id], p.sh(id)
	if !s.dirty && q == s.memoQ {
		return s.base
	}
	s.dirty, s.memoQ, s.dirtyU = false, q, true
	if n.leaf {
		s.start = minSlots(n.eff, q)
		s.base = maxSlots(s.floor, s.start)
		return s.base
	}
	p.splitChildren(id, q, splitPdyn)
	var sum Slots
	sh := p.pub.sh
	for _, c := range n.children {
		if cs := &sh[c]; !cs.dirty && cs.tmp == cs.memoQ {
			sum += cs.base
			continue
		}
		sum += p.dynamicShares(c, sh[c].tmp)
	}
	s.base = sum
	switch {
	case id != 0 && sum > n.eff:
		p.resplit(id, n.eff)
	case id == 0 && p.yarnFloors() && sum > p.pub.capacity:
		p.resplit(id, p.pub.capacity)
	}
	return s.base
}

// resplit lowers the bases under id to total q, by share, each child capped
// at its current base, recursively down.
func (p *Pool) resplit(id int32, q Slots) {
	n := &p.t.nodes[id]
	p.sh(id).base = q
	if n.leaf {
		return
	}
	p.splitChildren(id, q, splitResplit)
	for _, c := range n.children {
		if cs := p.sh(c); cs.tmp < cs.base {
			p.resplit(c, cs.tmp)
		}
	}
}

// starts sets, in a pool with pins, where each consumer's surplus starts:
// a leaf's base less what its floor added to it (min(B, min(E, Pdyn))),
// a parent's the sum of its children's. What a floor added counts as
// surplus already given (the surplus split's floor), not as a base the
// surplus adds to (decisions.md #263).
func (p *Pool) starts(id int32) Slots {
	n, s := &p.t.nodes[id], p.sh(id)
	if n.leaf {
		s.start = minSlots(s.start, s.base)
		return s.start
	}
	var sum Slots
	for _, c := range n.children {
		sum += p.starts(c)
	}
	s.start = sum
	return sum
}

// surplus spreads u from id over the branches with residual need E - B, by
// share, capped by that need; a leaf's target is its base plus its part
// (in a pool with pins, its start plus its part), a parent's the sum of
// its leaves'. It revisits only the nodes whose surplus or whose
// children's residual needs changed.
func (p *Pool) surplus(id int32, u Slots) {
	n, s := &p.t.nodes[id], p.sh(id)
	if !s.dirtyU && u == s.memoU {
		return
	}
	s.dirtyU, s.memoU = false, u
	if n.leaf {
		if p.yarnFloors() {
			p.setTarget(id, s.start+u)
			return
		}
		p.setTarget(id, s.base+u)
		return
	}
	p.splitChildren(id, u, splitSurplus)
	var sum Slots
	sh := p.pub.sh
	for _, c := range n.children {
		if cs := &sh[c]; cs.dirtyU || cs.tmp != cs.memoU {
			p.surplus(c, cs.tmp)
		}
		sum += sh[c].target
	}
	s.target = sum
}

// setTarget sets a leaf's target and notes it when it moved.
func (p *Pool) setTarget(id int32, t Slots) {
	s := p.sh(id)
	if s.target == t {
		return
	}
	s.target = t
	p.movedTargets = append(p.movedTargets, id)
}
