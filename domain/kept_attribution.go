package domain

import (
	"cmp"
	"slices"
)

// The attribution of one kept pool (kept_fold.go): which classes each
// leaf's part comes from, as layeredFold.attribute decides it. A leaf
// first keeps the classes it sits on (keepOrder), then the parts not kept
// take what is left, leaves in keeperOrder, classes in the group's order.
// Keeps are taken leaf by leaf in path order, each cut by what earlier
// leaves left of a class. A keep is never more than what the leaf sits
// on, so a class whose sitters sit on no more than it has is never cut
// (the pool's own slots never are: the leaves sit on no more than there
// are); only a lent class that shrank below what is sat on can be, and
// only its sitters' keeps depend on the order. Those leaves are redone
// together in path order (coupleKeeps); every other leaf's keeps depend
// on that leaf alone, and are redone only when its part or sittings
// change.

// rebuildClasses lists the pool's classes in the group's order: its own
// slots, then what its children lend by grace, then lender. Leaves that
// sit on a lender whose class came or went redo their attribution.
func (f *incFold) rebuildClasses(t *tree, pl *incPool) {
	pl.classesDirty = false
	var lent []lentSlots
	for _, c := range t.nodes[pl.x].children {
		n := &t.nodes[c]
		if !n.lend {
			continue
		}
		if n.leaf {
			if k := f.owned[c] - f.ownUse[c]; k > 0 {
				lent = append(lent, lentSlots{lender: c, grace: n.lendGrace, slots: k})
			}
			continue
		}
		for _, s := range f.pools[c].leftover {
			if s.lender == noNode {
				s.lender, s.grace = c, n.lendGrace
			}
			s.grace = min(s.grace, n.lendGrace)
			lent = append(lent, s)
		}
	}
	slices.SortFunc(lent, func(a, b lentSlots) int {
		return cmp.Or(cmp.Compare(a.grace, b.grace), cmp.Compare(a.lender, b.lender))
	})
	var classes []lentSlots
	if pl.unrestricted > 0 {
		classes = append(classes, lentSlots{lender: noNode, slots: pl.unrestricted})
	}
	classes = append(classes, lent...)
	f.markLenderChanges(pl, pl.classes, classes)
	pl.classes = classes
}

// markLenderChanges redoes the attribution of the leaves sitting on a
// lender whose class is in one list and not the other.
func (f *incFold) markLenderChanges(pl *incPool, before, after []lentSlots) {
	has := func(list []lentSlots, lender int32) bool {
		return slices.ContainsFunc(list, func(s lentSlots) bool { return s.lender == lender })
	}
	for _, pair := range [][2][]lentSlots{{before, after}, {after, before}} {
		for _, s := range pair[0] {
			if s.lender != noNode && !has(pair[1], s.lender) {
				for _, l := range f.lentBy[poolLeaf{pl.x, s.lender}] {
					f.markAttr(pl.x, l)
				}
			}
		}
	}
}

// classAt is the position of lender's class in the pool's classes, -1
// when it has none.
func (pl *incPool) classAt(lender int32) int {
	return slices.IndexFunc(pl.classes, func(s lentSlots) bool { return s.lender == lender })
}

// attribute redoes the keeps of the leaves marked and of the sitters of
// the classes that are cut, then the rest and the leftover.
func (f *incFold) attribute(t *tree, pl *incPool) {
	for _, l := range pl.attr {
		pl.attrMark[pl.loc(l)] = false
		f.keepUncut(pl, l)
	}
	pl.attr = pl.attr[:0]
	f.coupleKeeps(pl)
	left := f.takeRest(t, pl)
	var leftover []lentSlots
	for i, s := range pl.classes {
		if left[i] > 0 {
			s.slots = left[i]
			leftover = append(leftover, s)
		}
	}
	if !slices.Equal(leftover, pl.leftover) {
		pl.leftover = leftover
		if pl.x != 0 {
			f.dirtyClasses(t.nodes[pl.x].parent)
		}
	}
}

// coupleKeeps redoes, in path order, the keeps of the leaves sitting on a
// class that is sat on beyond its size, each cut by what the leaves
// before it left of such a class; the leaves a previous pass did and
// that no longer sit on one are redone alone.
func (f *incFold) coupleKeeps(pl *incPool) {
	var coupled []int32
	left := make([]Slots, len(pl.classes))
	for i, s := range pl.classes {
		left[i] = Unlimited
		if s.lender != noNode && f.lentOn[poolLeaf{pl.x, s.lender}] > s.slots {
			left[i] = s.slots
			coupled = append(coupled, f.lentBy[poolLeaf{pl.x, s.lender}]...)
		}
	}
	slices.Sort(coupled)
	coupled = slices.Compact(coupled)
	for _, l := range pl.cutLeaves {
		if _, in := slices.BinarySearch(coupled, l); !in {
			f.keepUncut(pl, l)
		}
	}
	for _, l := range coupled {
		f.setKeeps(pl, l, f.keeps(pl, l, left))
	}
	pl.cutLeaves = coupled
}

// keeps is what leaf l keeps of the classes it sits on (keepSittings),
// each cut by left (nil: by nothing).
func (f *incFold) keeps(pl *incPool, l int32, left []Slots) []lenderSlots {
	i := pl.loc(l)
	if pl.part[i] == 0 {
		return nil
	}
	sits := f.sitBuf[:0]
	for _, lender := range f.heldBy[poolLeaf{pl.x, l}] {
		if at := pl.classAt(lender); at >= 0 {
			sits = append(sits, classSitting{at: at, slots: f.held[heldKey{pool: pl.x, leaf: l, lender: lender}]})
		}
	}
	slices.SortFunc(sits, func(a, b classSitting) int { return cmp.Compare(a.at, b.at) })
	out := f.keepBuf[:0]
	budget := Slots(0)
	if f.rules4Classes { // one class group: the pool is the group
		budget = Unlimited
	}
	keepSittings(sits, pl.part[i], pl.eff[i], budget, func(at int, n Slots) Slots {
		if left != nil {
			n = minSlots(n, left[at])
			left[at] -= n
		}
		if n > 0 {
			out = append(out, lenderSlots{lender: pl.classes[at].lender, slots: n})
		}
		return n
	})
	f.sitBuf, f.keepBuf = sits, out
	return out
}

// setKeeps replaces leaf l's keeps, keeping the sums per class and the
// leaves with a rest.
func (f *incFold) setKeeps(pl *incPool, l int32, ks []lenderSlots) {
	i := pl.loc(l)
	if !slices.Equal(pl.keeps[i], ks) {
		f.noteDue(l)
	}
	for _, k := range pl.keeps[i] {
		pl.keepSum[k.lender] -= k.slots
	}
	pl.keeps[i] = append(pl.keeps[i][:0], ks...) // ks may be scratch: copied into the leaf's own room
	rest := pl.part[i]
	for _, k := range ks {
		pl.keepSum[k.lender] += k.slots
		rest -= k.slots
	}
	pl.rest[i] = rest
	if rest > 0 && !pl.restMark[i] {
		pl.restMark[i] = true
		pl.restSet = append(pl.restSet, l)
	}
}

// keepUncut redoes leaf l's keeps on the assumption that no class is cut.
func (f *incFold) keepUncut(pl *incPool, l int32) {
	f.setKeeps(pl, l, f.keeps(pl, l, nil))
}

// takeRest hands the parts not kept out of what the keeps left of each
// class (leaves in keeperOrder, classes in order) and returns what is left
// of each class.
func (f *incFold) takeRest(t *tree, pl *incPool) []Slots {
	left := make([]Slots, len(pl.classes))
	for i, s := range pl.classes {
		left[i] = s.slots - pl.keepSum[s.lender]
	}
	var takers []restTaker
	kept := pl.restSet[:0]
	for _, l := range pl.restSet {
		i := pl.loc(l)
		if len(pl.restTakes[i]) > 0 {
			f.noteDue(l) // its takes are redone below: compared, they would rarely differ
		}
		pl.restTakes[i] = pl.restTakes[i][:0]
		if pl.rest[i] > 0 {
			kept = append(kept, l)
			takers = append(takers, restTaker{of: int(i), leaf: l, part: pl.part[i], rest: pl.rest[i]})
		} else {
			pl.restMark[i] = false
		}
	}
	pl.restSet = kept
	handOutRest(t, takers, left, f.rules4Classes && !f.priority, func(r restTaker, at int, n Slots) {
		pl.restTakes[r.of] = append(pl.restTakes[r.of], lenderSlots{lender: pl.classes[at].lender, slots: n})
		f.noteDue(r.leaf)
	})
	return left
}
