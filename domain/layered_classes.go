package domain

// Lent classes (docs/rules.md#layered-fold): a pool's slots grouped by
// the leaves that may use them, and each leaf's part handed out of the
// classes, the ones it already sits on first.

import (
	"cmp"
	"slices"
	"time"
)

// classGroup is the slots of one division: the classes the same leaves may
// use (eligible: the largest reclaim_grace among them; -1 for none), the
// pool's own slots (lender noNode) first, then lent ones by grace, then
// lender.
type classGroup struct {
	eligible time.Duration
	slots    []lentSlots
}

// subtreeGraces lists the distinct reclaim_grace values of x's leaves,
// ascending.
func (f *layeredFold) subtreeGraces(x int32) []time.Duration {
	n := &f.t.nodes[x]
	var gs []time.Duration
	for _, l := range f.t.leaves[n.lo:n.hi] {
		gs = append(gs, f.t.nodes[l].reclaimGrace)
	}
	slices.Sort(gs)
	return slices.Compact(gs)
}

// classGroups groups a pool's slots by the set of leaves that may use
// them, most restrictive first: a class of grace g may be used by the
// leaves whose reclaim_grace is at most g, so its set is named by the
// largest such reclaim_grace. The pool's own slots may be used by every
// leaf of the pool: they join the last group.
func (f *layeredFold) classGroups(lent []lentSlots, unrestricted Slots, graces []time.Duration) []classGroup {
	eligibleOf := func(g time.Duration) time.Duration {
		i, found := slices.BinarySearch(graces, g)
		if found {
			return g
		}
		if i == 0 {
			return -1
		}
		return graces[i-1]
	}
	sorted := slices.Clone(lent)
	slices.SortStableFunc(sorted, func(a, b lentSlots) int {
		if a.grace != b.grace {
			return cmp.Compare(a.grace, b.grace)
		}
		return cmp.Compare(a.lender, b.lender)
	})
	var groups []classGroup
	if unrestricted > 0 {
		groups = append(groups, classGroup{eligible: graces[len(graces)-1], slots: []lentSlots{{lender: noNode, slots: unrestricted}}})
	}
	for _, s := range sorted {
		e := eligibleOf(s.grace)
		i := slices.IndexFunc(groups, func(g classGroup) bool { return g.eligible == e })
		if i < 0 {
			groups = append(groups, classGroup{eligible: e})
			i = len(groups) - 1
		}
		groups[i].slots = append(groups[i].slots, s)
	}
	slices.SortStableFunc(groups, func(a, b classGroup) int { return cmp.Compare(a.eligible, b.eligible) })
	return groups
}

// attribute hands the slots each leaf was given in one division out of
// the group's classes: first the classes it already sits on (so running
// work stays where it is), then in the group's order (the pool's own
// first, then lent by lowest grace), leaves in keeperOrder; it returns
// what is left of each class. With one class the orders decide nothing
// (a leaf's parts all come from it), so they are not computed.
func (f *layeredFold) attribute(x int32, classes []lentSlots, used []poolTake) []lentSlots {
	left := slices.Clone(classes)
	oneClass := len(left) == 1
	ent := make([]Slots, len(used)) // entitled slots of each leaf's part not attributed yet
	take := func(ui int, i int, n Slots) {
		left[i].slots -= n
		e := minSlots(n, ent[ui])
		ent[ui] -= e
		f.out.takes = append(f.out.takes, poolTake{pool: x, leaf: used[ui].leaf, lender: left[i].lender, slots: n, entitled: e})
	}
	rest := make([]Slots, len(used))
	for ui, u := range used {
		ent[ui] = u.entitled
	}
	var byLender classIndex
	if !oneClass {
		byLender = indexClasses(left)
	}
	for ui, u := range used {
		k := u.slots
		for _, i := range f.keepOrder(x, u, byLender) {
			hk := heldKey{pool: x, leaf: u.leaf, lender: left[i].lender}
			if n := minSlots(minSlots(k, left[i].slots), f.held[hk]); n > 0 {
				f.held[hk] -= n
				take(ui, i, n)
				k -= n
			}
		}
		rest[ui] = k
	}
	i := 0
	for _, ui := range f.keeperOrder(used, len(left) == 1) {
		for k := rest[ui]; k > 0; {
			for left[i].slots == 0 {
				i++
			}
			n := minSlots(k, left[i].slots)
			take(ui, i, n)
			k -= n
		}
	}
	return slices.DeleteFunc(left, func(s lentSlots) bool { return s.slots == 0 })
}

// keeperOrder lists the indices of used in the reverse of the return order of
// docs/rules.md#ownership-placement (highest priority first, then fewest
// slots, then path descending): the pool's own slots go to them first, so the
// leaves that sit on lent slots, which an owner takes back, are those that
// give back first (decisions.md #98).
func (f *layeredFold) keeperOrder(used []poolTake, inPathOrder bool) []int {
	order := make([]int, len(used))
	for i := range order {
		order[i] = i
	}
	if inPathOrder {
		return order
	}
	slices.SortStableFunc(order, func(a, b int) int {
		la, lb := used[a].leaf, used[b].leaf
		return f.t.keeperOrder(la, used[a].slots, lb, used[b].slots)
	})
	return order
}

var onlyClass = []int{0}

// poolLeaf names a leaf's slots in one pool.
type poolLeaf struct{ pool, leaf int32 }

// classIndex maps a lender to the indices of its classes in a group.
type classIndex map[int32][]int

func indexClasses(classes []lentSlots) classIndex {
	idx := make(classIndex, len(classes))
	for i, c := range classes {
		idx[c.lender] = append(idx[c.lender], i)
	}
	return idx
}

// heldIn is what leaf l sits on in pool x's classes of idx, and the
// indices of those classes (in the group's order).
func (f *layeredFold) heldIn(x, l int32, idx classIndex) (Slots, []int) {
	var is []int
	sits := Slots(0)
	for _, lender := range f.heldBy[poolLeaf{x, l}] {
		for _, i := range idx[lender] {
			is = append(is, i)
			sits += f.held[heldKey{pool: x, leaf: l, lender: lender}]
		}
	}
	slices.Sort(is)
	return sits, is
}

// keepOrder is the order in which leaf u.leaf keeps the group's classes
// it sits on (nil idx: the group has one class): the group's order while
// it keeps all it sits on; reversed when its part is smaller (it gives
// slots up), so what it gives up is what the leaves gaining would use
// first, the pool's own slots (docs/rules.md#placement: a reclaim takes
// the victim's slots from the host the claimant would use first;
// decisions.md #106).
// Classes it does not sit on are left out: it keeps nothing there.
func (f *layeredFold) keepOrder(x int32, u poolTake, idx classIndex) []int {
	if idx == nil {
		return onlyClass
	}
	sits, order := f.heldIn(x, u.leaf, idx)
	if u.slots < sits {
		slices.Reverse(order)
	}
	return order
}
