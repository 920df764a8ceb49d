package domain

// Incremental share_ratio targets. A demand event changes E on one path;
// these passes recompute a node's split only when its quota or a child's E
// changed, so the work follows the change instead of the tree's size. The
// arithmetic is the same apportion calls as the full passes in shares.go;
// the differential and property tests hold both to the same results.

// markPath notes that E changed at a leaf: its path must be revisited.
func (p *Pool) markPath(id int32) {
	p.targetsDirty = true
	sh, nodes := p.pub.sh, p.t.nodes
	for n := id; n != noNode && !sh[n].dirty; n = nodes[n].parent {
		sh[n].dirty = true
	}
}

// markAllDirty forgets every memo (after a plan or capacity change).
func (p *Pool) markAllDirty() {
	for i := range p.pub.sh {
		p.pub.sh[i].dirty = true
	}
	p.targetsDirty = true
}

// fillInc is waterFill with memo: T under parent enforcement.
func (p *Pool) fillInc(id int32, q Slots) {
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
			p.fillInc(c, cs.tmp)
		}
		sum += sh[c].target
	}
	s.target = sum
}

// pdynInc computes Pdyn top-down and returns the subtree's base B; valid
// only when no max can bind (no re-split), which the caller checks.
func (p *Pool) pdynInc(id int32, q Slots) Slots {
	n, s := &p.t.nodes[id], p.sh(id)
	if !s.dirty && q == s.memoQ {
		return s.base
	}
	s.dirty, s.memoQ, s.dirtyU = false, q, true
	if n.leaf {
		s.base = minSlots(n.eff, q)
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
		sum += p.pdynInc(c, sh[c].tmp)
	}
	s.base = sum
	return sum
}

// surplusInc spreads the surplus top-down over residual needs, revisiting
// only nodes whose surplus or whose children's residual needs changed.
func (p *Pool) surplusInc(id int32, u Slots) {
	n, s := &p.t.nodes[id], p.sh(id)
	if !s.dirtyU && u == s.memoU {
		return
	}
	s.dirtyU, s.memoU = false, u
	if n.leaf {
		p.setTarget(id, s.base+u)
		return
	}
	p.splitChildren(id, u, splitSurplus)
	var sum Slots
	sh := p.pub.sh
	for _, c := range n.children {
		if cs := &sh[c]; cs.dirtyU || cs.tmp != cs.memoU {
			p.surplusInc(c, cs.tmp)
		}
		sum += sh[c].target
	}
	s.target = sum
}

// setTarget records a leaf's new target, touching and refiling it when it
// moved.
func (p *Pool) setTarget(id int32, t Slots) {
	s := p.sh(id)
	if s.target == t {
		return
	}
	s.target = t
	p.touch(id)
	p.refile(id)
}
