package domain

// Rules 4's T0 for share_ratio with preemption and balance: false, with
// ownership (rules-v4 ruling 4, docs/rules.md#version-4):
//
//   - P^L(l) = u(l) + the sum over the pools Q of T's fold that l belongs
//     to of P_Q(l), u(l) being l's own-layer use in T's fold and P_Q the
//     apportionment of Q's size in T's fold down Q's subtree, every child
//     counted, by share;
//   - E0(l) = min(E(l), max(P^L(l), a(l)));
//   - T0 = the layered targets over the pools of T's fold, each pool
//     keeping the slots and classes it has in T's fold and lending nothing
//     upward, every E replaced by E0.
//
// The placement then restores T0 from free slots and from the leaves
// above T0 (fill_on_totals.go), before it fills toward T.

// layeredFoldOf is a fold of in over t, ready to divide.
func layeredFoldOf(t *tree, in layeredInput) *layeredFold {
	n := len(t.nodes)
	f := &layeredFold{t: t, parentEnf: in.parentEnf, policy: in.policy, lend: in.lend, held: in.held.amount, priorityPerPool: in.priorityPerPool, underLender: in.underLender, rules4Classes: in.rules4Classes, seat: in.seat,
		remDemand: make([]Slots, n), remMax: make([]Slots, n), excess: make([]Slots, n), inbox: make([][]lentSlots, n),
		eff: make([]Slots, n), base: make([]Slots, n), got: make([]Slots, n)}
	// The share division works on the fold's arrays, by node id.
	f.div = newShareDivision(nil, 0, int32(n))
	f.div.eff, f.div.base, f.div.part = f.eff, f.base, f.got
	size := len(in.held.keys)
	if in.seat != nil { // held is filled as the seating seats each pool
		size = in.seat.held
	}
	if f.held == nil {
		f.held = make(map[heldKey]Slots, size)
	}
	f.heldBy = make(map[poolLeaf][]int32, size)
	for _, k := range in.held.keys {
		pl := poolLeaf{k.pool, k.leaf}
		f.heldBy[pl] = append(f.heldBy[pl], k.lender)
	}
	f.out.ownUse = make([]Slots, n)
	f.out.target = make([]Slots, n)
	for id := range t.nodes {
		f.remDemand[id], f.remMax[id] = t.nodes[id].eff, t.nodes[id].maxCap
	}
	return f
}

// run divides every layer: the own layer, then each pool in order.
func (f *layeredFold) run(own ownTotals) layeredTargets {
	f.ownLayer(own)
	if f.seat != nil && f.seat.swaps {
		f.seat.swapAtRest(f.out.ownUse)
	}
	for _, x := range f.poolOrder() {
		unrestricted := own.public
		if x != 0 {
			unrestricted = own.private[x]
		}
		f.dividePool(x, unrestricted)
	}
	f.sumTargets()
	return f.out
}

// guarantees is T0 of one fold, worked out by the placement once it has
// made the own layer's returns: ruling 4 reads E0's allocation after the
// event's releases, trims and returns (docs/decisions.md #403).
type guarantees struct {
	of   func(alloc func(l int32) Slots) []Slots
	made []Slots // the T0 the placement restored, by node id
}

// compute is T0 from each leaf's allocation alloc.
func (g *guarantees) compute(alloc func(l int32) Slots) []Slots {
	g.made = g.of(alloc)
	return g.made
}

// guaranteeTargets computes T0 from T's fold (its pools' slots, pools;
// its layered targets t).
func guaranteeTargets(t *tree, in layeredInput, pools []poolSlots, tf layeredTargets) []Slots {
	n := len(t.nodes)
	// P^L: the own layer's use, then each pool's planned share.
	pl := make([]Slots, n)
	copy(pl, tf.ownUse)
	f := layeredFoldOf(t, in)
	planned := make([]Slots, n)
	for _, x := range f.poolOrder() {
		size := pools[x].unrestricted
		for _, s := range pools[x].lent {
			size += s.slots
		}
		if size == 0 {
			continue
		}
		f.div.plannedShares(t, &f.sp, x, size, planned, nil, nil)
		xn := &t.nodes[x]
		for _, l := range t.leaves[xn.lo:xn.hi] {
			pl[l] += planned[l]
		}
	}
	// E0 = min(E, max(P^L, a)), parents' within their max.
	g := layeredFoldOf(t, in)
	for _, l := range t.leaves {
		g.remDemand[l] = minSlots(t.nodes[l].eff, maxSlots(pl[l], in.alloc(l)))
	}
	g.fixed = pools
	out := g.run(in.own)
	return out.target
}
