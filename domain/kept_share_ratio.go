package domain

// The division of one kept pool (kept_fold.go): docs/rules.md#shares' targets
// over the pool's subtree, c being the pool's size and a leaf's demand what
// it brings into the pool, with the memos of targets.go: a node is revisited
// only when its part or a node below it changed. The arithmetic is
// layeredFold's (divide, targets) without a max, which incFoldable requires:
// no base exceeds its parent's demand, so nothing re-splits.

// fillInc is waterFill with memo: q split over the children with demand,
// capped by it, down to the leaves, where it is their part (parent
// enforcement's T) or, into G, their guarantee (priority under parent
// enforcement, kept_priority.go).
func (f *incFold) fillInc(t *tree, pl *incPool, id int32, q Slots, intoG bool) {
	i := pl.loc(id, f)
	if !pl.dirty[i] && q == pl.memoQ[i] {
		return
	}
	pl.dirty[i], pl.memoQ[i] = false, q
	n := &t.nodes[id]
	switch {
	case n.leaf && intoG:
		f.setG(pl, id, q)
		return
	case n.leaf:
		f.setPart(t, pl, id, q)
		return
	}
	f.split(t, pl, id, q, splitFill)
	var sum Slots
	for _, c := range n.children {
		j := pl.loc(c, f)
		if pl.dirty[j] || pl.tmp[j] != pl.memoQ[j] {
			f.fillInc(t, pl, c, pl.tmp[j], intoG)
		}
		sum += pl.part[j]
	}
	if !intoG {
		pl.part[i] = sum
	}
}

// pdynInc computes Pdyn top-down and returns the subtree's base B.
func (f *incFold) pdynInc(t *tree, pl *incPool, id int32, q Slots) Slots {
	i := pl.loc(id, f)
	if !pl.dirty[i] && q == pl.memoQ[i] {
		return pl.base[i]
	}
	pl.dirty[i], pl.memoQ[i], pl.dirtyU[i] = false, q, true
	n := &t.nodes[id]
	if n.leaf {
		pl.base[i] = minSlots(pl.eff[i], q)
		return pl.base[i]
	}
	f.split(t, pl, id, q, splitPdyn)
	var sum Slots
	for _, c := range n.children {
		j := pl.loc(c, f)
		if !pl.dirty[j] && pl.tmp[j] == pl.memoQ[j] {
			sum += pl.base[j]
			continue
		}
		sum += f.pdynInc(t, pl, c, pl.tmp[j])
	}
	pl.base[i] = sum
	return sum
}

// surplusInc spreads the surplus over residual needs.
func (f *incFold) surplusInc(t *tree, pl *incPool, id int32, u Slots) {
	i := pl.loc(id, f)
	if !pl.dirtyU[i] && u == pl.memoU[i] {
		return
	}
	pl.dirtyU[i], pl.memoU[i] = false, u
	n := &t.nodes[id]
	if n.leaf {
		f.setPart(t, pl, id, pl.base[i]+u)
		return
	}
	f.split(t, pl, id, u, splitSurplus)
	var sum Slots
	for _, c := range n.children {
		j := pl.loc(c, f)
		if pl.dirtyU[j] || pl.tmp[j] != pl.memoU[j] {
			f.surplusInc(t, pl, c, pl.tmp[j])
		}
		sum += pl.part[j]
	}
	pl.part[i] = sum
}

// setPart records a leaf's new part of the pool: its attribution is
// redone, and the demand it brings into the pools above changes.
func (f *incFold) setPart(t *tree, pl *incPool, l int32, k Slots) {
	i := pl.loc(l, f)
	if pl.part[i] == k {
		return
	}
	pl.part[i] = k
	f.noteTarget(l)
	f.markAttr(pl.x, l)
	f.markPending(t, l, t.nodes[pl.x].parent)
}

// split splits q over id's children as kind says (the sibling split,
// split.go), into tmp (by local index).
func (f *incFold) split(t *tree, pl *incPool, id int32, q Slots, kind splitKind) {
	items := f.sp.items[:0]
	for _, c := range t.nodes[id].children {
		j := f.pre[c] - pl.at
		pl.tmp[j] = 0
		if in, fl, b, cp := kind.term(terms{e: pl.eff[j], b: pl.base[j], s: pl.base[j]}); in {
			n := &t.nodes[c]
			items = append(items, share{weight: n.share, floor: fl, base: b, cap: cp, priority: n.priority, rank: c})
		}
	}
	f.sp.split(q, items, false)
	for _, it := range items {
		pl.tmp[f.pre[it.rank]-pl.at] = it.got
	}
	f.sp.items = items
}
