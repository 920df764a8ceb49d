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
// ascending: a property of the plan, kept on the tree once made (the
// caller does not modify it).
func (t *tree) subtreeGraces(x int32) []time.Duration {
	if t.graces == nil {
		t.graces = make([][]time.Duration, len(t.nodes))
	}
	if gs := t.graces[x]; gs != nil {
		return gs
	}
	n := &t.nodes[x]
	gs := make([]time.Duration, 0, n.hi-n.lo)
	for _, l := range t.leaves[n.lo:n.hi] {
		gs = append(gs, t.nodes[l].reclaimGrace)
	}
	slices.Sort(gs)
	gs = slices.Clip(slices.Compact(gs))
	t.graces[x] = gs
	return gs
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
// the group's classes, by the two rules below (keepSittings, handOutRest)
// that the kept fold memoizes (kept_attribution.go); it returns what is
// left of each class.
func (f *layeredFold) attribute(x int32, classes []lentSlots, used []poolTake) []lentSlots {
	left := make([]Slots, len(classes))
	for i, c := range classes {
		left[i] = c.slots
	}
	ent := make([]Slots, len(used)) // entitled slots of each leaf's part not attributed yet
	take := func(ui int, i int, n Slots) {
		e := minSlots(n, ent[ui])
		ent[ui] -= e
		f.out.takes = append(f.out.takes, poolTake{pool: x, leaf: used[ui].leaf, lender: classes[i].lender, slots: n, entitled: e})
	}
	var byLender classIndex
	if len(classes) > 1 {
		byLender = indexClasses(classes)
	}
	rest := make([]restTaker, len(used))
	for ui, u := range used {
		ent[ui] = u.entitled
		k := u.slots
		// the demand it brought into the division: what is left of it
		// and its part (give counted the part down)
		brought := f.remDemand[u.leaf] + u.slots
		f.excess[u.leaf] -= keepSittings(f.sittingsIn(x, u.leaf, classes, byLender), k, brought, f.excess[u.leaf], func(i int, n Slots) Slots {
			hk := heldKey{pool: x, leaf: u.leaf, lender: classes[i].lender}
			if n = minSlots(n, minSlots(left[i], f.held[hk])); n > 0 {
				f.held[hk] -= n
				left[i] -= n
				take(ui, i, n)
				k -= n
			}
			return n
		})
		rest[ui] = restTaker{of: ui, leaf: u.leaf, part: u.slots, rest: k}
	}
	handOutRest(f.t, rest, left, f.rules4Classes && f.policy.shareRatio, func(r restTaker, i int, n Slots) { take(r.of, i, n) })
	var leftover []lentSlots
	for i, c := range classes {
		if left[i] > 0 {
			c.slots = left[i]
			leftover = append(leftover, c)
		}
	}
	return leftover
}

// classSitting is what a leaf sits on in one class of a pool: the class's
// position in the pool's class order, and the slots.
type classSitting struct {
	at    int
	slots Slots
}

// keepSittings is the rule by which a leaf keeps the classes of a pool it
// sits on (docs/rules.md#lent-classes), written once for the full fold
// (attribute) and the kept one (kept_attribution.go). sits lists them in
// the pool's class order (it is scratch: counted down here); part is the
// leaf's part of the division, brought the demand it brought into it.
//
// Under rules 4 (ruling 5: an owner whose own slots take it above E gives
// the excess back "in the release order of 'Placement with ownership'"),
// what it sits on beyond what it brought, up to budget (what it sits on
// in the whole pool beyond what it brought there: a pool divided group by
// group brings each group less than the pool), is given back first in
// that order: slots lent by others first, the pool's own last, that is
// the class order reversed (docs/decisions.md #331); it returns how much.
// Versions 1 to 3 pass a budget of 0. Of the rest
// it keeps in the class order while it keeps all (running work stays
// where it is); when its part is smaller (it gives slots up to others),
// in the reverse, so what it gives up is what the leaves gaining use
// first, the pool's own slots (docs/rules.md#placement: a reclaim takes
// the victim's slots from the host the claimant would use first;
// decisions.md #106). keep(at, n) keeps up to n of a class and says how
// many it kept: a class may have been cut by the leaves before.
func keepSittings(sits []classSitting, part, brought, budget Slots, keep func(at int, n Slots) Slots) (shed Slots) {
	total := Slots(0)
	for _, s := range sits {
		total += s.slots
	}
	for i := len(sits) - 1; i >= 0 && total > brought && shed < budget; i-- {
		n := minSlots(sits[i].slots, minSlots(total-brought, budget-shed))
		sits[i].slots -= n
		total -= n
		shed += n
	}
	keepOne := func(s classSitting) {
		if n := minSlots(part, s.slots); n > 0 {
			part -= keep(s.at, n)
		}
	}
	if part < total {
		for i := len(sits) - 1; i >= 0; i-- {
			keepOne(sits[i])
		}
		return shed
	}
	for _, s := range sits {
		keepOne(s)
	}
	return shed
}

// restTaker is a leaf whose part of a division is not all kept where it
// sits: its part and the rest, still to be handed out.
type restTaker struct {
	of         int // the caller's index of it
	leaf       int32
	part, rest Slots
}

// handOutRest is the rule by which the parts not kept are handed out of
// what the keeps left of each class (left, in the pool's class order,
// counted down by take), written once for both folds: leaves in
// keeperOrder, the reverse of the return order of
// docs/rules.md#ownership-placement (highest priority first, then fewest
// slots, then path descending), each from the classes in order, so the
// pool's own slots go to them first and the leaves sitting on lent
// slots, which an owner takes back, are those that give back first
// (decisions.md #98). Under rules 4's share_ratio (byClaim) the leaves come in the
// claimant order instead, the largest rest per unit of share first, then
// priority descending, then path (docs/decisions.md #358): the pool's own
// slots go first to the leaf the placement serves first. With one class
// the order decides nothing, and is path order. takers is sorted here;
// take(r, at, n) gives taker r n slots of a class.
func handOutRest(t *tree, takers []restTaker, left []Slots, byClaim bool, take func(r restTaker, at int, n Slots)) {
	if byClaim && len(left) > 1 {
		slices.SortFunc(takers, func(a, b restTaker) int {
			x, y := &t.nodes[a.leaf], &t.nodes[b.leaf]
			return cmp.Or(cmpDesc(int64(a.rest)*y.share, int64(b.rest)*x.share), cmpDesc(x.priority, y.priority), cmp.Compare(a.leaf, b.leaf))
		})
	} else if len(left) > 1 {
		slices.SortFunc(takers, func(a, b restTaker) int { return t.keeperOrder(a.leaf, a.part, b.leaf, b.part) })
	} else {
		slices.SortFunc(takers, func(a, b restTaker) int { return cmp.Compare(a.leaf, b.leaf) })
	}
	c := 0
	for _, r := range takers {
		for k := r.rest; k > 0; {
			for left[c] == 0 {
				c++
			}
			n := minSlots(k, left[c])
			take(r, c, n)
			left[c] -= n
			k -= n
		}
	}
}

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

// sittingsIn is what leaf l sits on in pool x's classes (nil idx: the
// one class), in the pool's class order.
func (f *layeredFold) sittingsIn(x, l int32, classes []lentSlots, idx classIndex) []classSitting {
	if idx == nil {
		return []classSitting{{at: 0, slots: f.held[heldKey{pool: x, leaf: l, lender: classes[0].lender}]}}
	}
	var sits []classSitting
	for _, lender := range f.heldBy[poolLeaf{x, l}] {
		for _, i := range idx[lender] {
			sits = append(sits, classSitting{at: i, slots: f.held[heldKey{pool: x, leaf: l, lender: lender}]})
		}
	}
	slices.SortFunc(sits, func(a, b classSitting) int { return cmp.Compare(a.at, b.at) })
	return sits
}
