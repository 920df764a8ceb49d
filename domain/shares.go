package domain

import "github.com/cluster-ledger/ledger/events"

// Shares (docs/rules.md#shares): planned shares P (by the share
// division's plannedShares), resolved maxima and effective demand E; the
// passes that give the dynamic guarantee G (priority mode) or target T
// (share_ratio mode) are targets.go's.

// recomputeAll rederives everything that depends on the plan or the
// capacity. It runs on plan and host events; demand events take the
// incremental path (setDemand, setEff).
func (p *Pool) recomputeAll() {
	p.allTouch, p.dirtyAll = true, true
	t, sh, planned := p.t, p.pub.sh, p.pub.div.planned
	root := &t.nodes[0]
	root.maxCap, root.capChain = Unlimited, Unlimited
	p.pub.div.plannedShares(t, &p.sp, 0, p.pub.capacity, planned, nil, nil)
	for id := 1; id < len(t.nodes); id++ { // path order: parents before children
		n := &t.nodes[id]
		pa := &t.nodes[n.parent]
		n.maxCap = resolveMax(n.max, planned[n.parent])
		n.capChain = minSlots(n.maxCap, pa.capChain)
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
		sh[top].overShare = t.nodes[top].alloc > planned[top]
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
