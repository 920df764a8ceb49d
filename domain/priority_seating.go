package domain

import (
	"cmp"
	"slices"
)

// Rules 4's seating under priority (rules-v4 ruling 12, docs/decisions.md #216,
// docs/rules.md#version-4): which pool the slots a leaf holds count in is
// decided inside the fold, pool by pool in the fold's order, with the
// pool's own bounds, so that the seating reproduces the division and an
// event that changes no input makes no decision. Version 3 seats every
// host apart before the fold, priority first (seating.go), which need not
// reproduce the division: identical events go on reclaiming.
//
// The seating starts from what each leaf holds per host. Each leaf first
// sits on its own part. Then each pool, deepest first and the public pool
// last, seats its tier (its classes: its own slots and the parts lent into
// it, in the pool's class order; on each host the part of the class's
// owner) in rounds, each holder taking what it still has to seat on the
// tier, up to the room left and its bound for the round:
//  1. up to G in the pool, in the entitled order;
//  2. up to min(E', G + borrow_limit), in the borrow order (E': what
//     earlier layers left unmet);
//  3. in the public pool only, the rest, host by host, in the keepers'
//     order.
//
// What a private pool's rounds leave of its slots goes up with the slots
// the pool lends, so a leaf of the branch sitting there beyond its bounds
// counts in the pool above, in the class of the slots lent from below
// (ruling 3). What no round seats counts nowhere: the division does not
// keep it, and the placement moves or releases it.

// roundSeating is one fold's seating by rounds: by part, the room not sat
// on yet; by leaf (node id), what it holds on each host not seated yet.
type roundSeating struct {
	t     *tree
	parts []hostPart
	first []int32 // by host id: firstPartOf the host (firstOn)
	room  []Slots
	rest  [][]holding
	left  []Slots // by leaf: the sum of its rest (a leaf with none has nothing to seat)
	held  int     // the leaves' holdings, counted (about as many seats are recorded)
	inX   []Slots // scratch of one pool, by node id: what a leaf sits on in it
	// sat: what each leaf sits on in each owner's part of each host (the
	// placement reads it: seatedOn).
	sat map[seatKey]Slots
	// classOf: scratch of one pool, the class of each part owner of its
	// tier; cands: of one leaf, the parts it may sit on in the tier.
	classOf map[int32]int
	cands   []tierSeat
	// swaps: under reclaim_for_preference false, the swaps of returns at
	// rest (swapAtRest); ownSat: by leaf, what it sits on in its own parts.
	swaps   bool
	swapped []swappedSeat
	ownSat  []Slots
	// byHost: by host id, the leaves with a holding there, in path order
	// (made on first use: holdersOn).
	byHost [][]int32
	// byOwner: by owner, the indexes of its parts (made on first use:
	// partsOwnedBy; the parts do not change during a fold).
	byOwner map[int32][]int
}

// partsOwnedBy lists the indexes of owner's parts, in the parts' order.
func (s *roundSeating) partsOwnedBy(owner int32) []int {
	if s.byOwner == nil {
		s.byOwner = map[int32][]int{}
		for k, p := range s.parts {
			s.byOwner[p.owner] = append(s.byOwner[p.owner], k)
		}
	}
	return s.byOwner[owner]
}

// swappedSeat is a borrower's slot on an owner's part that counts in the
// class of the owner's slot it was swapped with (class: that part's
// owner), seated in the first pool whose tier has the class.
type swappedSeat struct {
	leaf, class int32
	n           Slots
}

// tierSeat is a part k of a pool's tier a leaf may sit on, of class i, on
// the host of the leaf's holding j.
type tierSeat struct{ i, j, k int }

// newRoundSeating readies the seating of the holdings on parts, each leaf
// seated on its own part first.
func newRoundSeating(t *tree, parts []hostPart) *roundSeating {
	held := 0 // holdings of all leaves: one backing array for rest, and about as many seats
	for _, l := range t.sortedLeaves {
		held += len(t.nodes[l].holdings)
	}
	s := &roundSeating{t: t, parts: parts, held: held, room: make([]Slots, len(parts)), rest: make([][]holding, len(t.nodes)), inX: make([]Slots, len(t.nodes)),
		sat: make(map[seatKey]Slots, held), classOf: map[int32]int{}, ownSat: make([]Slots, len(t.nodes)), left: make([]Slots, len(t.nodes))}
	for i, pt := range parts {
		s.room[i] = pt.slots
	}
	if len(parts) > 0 {
		s.first = make([]int32, parts[len(parts)-1].host+1)
		for h := range s.first {
			s.first[h] = int32(firstPartOf(parts, int32(h)))
		}
	}
	backing := make([]holding, 0, held)
	for _, l := range t.sortedLeaves {
		at := len(backing)
		backing = append(backing, t.nodes[l].holdings...)
		s.rest[l] = backing[at:len(backing):len(backing)]
		for _, h := range s.rest[l] {
			s.left[l] += h.slots
		}
		for j := range s.rest[l] {
			h := &s.rest[l][j]
			if k := s.partOf(h.host, l); k >= 0 {
				n := minSlots(h.slots, s.room[k])
				s.sit(l, k, h, n)
				s.ownSat[l] += n
			}
		}
	}
	return s
}

// firstOn is firstPartOf(s.parts, h), looked up: the seating asks it for
// every holding of every leaf in every pool.
func (s *roundSeating) firstOn(h int32) int {
	if h >= 0 && int(h) < len(s.first) {
		return int(s.first[h])
	}
	return firstPartOf(s.parts, h)
}

// sit seats n of leaf l's slots of holding h on part k.
func (s *roundSeating) sit(l int32, k int, h *holding, n Slots) {
	if n <= 0 {
		return
	}
	h.slots -= n
	s.left[l] -= n
	s.room[k] -= n
	s.sat[seatKey{host: s.parts[k].host, owner: s.parts[k].owner, leaf: l}] += n
}

// seatRest seats what no pool's rounds seated, so that every slot sits
// somewhere: host by host, leaves in path order, on the parts each may
// hold first, then on any part with room, and then, as the keepers'
// seating does (seating.go repair), moves a leaf off a part it may not
// hold along an augmenting path when one exists. It counts in no pool.
func (s *roundSeating) seatRest() {
	var bad []int32 // hosts where a leaf sits on a part it may not hold
	for _, mayOnly := range []bool{true, false} {
		for _, l := range s.t.sortedLeaves {
			for j := range s.rest[l] {
				h := &s.rest[l][j]
				for k := s.firstOn(h.host); h.slots > 0 && k < len(s.parts) && s.parts[k].host == h.host; k++ {
					if may := s.t.mayUse(l, s.parts[k].owner); may || !mayOnly {
						if n := minSlots(h.slots, s.room[k]); n > 0 && !may {
							bad = append(bad, h.host)
						}
						s.sit(l, k, h, minSlots(h.slots, s.room[k]))
					}
				}
			}
		}
	}
	slices.Sort(bad)
	for _, h := range slices.Compact(bad) {
		s.repairHost(h)
	}
}

// repairHost moves leaves off the parts of host h they may not hold
// along augmenting paths (sitRepair), as the keepers' seating does.
func (s *roundSeating) repairHost(h int32) {
	i, j := s.firstOn(h), s.firstOn(h)
	for j < len(s.parts) && s.parts[j].host == h {
		j++
	}
	var holders []int32
	for _, l := range s.holdersOn(h) {
		if s.t.holdingOn(l, h) > 0 {
			holders = append(holders, l)
		}
	}
	amt := make([][]Slots, len(holders))
	for a, l := range holders {
		amt[a] = make([]Slots, j-i)
		for k := i; k < j; k++ {
			amt[a][k-i] = s.sat[seatKey{host: h, owner: s.parts[k].owner, leaf: l}]
		}
	}
	r := sitRepair{amt: amt, left: s.room[i:j], may: func(a, k int) bool { return s.t.mayUse(holders[a], s.parts[i+k].owner) }}
	for a := range holders {
		for k := range j - i {
			for amt[a][k] > 0 && !r.may(a, k) && r.move(a, k) {
			}
		}
	}
	for a, l := range holders {
		for k := i; k < j; k++ {
			key := seatKey{host: h, owner: s.parts[k].owner, leaf: l}
			if amt[a][k-i] == 0 {
				delete(s.sat, key)
			} else {
				s.sat[key] = amt[a][k-i]
			}
		}
	}
}

// seatedOn is what leaf sits on in owner's part of host h.
func (s *roundSeating) seatedOn(h, owner, leaf int32) Slots {
	return s.sat[seatKey{host: h, owner: owner, leaf: leaf}]
}

// swapAtRest (rules 4, ruling 9 at rest; docs/decisions.md #219): with
// reclaim_for_preference false, an owner whose own layer uses more of its
// own slots (ownUse, by node id) than it sits on, while borrowers sit on
// its own parts, was given a borrower's slot instead of its own back: each
// of its slots elsewhere (on a part it may hold, not seated yet) counts as
// its own use, and a borrower's slot on its part counts in the class of
// the owner's slot. Owners in path order, their parts in part order,
// borrowers in path order, the owner's slots in host order.
func (s *roundSeating) swapAtRest(ownUse []Slots) {
	for _, o := range s.t.sortedLeaves {
		if s.ownSat[o] >= ownUse[o] {
			continue
		}
		for k := range s.parts {
			if s.parts[k].owner != o {
				continue
			}
			h2 := s.parts[k].host
			for _, b := range s.holdersOn(h2) { // a leaf without a holding there has nothing to swap
				if b == o || !s.t.mayUse(b, o) {
					continue
				}
				jb := slices.IndexFunc(s.rest[b], func(x holding) bool { return x.host == h2 })
				for jb >= 0 && s.rest[b][jb].slots > 0 && s.room[k] > 0 && s.ownSat[o] < ownUse[o] && s.swapOne(o, b, k, jb) {
				}
			}
		}
	}
}

// holdersOn lists the leaves with a holding on host h, in path order
// (rest keeps an entry for every holding): the seating walks a host's
// holders, not every leaf, for each host it seats or repairs.
func (s *roundSeating) holdersOn(h int32) []int32 {
	if s.byHost == nil {
		n := int32(0)
		for _, l := range s.t.sortedLeaves {
			for _, x := range s.rest[l] {
				n = max(n, x.host+1)
			}
		}
		s.byHost = make([][]int32, n)
		for _, l := range s.t.sortedLeaves {
			for _, x := range s.rest[l] {
				s.byHost[x.host] = append(s.byHost[x.host], l)
			}
		}
	}
	if h < 0 || int(h) >= len(s.byHost) {
		return nil
	}
	return s.byHost[h]
}

// swapOne seats one of borrower b's slots (its holding jb) on owner o's
// part k against one of o's slots elsewhere; false when o has none.
func (s *roundSeating) swapOne(o, b int32, k, jb int) bool {
	for j := range s.rest[o] {
		h := &s.rest[o][j]
		if h.slots == 0 {
			continue
		}
		for p := s.firstOn(h.host); p < len(s.parts) && s.parts[p].host == h.host; p++ {
			class := s.parts[p].owner
			if class == o || s.room[p] <= 0 || !s.t.mayUse(o, class) || !s.t.mayUse(b, class) {
				continue
			}
			s.sit(o, p, h, 1)
			s.ownSat[o]++
			s.sit(b, k, &s.rest[b][jb], 1)
			s.swapped = append(s.swapped, swappedSeat{leaf: b, class: class, n: 1})
			return true
		}
	}
	return false
}

// seatSwapped counts in pool x the swapped slots of its leaves whose class
// its tier has.
func (s *roundSeating) seatSwapped(f *layeredFold, x int32, pc *poolClasses) {
	for i := range s.swapped {
		w := &s.swapped[i]
		if w.n == 0 || !s.t.contains(x, w.leaf) {
			continue
		}
		if ci, ok := s.classOf[w.class]; ok && pc.mayUse(s.t, w.leaf, ci) {
			s.inX[w.leaf] += w.n
			f.addHeld(heldKey{pool: x, leaf: w.leaf, lender: pc.classes[ci].lender}, w.n)
			w.n = 0
		}
	}
}

// partOf is the index of owner's part on host h (-1: none).
func (s *roundSeating) partOf(h, owner int32) int {
	for k := s.firstOn(h); k < len(s.parts) && s.parts[k].host == h; k++ {
		if s.parts[k].owner == owner {
			return k
		}
	}
	return -1
}

// classOwner is whose parts pool x's class of lender are: the lender's,
// or the pool's own private parts (the public parts for the root).
func classOwner(x, lender int32) int32 {
	if lender == noNode && x != 0 {
		return x
	}
	return lender
}

// seatPool seats pool x's tier (ruling 12's rounds) and records what each
// leaf sits on in it, by class, as f's held; d must hold the division's
// guarantees G and f.eff the leaves' E'.
func (s *roundSeating) seatPool(f *layeredFold, x int32, pc *poolClasses, d *heldDivision) {
	xn := &s.t.nodes[x]
	members := s.t.leaves[xn.lo:xn.hi]
	clear(s.classOf)
	for i, c := range pc.classes {
		if _, ok := s.classOf[classOwner(x, c.lender)]; !ok {
			s.classOf[classOwner(x, c.lender)] = i
		}
	}
	for _, l := range members {
		s.inX[l] = 0
	}
	if s.swaps {
		s.seatSwapped(f, x, pc)
	}
	for _, l := range f.orders().entitledIn(s.t, x) {
		s.seatLeaf(f, x, pc, l, -1, d.g[l])
	}
	for _, l := range f.orders().borrowIn(s.t, x) {
		s.seatLeaf(f, x, pc, l, -1, minSlots(f.eff[l], borrowCeiling(&s.t.nodes[l], d.g[l])))
	}
	if x != 0 {
		return
	}
	for _, h := range s.hostsOf(members) { // members: every leaf
		holders := slices.DeleteFunc(slices.Clone(s.holdersOn(h)), func(l int32) bool { return s.restOn(l, h) == 0 })
		slices.SortStableFunc(holders, func(a, b int32) int {
			return s.t.keeperOrder(a, s.t.holdingOn(a, h), b, s.t.holdingOn(b, h))
		})
		for _, l := range holders {
			s.seatLeaf(f, x, pc, l, h, Unlimited)
		}
	}
	s.seatRest()
}

// seatLeaf seats what leaf l still holds (on host only, when it is not
// -1) on pool x's classes it may use, in the pool's class order, up to
// bound slots in the pool.
func (s *roundSeating) seatLeaf(f *layeredFold, x int32, pc *poolClasses, l, host int32, bound Slots) {
	if s.inX[l] >= bound || s.left[l] == 0 {
		return
	}
	// The parts of the tier on the hosts where l has slots to seat, in the
	// pool's class order, then l's hosts in order.
	s.cands = s.cands[:0]
	for j, h := range s.rest[l] {
		if h.slots == 0 || (host >= 0 && h.host != host) {
			continue
		}
		for k := s.firstOn(h.host); k < len(s.parts) && s.parts[k].host == h.host; k++ {
			if i, ok := s.classOf[s.parts[k].owner]; ok && pc.mayUse(s.t, l, i) {
				s.cands = append(s.cands, tierSeat{i: i, j: j, k: k})
			}
		}
	}
	slices.SortFunc(s.cands, func(a, b tierSeat) int { return cmp.Or(cmp.Compare(a.i, b.i), cmp.Compare(a.j, b.j)) })
	for _, c := range s.cands {
		h := &s.rest[l][c.j]
		n := minSlots(minSlots(bound-s.inX[l], h.slots), s.room[c.k])
		if n <= 0 {
			continue
		}
		s.sit(l, c.k, h, n)
		s.inX[l] += n
		f.addHeld(heldKey{pool: x, leaf: l, lender: pc.classes[c.i].lender}, n)
		if s.inX[l] >= bound {
			return
		}
	}
}

// restOn is what leaf l holds on host h not seated yet.
func (s *roundSeating) restOn(l, h int32) Slots {
	for _, x := range s.rest[l] {
		if x.host == h {
			return x.slots
		}
	}
	return 0
}

// hostsOf lists the hosts where the leaves still have slots to seat, in
// host order.
func (s *roundSeating) hostsOf(leaves []int32) []int32 {
	var hs []int32
	for _, l := range leaves {
		for _, x := range s.rest[l] {
			if x.slots > 0 {
				hs = append(hs, x.host)
			}
		}
	}
	slices.Sort(hs)
	return slices.Compact(hs)
}

// addHeld records that leaf sits on k more slots of lender's class in the
// pool.
func (f *layeredFold) addHeld(hk heldKey, k Slots) {
	if _, ok := f.held[hk]; !ok {
		pl := poolLeaf{hk.pool, hk.leaf}
		f.heldBy[pl] = append(f.heldBy[pl], hk.lender)
	}
	f.held[hk] += k
}
