package domain

// shareDivision is docs/rules.md#shares' division of a quota down a
// subtree over the leaves' demand in it (water-fill, the planned shares,
// the dynamic shares and their re-split, the surplus), each pass written
// once and memoized: a node is revisited only when it is dirty (the
// demand below it changed) or its quota moved, so an event's work follows
// its path; from scratch is the same passes with every node dirty. Its
// callers:
//
//   - a pool without ownership (targets.go): G under priority, T under
//     share_ratio, over the whole tree (Pool.pub.div), with rules 4's
//     floors and priority bands;
//   - the layered fold (#layer-division, layered_targets.go): each pool's
//     division, with the pool's subtree marked;
//   - the kept fold (kept_fold.go): each pool's division kept between
//     events.
//
// Arrays are by local index: a node's preorder position less the pool's
// (pre, at), or the node id itself when pre is nil (the arrays span the
// tree).
type shareDivision struct {
	pre []int32 // by node id: position in depth-first preorder; nil: arrays by node id
	at  int32   // the pool's position in pre

	eff   []Slots // the demand each node brings into the pool; nil: the tree's E (a pool without ownership)
	base  []Slots // leaf enforcement: Pdyn, then the base B
	part  []Slots // a leaf's part of the pool (a parent's: its leaves' sum, or its quota under quotaParts)
	tmp   []Slots // a node's part of its parent's split
	memoQ []Slots // the quota a node was given in the last pass
	memoU []Slots // the surplus a node was given in the last pass
	dirty []bool  // the demand below the node changed since the last pass
	// dirtyU: a node's residual need (or a child's) changed since the
	// last surplus pass.
	dirtyU []bool

	// A pool without ownership's terms (zero in the layered and kept
	// folds): planned is P, which the water-fill's bases read under
	// priority bands (nil: 0); with floors (rules 4, a pool with pins,
	// yarn.go) floor holds each node's F and start where its surplus
	// starts, and the root's bases are bounded by capacity rather than
	// its demand; bands: priority bands order the splits that take them;
	// quotaParts: the water-fill gives a parent its quota as its part
	// (priority's G), not its leaves' sum.
	planned      []Slots
	floors       bool
	floor, start []Slots
	capacity     Slots
	bands        bool
	quotaParts   bool

	// moved, when set, is told of every node whose part changed.
	moved func(id int32)
}

// newShareDivision makes the arrays of a division of k nodes, every
// node dirty.
func newShareDivision(pre []int32, at int32, k int32) shareDivision {
	d := shareDivision{pre: pre, at: at,
		eff: make([]Slots, k), base: make([]Slots, k), part: make([]Slots, k), tmp: make([]Slots, k),
		memoQ: make([]Slots, k), memoU: make([]Slots, k), dirty: make([]bool, k), dirtyU: make([]bool, k)}
	for i := range d.dirty {
		d.dirty[i], d.dirtyU[i] = true, true
	}
	return d
}

func (d *shareDivision) loc(id int32) int32 {
	if d.pre == nil {
		return id
	}
	return d.pre[id] - d.at
}

// effOf is the demand node id (at local index i) brings into the pool.
func (d *shareDivision) effOf(t *tree, i, id int32) Slots {
	if d.eff == nil {
		return t.nodes[id].eff
	}
	return d.eff[i]
}

// markPath marks id and its ancestors dirty, up to the first that is
// already (a division over the whole tree).
func (d *shareDivision) markPath(t *tree, id int32) {
	for n := id; n != noNode && !d.dirty[d.loc(n)]; n = t.nodes[n].parent {
		d.dirty[d.loc(n)] = true
	}
}

// markAll marks every node dirty: the next passes are from scratch.
func (d *shareDivision) markAll() {
	for i := range d.dirty {
		d.dirty[i] = true
	}
}

// markSubtree marks every node of id's subtree dirty.
func (d *shareDivision) markSubtree(t *tree, id int32) {
	i := d.loc(id)
	d.dirty[i], d.dirtyU[i] = true, true
	for _, c := range t.nodes[id].children {
		d.markSubtree(t, c)
	}
}

// setPart records a node's part.
func (d *shareDivision) setPart(id int32, k Slots) {
	i := d.loc(id)
	if d.part[i] == k {
		return
	}
	d.part[i] = k
	if d.moved != nil {
		d.moved(id)
	}
}

// waterFill splits q down from id over the children with demand, capped
// by it, to the leaves, where it is their part (parent enforcement's T,
// or G inside a top-level branch of a pool without ownership under
// priority) or, when leaf is set, what leaf is told (priority's G under
// parent enforcement in the layered folds, kept_priority.go; the parents'
// parts are then left alone).
func (d *shareDivision) waterFill(t *tree, sp *splitter, id int32, q Slots, leaf func(l int32, g Slots)) {
	i := d.loc(id)
	if !d.dirty[i] && q == d.memoQ[i] {
		return
	}
	d.dirty[i], d.memoQ[i] = false, q
	n := &t.nodes[id]
	switch {
	case n.leaf && leaf != nil:
		leaf(id, q)
		return
	case n.leaf:
		d.setPart(id, q)
		return
	}
	d.split(t, sp, id, q, splitFill)
	var sum Slots
	dirty, tmp, memoQ, part := d.dirty, d.tmp, d.memoQ, d.part
	for _, c := range n.children {
		j := d.loc(c)
		if dirty[j] || tmp[j] != memoQ[j] {
			d.waterFill(t, sp, c, tmp[j], leaf)
		}
		sum += part[j]
	}
	if leaf == nil {
		if d.quotaParts {
			sum = q
		}
		d.setPart(id, sum)
	}
}

// plannedShares splits q down from id by share, every consumer counted
// (the static planned share P), into planned; a leaf's is also told to
// leaf, when set (priority's G under leaf enforcement). With memo (the
// kept fold's, by node) a node whose part is what it was is skipped: P
// does not depend on demand.
func (d *shareDivision) plannedShares(t *tree, sp *splitter, id int32, q Slots, planned, memo []Slots, leaf func(l int32, q Slots)) {
	i := d.loc(id)
	if memo != nil {
		if memo[i] == q {
			return
		}
		memo[i] = q
	}
	planned[i] = q
	n := &t.nodes[id]
	if n.leaf {
		if leaf != nil {
			leaf(id, q)
		}
		return
	}
	d.split(t, sp, id, q, splitAll)
	for _, c := range n.children {
		if j := d.loc(c); memo == nil || d.tmp[j] != memo[j] {
			d.plannedShares(t, sp, c, d.tmp[j], planned, memo, leaf)
		}
	}
}

// dynamicShares splits q down from id as Pdyn, leaf enforcement's planned
// share over the consumers with demand, and returns the subtree's base B,
// bottom-up: B(l) = min(E, Pdyn), never below the leaf's floor (a leaf's
// start is min(E, Pdyn), before its floor); a node whose children's
// bases exceed its demand (under a max) re-splits it over them, and the
// root, when floors take its children's above the capacity, re-splits
// the capacity. A re-split lowers bases below what their memo says, so a
// pool where one may happen is divided with its subtree marked (the
// kept fold takes no such pool).
func (d *shareDivision) dynamicShares(t *tree, sp *splitter, id int32, q Slots) Slots {
	i := d.loc(id)
	if !d.dirty[i] && q == d.memoQ[i] {
		return d.base[i]
	}
	d.dirty[i], d.memoQ[i], d.dirtyU[i] = false, q, true
	n := &t.nodes[id]
	if n.leaf {
		b := minSlots(d.effOf(t, i, id), q)
		if d.floors {
			d.start[i] = b
			b = maxSlots(d.floor[i], b)
		}
		d.base[i] = b
		return b
	}
	d.split(t, sp, id, q, splitPdyn)
	var sum Slots
	dirty, tmp, memoQ, base := d.dirty, d.tmp, d.memoQ, d.base
	for _, c := range n.children {
		j := d.loc(c)
		if !dirty[j] && tmp[j] == memoQ[j] {
			sum += base[j]
			continue
		}
		sum += d.dynamicShares(t, sp, c, tmp[j])
	}
	d.base[i] = sum
	bound := d.effOf(t, i, id)
	if d.floors && i == 0 {
		bound = d.capacity
	}
	if sum > bound {
		d.resplit(t, sp, id, bound)
	}
	return d.base[i]
}

// resplit lowers the bases under id to total q, by share, each child
// capped at its current base, recursively down.
func (d *shareDivision) resplit(t *tree, sp *splitter, id int32, q Slots) {
	d.base[d.loc(id)] = q
	if t.nodes[id].leaf {
		return
	}
	d.split(t, sp, id, q, splitResplit)
	for _, c := range t.nodes[id].children {
		if j := d.loc(c); d.tmp[j] < d.base[j] {
			d.resplit(t, sp, c, d.tmp[j])
		}
	}
}

// starts sets, with floors, where each node's surplus starts: a leaf's
// base less what its floor added to it (min(B, min(E, Pdyn))), a
// parent's the sum of its children's. What a floor added counts as
// surplus already given (the surplus split's floor), not as a base the
// surplus adds to (decisions.md #263).
func (d *shareDivision) starts(t *tree, id int32) Slots {
	i := d.loc(id)
	n := &t.nodes[id]
	if n.leaf {
		d.start[i] = minSlots(d.start[i], d.base[i])
		return d.start[i]
	}
	var sum Slots
	for _, c := range n.children {
		sum += d.starts(t, c)
	}
	d.start[i] = sum
	return sum
}

// surplus spreads u from id over the branches with residual need E - B,
// by share, capped by that need; a leaf's part is its base (with floors,
// its start) plus its share of the surplus, a parent's the sum of its
// leaves'. It revisits only the nodes whose surplus or whose children's
// residual needs changed.
func (d *shareDivision) surplus(t *tree, sp *splitter, id int32, u Slots) {
	i := d.loc(id)
	if !d.dirtyU[i] && u == d.memoU[i] {
		return
	}
	d.dirtyU[i], d.memoU[i] = false, u
	n := &t.nodes[id]
	if n.leaf {
		b := d.base[i]
		if d.floors {
			b = d.start[i]
		}
		d.setPart(id, b+u)
		return
	}
	d.split(t, sp, id, u, splitSurplus)
	var sum Slots
	dirtyU, tmp, memoU, part := d.dirtyU, d.tmp, d.memoU, d.part
	for _, c := range n.children {
		j := d.loc(c)
		if dirtyU[j] || tmp[j] != memoU[j] {
			d.surplus(t, sp, c, tmp[j])
		}
		sum += part[j]
	}
	d.setPart(id, sum)
}

// split splits q over id's children as kind says (the sibling split,
// split.go), into tmp.
func (d *shareDivision) split(t *tree, sp *splitter, id int32, q Slots, kind splitKind) {
	items := sp.items[:0]
	tmp, base, eff, planned := d.tmp, d.base, d.eff, d.planned
	for _, c := range t.nodes[id].children {
		j, n := d.loc(c), &t.nodes[c]
		tmp[j] = 0
		tm := terms{e: n.eff, b: base[j], s: base[j]}
		if eff != nil {
			tm.e = eff[j]
		}
		if d.floors {
			tm.s, tm.f = d.start[j], d.floor[j]
		}
		if planned != nil {
			tm.p = planned[j]
		}
		if in, fl, b, cp := kind.term(tm); in {
			items = append(items, share{weight: n.share, floor: fl, base: b, cap: cp, priority: n.priority, rank: c})
		}
	}
	sp.split(q, items, d.bands && kind.banded())
	for _, it := range items {
		tmp[d.loc(it.rank)] = it.got
	}
	sp.items = items
}
