package domain

// The targets of a pool without ownership: G under priority, T under
// share_ratio (docs/rules.md#shares), by the one share division
// (share_division.go) over the whole tree, kept in the public layer
// (Pool.pub.div). Its memo makes a demand event's work follow its path
// instead of the tree's size. Computing from scratch is the same passes
// with every node dirty (markAllDirty): a plan or a capacity change, a
// pool whose maxima may re-split the bases or whose floors follow the
// allocations, and balance: false's T0.
//
// A node's part is its target: the division tells targetMoved of each
// part that changed, which keeps the layer's target and notes the leaves
// whose target moved (movedTargets); the caller touches and refiles them.

// useShares makes sh the public layer's shares, with a division over the
// tree whose parts are their targets (carried over a plan change).
func (p *Pool) useShares(sh []shares) {
	n := int32(len(sh))
	d := newShareDivision(nil, 0, n)
	d.eff = nil // the tree's
	d.planned, d.floor, d.start = make([]Slots, n), make([]Slots, n), make([]Slots, n)
	for i := range sh {
		d.part[i] = sh[i].target
	}
	d.moved = p.targetMoved
	p.pub.sh, p.pub.div = sh, d
}

// targetMoved keeps a node's target, the division's part, and notes a
// leaf whose target moved.
func (p *Pool) targetMoved(id int32) {
	p.pub.sh[id].target = p.pub.div.part[id]
	if p.t.nodes[id].leaf {
		p.movedTargets = append(p.movedTargets, id)
	}
}

// planned is a consumer's static planned share P of the public layer.
func (p *Pool) planned(id int32) Slots { return p.pub.div.planned[id] }

// markPath notes that E changed at a leaf: its path must be revisited.
func (p *Pool) markPath(id int32) {
	p.targetsDirty = true
	p.pub.div.markPath(p.t, id)
}

// markAllDirty forgets every memo.
func (p *Pool) markAllDirty() {
	p.pub.div.markAll()
	p.targetsDirty = true
}

// divisionTerms sets the division's terms from the pool's policy and
// capacity.
func (p *Pool) divisionTerms() {
	d := &p.pub.div
	d.floors, d.capacity, d.bands, d.quotaParts = p.yarnFloors(), p.pub.capacity, p.mode.bands, !p.mode.shareRatio
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
	p.divisionTerms()
	p.floors()
	t, d, c := p.t, &p.pub.div, p.pub.capacity
	if p.mode.parent {
		d.waterFill(t, &p.sp, 0, c, nil)
		return
	}
	start := d.dynamicShares(t, &p.sp, 0, c)
	if d.floors {
		start = d.starts(t, 0)
	}
	d.surplus(t, &p.sp, 0, minSlots(c, t.nodes[0].eff)-start)
}

// priorityTargets brings G up to date: the planned share under leaf
// enforcement, water-filled inside each top-level branch whose E moved
// under parent enforcement (a parent's G is the quota it was given).
func (p *Pool) priorityTargets() {
	d := &p.pub.div
	if !p.mode.parent {
		if p.dirtyAll {
			for _, id := range p.t.leaves {
				d.setPart(id, d.planned[id])
			}
		}
		return
	}
	p.divisionTerms()
	tops := p.dirtyTops
	if p.dirtyAll {
		tops = p.t.tops
	}
	for _, top := range tops {
		d.markSubtree(p.t, top)
		d.waterFill(p.t, &p.sp, top, d.planned[top], nil)
	}
}
