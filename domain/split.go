package domain

import "slices"

// The sibling split (docs/rules.md#version-4, "The sibling split"): every
// division of a quantity among the children of one consumer goes through
// splitter.split, whichever data layout its caller keeps (the pool's
// shares, the layered fold's, the kept fold's pools). Each caller turns its
// children into items with splitKind.term, the one table of which children
// take part and with what floor, base and cap; split does the rest.
//
// Under rules 1 to 3, and under rules 4 without its plan fields (no zero
// share, no priority bands, no consumer pinned), every floor is 0 and split
// is apportion itself (docs/rules.md#apportion), term for term
// ("Reduction"): the golden corpus holds versions 1-3 to that.

// share is one child in a split: its weight (share ratio; 0 is a zero
// share, rules 4), its floor (the least it gets; 0 unless its pool has a
// consumer that is not preemptable), its base (its guarantee as far as it
// wants it; read only with priority bands), its cap, and the priority and
// rank (path order) that break ties on leftover slots. got is its part.
type share struct {
	weight   int64
	floor    Slots
	base     Slots
	cap      Slots
	priority int64
	rank     int32
	got      Slots
	rem      int64
}

// splitKind names one row of the table of splits (docs/rules.md#shares,
// and #version-4 for the floors and bases): which children of a consumer take part in a split of its part, and
// each one's floor, base and cap.
type splitKind uint8

const (
	// splitAll: the static planned share P; every child, uncapped.
	splitAll splitKind = iota
	// splitPdyn: leaf enforcement's Pdyn; the children with demand,
	// uncapped.
	splitPdyn
	// splitFill: the water-fill of T under parent enforcement (and of G
	// inside a top-level branch under priority with parent enforcement):
	// the children with demand, capped by it.
	splitFill
	// splitResplit: leaf enforcement's re-split of a level whose bases
	// exceed what it has: the children with demand, capped by their base.
	splitResplit
	// splitSurplus: leaf enforcement's surplus U: the children with
	// residual need E - B, capped by it.
	splitSurplus
)

// terms is what a split reads of one child.
type terms struct {
	e Slots // effective demand E (E0 for T0 with balance: false)
	b Slots // leaf enforcement's base B
	s Slots // leaf enforcement's surplus start: B less what the child's floor added to it (B without pins)
	f Slots // floor F (0 unless the pool has pins)
	p Slots // static planned share P
}

// term is a child's item in a split of kind k: whether it takes part, and
// its floor, base and cap (the table of docs/rules.md#version-4).
func (k splitKind) term(c terms) (in bool, floor, base, cap Slots) {
	switch k {
	case splitAll:
		return true, 0, 0, Unlimited
	case splitPdyn:
		return c.e > 0, 0, 0, Unlimited
	case splitFill:
		return c.e > 0, c.f, maxSlots(c.f, minSlots(c.e, c.p)), c.e
	case splitResplit:
		return c.e > 0, c.f, c.b, c.b
	default: // splitSurplus: what a floor added to the base is surplus already given
		return c.e > c.s, c.b - c.s, c.b - c.s, c.e - c.s
	}
}

// banded reports whether priority bands order a split of kind k (the
// planned shares P and Pdyn are never banded).
func (k splitKind) banded() bool { return k >= splitFill }

// splitter splits quantities among siblings; it keeps scratch space so the
// hot path does not allocate. Callers build their items in items.
type splitter struct {
	ap    apportioner
	items []share
	sub   []share // one group or band of items, as apportioned
	at    []int   // the position in items of each entry of sub
	run   []share // the entries of sub not held at their floor
	runAt []int   // the position in sub of each entry of run
	held  []bool  // by position in sub: held at its floor
	perm  []int   // scratch: an order of sub
}

// split divides q among items (docs/rules.md#version-4): the
// positive shares first, then the zero shares, evenly, with what is left;
// inside each, with bands, the priorities highest first, each band taking
// what the later bands are not guaranteed. Every item gets at least its
// floor; the parts total min(q, sum of caps). Without a zero share, floor
// or band it is apportion(q, items).
func (sp *splitter) split(q Slots, items []share, bands bool) {
	if !needsGeneral(items, bands) {
		sp.ap.apportion(q, items)
		return
	}
	for i := range items {
		items[i].got = 0
	}
	var capS, floorZ Slots
	positive, zero := 0, 0
	for i := range items {
		if items[i].weight > 0 {
			capS = addCap(capS, items[i].cap)
			positive++
		} else {
			floorZ += items[i].floor
			zero++
		}
	}
	qS := maxSlots(minSlots(capS, q-floorZ), 0)
	if positive > 0 {
		sp.group(qS, items, bands, func(s *share) bool { return s.weight > 0 })
	}
	if zero > 0 {
		sp.group(q-qS, items, bands, func(s *share) bool { return s.weight == 0 })
	}
}

// needsGeneral reports whether a split is more than apportion: a zero
// share, a floor, or bands over more than one priority.
func needsGeneral(items []share, bands bool) bool {
	for i := range items {
		if items[i].weight == 0 || items[i].floor > 0 || (bands && items[i].priority != items[0].priority) {
			return true
		}
	}
	return false
}

// addCap adds caps, Unlimited absorbing.
func addCap(a, b Slots) Slots {
	if a == Unlimited || b == Unlimited || a > Unlimited-b {
		return Unlimited
	}
	return a + b
}

// group splits q among the items member accepts (one weight group of
// split): a zero share weighs 1. With bands and more than one priority
// among them, band by band, highest priority first.
func (sp *splitter) group(q Slots, items []share, bands bool, member func(*share) bool) {
	sub, at := sp.sub[:0], sp.at[:0]
	for i := range items {
		if member(&items[i]) {
			s := items[i]
			if s.weight == 0 {
				s.weight = 1
			}
			sub, at = append(sub, s), append(at, i)
		}
	}
	sp.sub, sp.at = sub, at
	if !bands || !severalPriorities(sub) {
		sp.apportionFloors(q, 0, len(sub), fillPlain)
	} else {
		sp.bands(q)
	}
	for j := range sp.sub {
		items[sp.at[j]].got = sp.sub[j].got
	}
}

func severalPriorities(sub []share) bool {
	for i := range sub {
		if sub[i].priority != sub[0].priority {
			return true
		}
	}
	return false
}

// bands splits q over sp.sub band by band ("Priority bands"):
// each band takes all but what the later bands are guaranteed (their
// bases), and in a shortfall its bases as far as the later bands' floors
// allow; a band within its bases splits them (floor f, cap b), a band
// beyond them splits the surplus (floor b, cap c).
func (sp *splitter) bands(q Slots) {
	slices.SortStableFunc(sp.order(), func(a, b int) int { return cmpDesc(sp.sub[a].priority, sp.sub[b].priority) })
	sp.permute()
	var laterB, laterF Slots
	for i := range sp.sub {
		laterB, laterF = laterB+sp.sub[i].base, laterF+sp.sub[i].floor
	}
	r := q
	for lo := 0; lo < len(sp.sub); {
		hi := lo + 1
		for hi < len(sp.sub) && sp.sub[hi].priority == sp.sub[lo].priority {
			hi++
		}
		var sb, sc, sf Slots
		for i := lo; i < hi; i++ {
			sb, sc, sf = sb+sp.sub[i].base, addCap(sc, sp.sub[i].cap), sf+sp.sub[i].floor
		}
		laterB, laterF = laterB-sb, laterF-sf
		qb := minSlots(sc, maxSlots(r-laterB, minSlots(sb, r-laterF)))
		mode := fillGuarantees
		if qb > sb {
			mode = fillSurplus
		}
		sp.apportionFloors(qb, lo, hi, mode)
		r -= qb
		lo = hi
	}
}

// order returns the identity permutation of sp.sub, to be sorted.
func (sp *splitter) order() []int {
	sp.perm = sp.perm[:0]
	for i := range sp.sub {
		sp.perm = append(sp.perm, i)
	}
	return sp.perm
}

// permute puts sp.sub and sp.at in the order of sp.perm.
func (sp *splitter) permute() {
	sub, at := slices.Clone(sp.sub), slices.Clone(sp.at)
	for i, j := range sp.perm {
		sp.sub[i], sp.at[i] = sub[j], at[j]
	}
}

// fillMode is which of an item's numbers bound it in apportionFloors.
type fillMode uint8

const (
	fillPlain      fillMode = iota // floor f, cap c: one water-fill
	fillGuarantees                 // floor f, cap b: a band within its bases
	fillSurplus                    // floor b, cap c: a band beyond its bases
)

// apportionFloors is apportion with floors ("Floors") over
// sp.sub[lo:hi]: the items a split leaves below their floor get their
// floor, and the others are split again, until none is below. It totals
// min(q, sum of caps).
func (sp *splitter) apportionFloors(q Slots, lo, hi int, mode fillMode) {
	sub := sp.sub[lo:hi]
	floorOf := func(s *share) Slots {
		if mode == fillSurplus {
			return s.base
		}
		return s.floor
	}
	held := sp.held[:0]
	for range sub {
		held = append(held, false)
	}
	sp.held = held
	for {
		run, runAt := sp.run[:0], sp.runAt[:0]
		left := q
		for i := range sub {
			if held[i] {
				left -= floorOf(&sub[i])
				continue
			}
			s := sub[i]
			if mode == fillGuarantees {
				s.cap = s.base
			}
			run, runAt = append(run, s), append(runAt, i)
		}
		sp.run, sp.runAt = run, runAt
		sp.ap.apportion(maxSlots(left, 0), run)
		below := false
		for k := range run {
			if run[k].got < floorOf(&sub[runAt[k]]) {
				held[runAt[k]], below = true, true
			}
		}
		if !below {
			for i := range sub {
				sub[i].got = floorOf(&sub[i])
			}
			for k := range run {
				sub[runAt[k]].got = run[k].got
			}
			return
		}
	}
}
