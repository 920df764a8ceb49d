package domain

import "github.com/cluster-ledger/ledger/events"

// Shares (docs/rules.md#shares): planned shares P, resolved
// maxima, effective demand E, and the dynamic guarantee G (priority mode)
// or target T (share_ratio mode). The tree walks are here; the arithmetic
// is apportion's.

// recomputeAll rederives everything that depends on the plan or the
// capacity. It runs on plan and host events; demand events take the
// incremental path (setDemand, setEff).
func (p *Pool) recomputeAll() {
	p.allTouch, p.dirtyAll = true, true
	t, sh := p.t, p.pub.sh
	root := &t.nodes[0]
	sh[0].planned, root.maxCap, root.capChain = p.pub.capacity, Unlimited, Unlimited
	p.splitChildren(0, p.pub.capacity, splitAll)
	for id := 1; id < len(t.nodes); id++ { // path order: parents before children
		n := &t.nodes[id]
		sh[id].planned = sh[id].tmp
		pa := &t.nodes[n.parent]
		n.maxCap = resolveMax(n.max, sh[n.parent].planned)
		n.capChain = minSlots(n.maxCap, pa.capChain)
		if !n.leaf {
			p.splitChildren(int32(id), sh[id].planned, splitAll)
		}
	}
	for id := len(t.nodes) - 1; id >= 0; id-- { // children before parents
		n := &t.nodes[id]
		if n.leaf {
			before := n.eff - n.alloc
			n.eff = minSlots(n.demand, n.capChain)
			p.noteUnmet(int32(id), before)
			continue
		}
		n.childEff = 0
		for _, c := range n.children {
			n.childEff += t.nodes[c].eff
		}
		n.eff = minSlots(n.maxCap, n.childEff)
	}
	for _, top := range t.tops {
		sh[top].overShare = t.nodes[top].alloc > sh[top].planned
	}
}

func resolveMax(m *events.Max, parentPlanned Slots) Slots {
	switch {
	case m == nil:
		return Unlimited
	case m.IsPercent:
		return percentOf(parentPlanned, m.Percent)
	default:
		return Slots(m.Slots)
	}
}

// splitChildren splits q over the children of id as kind says (the sibling
// split, split.go), and leaves each child's part in its tmp field (0 for
// the children left out).
func (p *Pool) splitChildren(id int32, q Slots, kind splitKind) {
	t, sh := p.t, p.pub.sh
	items := p.sp.items[:0]
	floors := p.yarnFloors()
	for _, c := range t.nodes[id].children {
		n, s := &t.nodes[c], &sh[c]
		s.tmp = 0
		start := s.base
		if floors {
			start = s.start
		}
		if in, f, b, cp := kind.term(terms{e: n.eff, b: s.base, s: start, f: s.floor, p: s.planned}); in {
			items = append(items, share{weight: n.share, floor: f, base: b, cap: cp, priority: n.priority, rank: c})
		}
	}
	p.sp.split(q, items, p.mode.bands && kind.banded())
	for _, it := range items {
		sh[it.rank].tmp = it.got
	}
	p.sp.items = items
}

// waterFill sets target = q on id and splits it down over children with
// demand, capped by E: T under parent enforcement, and G inside a top-level
// branch under priority/parent enforcement.
func (p *Pool) waterFill(id int32, q Slots) {
	n := &p.t.nodes[id]
	p.sh(id).target = q
	if n.leaf {
		return
	}
	p.splitChildren(id, q, splitFill)
	for _, c := range n.children {
		p.waterFill(c, p.sh(c).tmp)
	}
}

// dynamicShares computes Pdyn: the planned share over consumers with E > 0
// only (share_ratio, leaf enforcement), into base.
func (p *Pool) dynamicShares(id int32, q Slots) {
	n := &p.t.nodes[id]
	p.sh(id).base = q
	if n.leaf {
		return
	}
	p.splitChildren(id, q, splitPdyn)
	for _, c := range n.children {
		p.dynamicShares(c, p.sh(c).tmp)
	}
}

// bases turns Pdyn into the base B bottom-up: B(l) = min(E, Pdyn), never
// below the leaf's floor; a parent whose children's bases exceed its E
// re-splits E over them, and the root, when floors take its children's
// above C, re-splits C. A leaf's start is min(E, Pdyn), before its floor.
func (p *Pool) bases(id int32) Slots {
	n, s := &p.t.nodes[id], p.sh(id)
	if n.leaf {
		s.start = minSlots(n.eff, s.base)
		s.base = maxSlots(s.floor, s.start)
		return s.base
	}
	var sum Slots
	for _, c := range n.children {
		sum += p.bases(c)
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

// surplus spreads u over the branches with residual need E - B, by share,
// capped by that need; a leaf's target is its base plus its part (in a
// pool with pins, its start plus its part, at least its base).
func (p *Pool) surplus(id int32, u Slots) {
	n, s := &p.t.nodes[id], p.sh(id)
	if n.leaf {
		if p.yarnFloors() {
			s.target = s.start + u
			return
		}
		s.target = s.base + u
		return
	}
	p.splitChildren(id, u, splitSurplus)
	for _, c := range n.children {
		p.surplus(c, p.sh(c).tmp)
	}
}

// sumTargets sets a parent's target to the sum of its leaves' targets.
func (p *Pool) sumTargets(id int32) Slots {
	n, s := &p.t.nodes[id], p.sh(id)
	if n.leaf {
		return s.target
	}
	var sum Slots
	for _, c := range n.children {
		sum += p.sumTargets(c)
	}
	s.target = sum
	return sum
}
