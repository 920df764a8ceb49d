package domain

// shareDivision is one pool's division by docs/rules.md#shares' targets
// in the layered fold (#layer-division): q slots split down the pool's
// subtree over the leaves' demand in it, each pass written once and
// memoized. A node is revisited only when it is dirty (the demand below
// it changed) or its quota moved; the layered fold's full computation
// (layered_targets.go) divides with the pool's subtree marked, the kept
// fold (kept_fold.go) keeps the division between events.
//
// Arrays are by local index: a node's preorder position less the pool's
// (pre, at), or the node id itself when pre is nil (the full
// computation's arrays span the tree).
type shareDivision struct {
	pre []int32 // by node id: position in depth-first preorder; nil: arrays by node id
	at  int32   // the pool's position in pre

	eff   []Slots // the demand each node brings into the pool
	base  []Slots // leaf enforcement: Pdyn, then the base B
	part  []Slots // a leaf's part of the pool (a parent's: its leaves' sum)
	tmp   []Slots // a node's part of its parent's split
	memoQ []Slots // the quota a node was given in the last pass
	memoU []Slots // the surplus a node was given in the last pass
	dirty []bool  // the demand below the node changed since the last pass
	// dirtyU: a node's residual need (or a child's) changed since the
	// last surplus pass.
	dirtyU []bool

	// moved, when set, is told of every leaf whose part changed.
	moved func(l int32)
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

// markSubtree marks every node of id's subtree dirty.
func (d *shareDivision) markSubtree(t *tree, id int32) {
	i := d.loc(id)
	d.dirty[i], d.dirtyU[i] = true, true
	for _, c := range t.nodes[id].children {
		d.markSubtree(t, c)
	}
}

// setPart records a leaf's part.
func (d *shareDivision) setPart(l int32, k Slots) {
	i := d.loc(l)
	if d.part[i] == k {
		return
	}
	d.part[i] = k
	if d.moved != nil {
		d.moved(l)
	}
}

// waterFill splits q down from id over the children with demand, capped
// by it, to the leaves, where it is their part (parent enforcement's T)
// or, when leaf is set, what leaf is told (priority's G under parent
// enforcement, kept_priority.go; the parents' parts are then left alone).
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
	for _, c := range n.children {
		j := d.loc(c)
		if d.dirty[j] || d.tmp[j] != d.memoQ[j] {
			d.waterFill(t, sp, c, d.tmp[j], leaf)
		}
		sum += d.part[j]
	}
	if leaf == nil {
		d.part[i] = sum
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
// bottom-up: B(l) = min(E, Pdyn); a node whose children's bases exceed its
// demand (under a max) re-splits it over them. A re-split lowers bases
// below what their memo says, so a pool where a max may bind is divided
// with its subtree marked (the kept fold takes no such pool).
func (d *shareDivision) dynamicShares(t *tree, sp *splitter, id int32, q Slots) Slots {
	i := d.loc(id)
	if !d.dirty[i] && q == d.memoQ[i] {
		return d.base[i]
	}
	d.dirty[i], d.memoQ[i], d.dirtyU[i] = false, q, true
	n := &t.nodes[id]
	if n.leaf {
		d.base[i] = minSlots(d.eff[i], q)
		return d.base[i]
	}
	d.split(t, sp, id, q, splitPdyn)
	var sum Slots
	for _, c := range n.children {
		j := d.loc(c)
		if !d.dirty[j] && d.tmp[j] == d.memoQ[j] {
			sum += d.base[j]
			continue
		}
		sum += d.dynamicShares(t, sp, c, d.tmp[j])
	}
	d.base[i] = sum
	if sum > d.eff[i] {
		d.resplit(t, sp, id, d.eff[i])
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

// surplus spreads u from id over the branches with residual need E - B,
// by share, capped by that need; a leaf's part is its base plus its share
// of the surplus.
func (d *shareDivision) surplus(t *tree, sp *splitter, id int32, u Slots) {
	i := d.loc(id)
	if !d.dirtyU[i] && u == d.memoU[i] {
		return
	}
	d.dirtyU[i], d.memoU[i] = false, u
	n := &t.nodes[id]
	if n.leaf {
		d.setPart(id, d.base[i]+u)
		return
	}
	d.split(t, sp, id, u, splitSurplus)
	var sum Slots
	for _, c := range n.children {
		j := d.loc(c)
		if d.dirtyU[j] || d.tmp[j] != d.memoU[j] {
			d.surplus(t, sp, c, d.tmp[j])
		}
		sum += d.part[j]
	}
	d.part[i] = sum
}

// split splits q over id's children as kind says (the sibling split,
// split.go), into tmp.
func (d *shareDivision) split(t *tree, sp *splitter, id int32, q Slots, kind splitKind) {
	items := sp.items[:0]
	for _, c := range t.nodes[id].children {
		j := d.loc(c)
		d.tmp[j] = 0
		if in, fl, b, cp := kind.term(terms{e: d.eff[j], b: d.base[j], s: d.base[j]}); in {
			n := &t.nodes[c]
			items = append(items, share{weight: n.share, floor: fl, base: b, cap: cp, priority: n.priority, rank: c})
		}
	}
	sp.split(q, items, false)
	for _, it := range items {
		d.tmp[d.loc(it.rank)] = it.got
	}
	sp.items = items
}
