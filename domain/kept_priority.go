package domain

import (
	"cmp"
	"slices"
)

// The priority division of one kept pool (kept_fold.go): what
// layeredFold.divideHeld and dividePriority decide, kept between events.
// A leaf first keeps what it sits on (within its demand); free slots then
// go to the leaves below their guarantee G in entitled order, then to the
// borrowers in borrow order; with preemption, the entitled leaves still
// short reclaim from the leaves above their G in the victim order of
// docs/rules.md#priority. Only the leaves below their guarantee, those
// who would borrow and those above their G take part in the passes, so
// the pool keeps them in sets (entitled and borrow order, and the leaves above G) and the
// passes walk those; every other leaf ends on what it keeps. What a
// leaf keeps depends on that leaf alone while the pool has room for
// every keep; when it has not (an owner took lent slots back), the keeps
// are redone in the keepers' order over the whole pool.

// heldPool is a kept pool's priority state, by local index.
type heldPool struct {
	planned, memoP []Slots // the static planned share of the pool's slots, and the q it was split from (-1: none)
	g              []Slots // leaves: G
	sits, untr     []Slots // leaves: what they sit on in the pool's classes, and min(that, E)
	cur0           []Slots // leaves: what they keep
	keepCut        bool    // cur0 came from keeps cut by the pool's size
	sumUntr        Slots   // the keeps if none is cut
	sumCur0        Slots
	branch         []Slots // at x's children: the sum of their leaves' cur0
	ne, nb         []int32 // leaves below their guarantee (entitled order), who would borrow (borrow order)
	inNe, inNb     []bool
	key            []uint64 // by local leaf: the waiting-since its set places were ordered by
	vic            []int32  // leaves above their G (filtered when walked)
	inV, inVic     []bool   // above G by its keep; in vic
	branchOf       []int32  // by local leaf: the local index of its branch (the child of x above it)
	// The passes' work: by local index, a moved leaf's slots (inWork) and
	// a branch's sum moved; the lists of those, kept for their room.
	work, brWork    []Slots
	inWork          []bool
	order, branches []int32
	off             []int32 // leaves whose part is not their keep (the passes gave or took)
	act             []int32 // leaves to look at again in this division
	actMark         []bool
	transfers       []transfer
}

// newHeldPool makes the priority state of pool pl (k nodes).
func (f *incFold) newHeldPool(t *tree, pl *incPool, k int32) *heldPool {
	h := &heldPool{planned: make([]Slots, k), memoP: make([]Slots, k), g: make([]Slots, k), sits: make([]Slots, k), untr: make([]Slots, k),
		cur0: make([]Slots, k), branch: make([]Slots, k), inNe: make([]bool, k), inNb: make([]bool, k), key: make([]uint64, k),
		inV: make([]bool, k), inVic: make([]bool, k), actMark: make([]bool, k), branchOf: make([]int32, k),
		work: make([]Slots, k), brWork: make([]Slots, k), inWork: make([]bool, k)}
	for i := range h.memoP {
		h.memoP[i] = -1
	}
	for _, l := range pl.leaves {
		h.branchOf[pl.loc(l)] = pl.loc(branchOf(t, pl.x, l))
	}
	return h
}

// activate notes that leaf l's keep or sets must be looked at again.
func (f *incFold) activate(pl *incPool, l int32) {
	h := pl.held
	if i := pl.loc(l); !h.actMark[i] {
		h.actMark[i] = true
		h.act = append(h.act, l)
	}
}

// divideHeldKept divides pool pl's c slots by priority.
func (f *incFold) divideHeldKept(t *tree, pl *incPool, c Slots) {
	h := pl.held
	// The planned shares, where the pool's size changed; with leaf
	// enforcement a leaf's G is its planned share.
	var leafG func(l int32, g Slots)
	if !f.parentEnf {
		leafG = pl.setGuarantee
	}
	pl.plannedShares(t, &f.sp, pl.x, c, h.planned, h.memoP, leafG)
	f.guarantees(t, pl)
	for _, l := range pl.attr { // where it sits changed
		f.activate(pl, l)
	}
	for _, l := range h.act {
		f.settleKeep(t, pl, l)
	}
	switch {
	case h.sumUntr > c:
		f.cutKeeps(t, pl, c)
	case h.keepCut:
		h.keepCut = false
		for _, l := range pl.leaves {
			f.setCur0(t, pl, l, h.untr[pl.loc(l)])
		}
	}
	f.passes(t, pl, c)
	f.noteTransfers(pl)
	for _, l := range h.act {
		h.actMark[pl.loc(l)] = false
	}
	h.act = h.act[:0]
}

// guarantees refills, with parent enforcement, each branch's planned
// share over its leaves with demand (capped by it), where demand or the
// planned share changed.
func (f *incFold) guarantees(t *tree, pl *incPool) {
	if !f.parentEnf {
		return
	}
	for _, c := range t.nodes[pl.x].children {
		j := pl.loc(c)
		if q := pl.held.planned[j]; pl.dirty[j] || q != pl.memoQ[j] {
			pl.waterFill(t, &f.sp, c, q, pl.setGuarantee)
		}
	}
}

// setG records a leaf's G.
func (f *incFold) setG(pl *incPool, l int32, g Slots) {
	if i := pl.loc(l); pl.held.g[i] != g {
		pl.held.g[i] = g
		f.activate(pl, l)
	}
}

// settleKeep looks at leaf l again: what it sits on, would keep, keeps,
// and which sets it is in.
func (f *incFold) settleKeep(t *tree, pl *incPool, l int32) {
	h := pl.held
	i := pl.loc(l)
	sits := Slots(0)
	for _, lender := range f.heldBy[poolLeaf{pl.x, l}] {
		if pl.classAt(lender) >= 0 {
			sits += f.held[heldKey{pool: pl.x, leaf: l, lender: lender}]
		}
	}
	h.sits[i] = sits
	k := minSlots(sits, pl.eff[i])
	h.sumUntr += k - h.untr[i]
	h.untr[i] = k
	if h.keepCut { // redone whole below
		return
	}
	f.setCur0(t, pl, l, k)
}

// setCur0 sets leaf l's keep, with the branch sums and its sets.
func (f *incFold) setCur0(t *tree, pl *incPool, l int32, k Slots) {
	h := pl.held
	i := pl.loc(l)
	if d := k - h.cur0[i]; d != 0 {
		h.cur0[i] = k
		h.sumCur0 += d
		h.branch[h.branchOf[i]] += d
		f.activate(pl, l) // its part is set again after the passes
	}
	f.placeInSets(t, pl, l)
}

// branchOf is the child of x whose subtree holds leaf l.
func branchOf(t *tree, x, l int32) int32 {
	for t.nodes[l].parent != x {
		l = t.nodes[l].parent
	}
	return l
}

// cutKeeps redoes every keep in the keepers' order (priority desc, then
// fewest slots sat on, then path descending), each cut by what is left of
// the pool's c slots (startHeld).
func (f *incFold) cutKeeps(t *tree, pl *incPool, c Slots) {
	h := pl.held
	var keepers []int32
	for _, l := range pl.leaves {
		if pl.eff[pl.loc(l)] > 0 {
			keepers = append(keepers, l)
		}
	}
	slices.SortFunc(keepers, func(a, b int32) int {
		return t.keeperOrder(a, h.sits[pl.loc(a)], b, h.sits[pl.loc(b)])
	})
	for _, l := range pl.leaves {
		f.setCur0(t, pl, l, 0)
	}
	left := c
	for _, l := range keepers {
		k := minSlots(h.untr[pl.loc(l)], left)
		left -= k
		f.setCur0(t, pl, l, k)
	}
	h.keepCut = true
}

// placeInSets puts leaf l in the sets its keep, demand and G say.
func (f *incFold) placeInSets(t *tree, pl *incPool, l int32) {
	h := pl.held
	i := pl.loc(l)
	n := &t.nodes[l]
	e, g, k := pl.eff[i], h.g[i], h.cur0[i]
	ne := e > 0 && minSlots(e, g) > k
	nb := e > 0 && minSlots(e, borrowCeiling(n, g)) > k
	// The sets are ordered by priority, waiting since and path only: a
	// leaf in the same sets with the same waiting-since stays in place.
	if ne != h.inNe[i] || nb != h.inNb[i] || h.key[i] != n.waitingSince {
		if h.inNe[i] {
			h.ne = f.setDelete(t, pl, h.ne, l, entitledBy)
		}
		if h.inNb[i] {
			h.nb = f.setDelete(t, pl, h.nb, l, borrowBy)
		}
		h.key[i] = n.waitingSince
		if h.inNe[i] = ne; ne {
			h.ne = f.setInsert(t, pl, h.ne, l, entitledBy)
		}
		if h.inNb[i] = nb; nb {
			h.nb = f.setInsert(t, pl, h.nb, l, borrowBy)
		}
	}
	h.inV[i] = k > g
	if h.inV[i] && !h.inVic[i] {
		h.inVic[i] = true
		h.vic = append(h.vic, l)
	}
}

// setOrder names the orders of the sets: docs/rules.md#priority's
// entitled order (priority desc, waiting since asc, path) and borrow
// order (waiting since asc, priority desc, path), by the waiting-since
// the leaf was placed with.
type setOrder int

const (
	entitledBy setOrder = iota
	borrowBy
)

func (f *incFold) setCmp(t *tree, pl *incPool, by setOrder) func(a, b int32) int {
	key := pl.held.key
	return func(a, b int32) int {
		ka, kb := key[pl.loc(a)], key[pl.loc(b)]
		pa, pb := t.nodes[a].priority, t.nodes[b].priority
		if by == entitledBy {
			return cmp.Or(cmpDesc(pa, pb), cmp.Compare(ka, kb), cmp.Compare(a, b))
		}
		return cmp.Or(cmp.Compare(ka, kb), cmpDesc(pa, pb), cmp.Compare(a, b))
	}
}

func (f *incFold) setInsert(t *tree, pl *incPool, set []int32, l int32, by setOrder) []int32 {
	i, _ := slices.BinarySearchFunc(set, l, f.setCmp(t, pl, by))
	return slices.Insert(set, i, l)
}

func (f *incFold) setDelete(t *tree, pl *incPool, set []int32, l int32, by setOrder) []int32 {
	i, found := slices.BinarySearchFunc(set, l, f.setCmp(t, pl, by))
	if !found {
		panic("domain: a kept set lost a leaf")
	}
	return slices.Delete(set, i, i+1)
}

// heldRun is one division's passes: the leaves whose slots they moved,
// in the order first moved (their slots now in the pool's work), and the
// branches whose sums they moved (by how much in brWork).
type heldRun struct {
	order    []int32
	branches []int32
}

// passes runs the grants and, with preemption, the reclaims of section
// 4 on the keeps, and sets every part they or the keeps moved.
func (f *incFold) passes(t *tree, pl *incPool, c Slots) {
	h := pl.held
	r := &heldRun{order: h.order[:0], branches: h.branches[:0]}
	cur := func(l int32) Slots {
		if i := pl.loc(l); h.inWork[i] {
			return h.work[i]
		}
		return h.cur0[pl.loc(l)]
	}
	add := func(l int32, k Slots) {
		i := pl.loc(l)
		if !h.inWork[i] {
			h.inWork[i], h.work[i] = true, h.cur0[i]
			r.order = append(r.order, l)
		}
		h.work[i] += k
		b := h.branchOf[i]
		if h.brWork[b] == 0 && !slices.Contains(r.branches, b) {
			r.branches = append(r.branches, b)
		}
		h.brWork[b] += k
	}
	left := c - h.sumCur0
	for _, l := range h.ne { // entitled first
		if left == 0 {
			break
		}
		i := pl.loc(l)
		if need := minSlots(pl.eff[i], h.g[i]) - cur(l); need > 0 {
			k := minSlots(need, left)
			add(l, k)
			left -= k
		}
	}
	for _, l := range h.nb { // then borrowers
		if left == 0 {
			break
		}
		i := pl.loc(l)
		if need := minSlots(pl.eff[i], borrowCeiling(&t.nodes[l], h.g[i])) - cur(l); need > 0 {
			k := minSlots(need, left)
			add(l, k)
			left -= k
		}
	}
	h.transfers = h.transfers[:0]
	if f.preempt {
		f.reclaims(t, pl, r, cur, add)
	}
	for _, list := range [3][]int32{h.off, r.order, h.act} {
		for _, l := range list {
			pl.setPart(l, cur(l))
		}
	}
	h.off = h.off[:0]
	for _, l := range r.order {
		i := pl.loc(l)
		if h.work[i] != h.cur0[i] {
			h.off = append(h.off, l)
		}
		h.inWork[i] = false
	}
	for _, b := range r.branches {
		h.brWork[b] = 0
	}
	h.order, h.branches = r.order, r.branches
}

// reclaims: the entitled leaves still short take from the leaves above
// their G, in docs/rules.md#priority's victim order evaluated as they go
// (layeredFold.dividePriority).
func (f *incFold) reclaims(t *tree, pl *incPool, r *heldRun, cur func(int32) Slots, add func(int32, Slots)) {
	h := pl.held
	brCur := func(b int32) Slots { j := pl.loc(b); return h.branch[j] + h.brWork[j] }
	for _, l := range h.ne {
		i := pl.loc(l)
		var blocked []int32
		for need := minSlots(pl.eff[i], h.g[i]) - cur(l); need > 0; {
			v := f.victim(t, pl, r, cur, brCur, l, blocked)
			if v == noNode {
				break
			}
			give := minSlots(need, cur(v)-h.g[pl.loc(v)])
			if f.parentEnf {
				if bv, bl := branchOf(t, pl.x, v), branchOf(t, pl.x, l); bv != bl {
					j := pl.loc(bv)
					give = minSlots(give, brCur(bv)-minSlots(h.planned[j], pl.eff[j]))
				}
			}
			if give <= 0 {
				blocked = append(blocked, v)
				continue
			}
			add(v, -give)
			add(l, give)
			h.transfers = append(h.transfers, transfer{claimant: l, victim: v, slots: give})
			need -= give
		}
	}
}

// victim is the first leaf above its G, other than the claimant and those
// blocked, in docs/rules.md#priority's victim order (victimOrder, as
// priorityVictim).
func (f *incFold) victim(t *tree, pl *incPool, r *heldRun, cur func(int32) Slots, brCur func(int32) Slots, claimant int32, blocked []int32) int32 {
	h := pl.held
	kept := h.vic[:0]
	for _, v := range h.vic { // drop those no longer above G by their keep
		if i := pl.loc(v); h.inV[i] {
			kept = append(kept, v)
		} else {
			h.inVic[i] = false
		}
	}
	h.vic = kept
	// Whether a branch holds more than its planned share, worked out once
	// per branch for this search (by the branch's local index).
	overAt := map[int32]bool{}
	over := func(v int32) bool {
		b := h.branchOf[pl.loc(v)]
		o, known := overAt[b]
		if !known {
			bid := pl.nodeAt(b, f)
			o = brCur(bid) > h.planned[b]
			overAt[b] = o
		}
		return o
	}
	best, bestOver, bestAbove := noNode, false, Slots(0)
	consider := func(v int32) {
		i := pl.loc(v)
		if v == claimant || pl.eff[i] == 0 || slices.Contains(blocked, v) {
			return
		}
		above := cur(v) - h.g[i]
		if above <= 0 {
			return
		}
		vo := over(v)
		if best != noNode && t.victimOrder(v, vo, above, best, bestOver, bestAbove) >= 0 {
			return
		}
		best, bestOver, bestAbove = v, vo, above
	}
	for _, v := range h.vic {
		consider(v)
	}
	for _, v := range r.order {
		if !h.inV[pl.loc(v)] {
			consider(v)
		}
	}
	return best
}
