package domain

import "github.com/cluster-ledger/ledger/events"

// Shares (docs/rules.md#shares): planned shares P, resolved maxima and
// effective demand E, and the sibling split every pass calls; the passes
// that give the dynamic guarantee G (priority mode) or target T
// (share_ratio mode) are targets.go's. The arithmetic is apportion's.

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
