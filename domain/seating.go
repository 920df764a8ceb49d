package domain

// Seating (docs/rules.md#seating): which part of a host each slot a
// leaf holds there sits in, derived host by host from how many slots each
// leaf holds, and the pool each sitting counts in. The fold reads it at
// every rebalance of a pool with ownership (ownership_fold.go), the
// views after it; seating_cache.go keeps it per host.

import (
	"slices"
)

// sitting is a number of slots a leaf holds in one part of a host.
type sitting struct {
	leaf  int32
	part  int // index into the parts
	slots Slots
}

// sitHost divides the holdings on one host over its parts parts[i:j]
// (docs/decisions.md #98, #105): a leaf's own part first, then the parts
// of the private pools it is in (deepest first: an ancestor's private
// part, and the parts lent into that pool by others under the same
// ancestor), then the public part, then whatever is left of other owners'
// parts (slots lent to it); a part's owner first, then leaves in the
// reverse of the return order. held is in path order; parts must be in
// host order, as partsOf lists them. The steps:
// a greedy pass in the order of sittings, then a repair that moves a
// leaf off a part it may not borrow along an augmenting path (another
// leaf moves over to make room), so nobody sits where it may not while
// some reading of the counts allows it.
func (p *Pool) sitHost(out []sitting, parts []hostPart, i, j int, held []holding) []sitting {
	if out, ok := sitPublicHost(out, parts, i, j, held); ok {
		return out
	}
	s := p.sits.seating(p, parts[i:j], held)
	s.ownParts()
	s.privatePools()
	if s.restrictiveFirst {
		s.restrictiveParts()
	}
	s.publicParts()
	s.lentParts()
	s.repair()
	for hk, h := range held {
		for k := range s.n {
			if a := s.amt[hk][k]; a > 0 {
				out = append(out, sitting{leaf: h.host, part: i + k, slots: a})
			}
		}
	}
	return out
}

// seating is one host's sittings being worked out (sitHost): by part of
// the host, what is not sat on (left) and its place in the tiers
// (order); by holder, what it has not seated (rest), its place in the
// keepers' order, and by part what it sits on (amt), the pool it would
// use the part in (pool) and whether it may hold it at all (may). Its
// tables are scratch the pool keeps between hosts.
type seating struct {
	p              *Pool
	parts          []hostPart
	held           []holding
	n              int
	left, rest     []Slots
	amt            [][]Slots
	order, keepers []int
	pool           [][]int32
	may            [][]bool
	tiers          [][]seat
	// restrictiveFirst: rules 4's order (behaviour.restrictiveFirst),
	// but under priority with preemption, where the division seats by
	// rounds and this seating pairs returns (ruling 11): ruling 8's
	// passes as written (docs/decisions.md #383).
	restrictiveFirst bool

	amtFlat  []Slots
	poolFlat []int32
	mayFlat  []bool
}

// seat is a holder (hk) that sits on a part (k) of the host in one pass.
type seat struct{ k, hk int }

// seating readies the scratch for one host's parts and holders.
func (c *sitCache) seating(p *Pool, parts []hostPart, held []holding) *seating {
	s := &c.scratch
	s.p, s.parts, s.held, s.n = p, parts, held, len(parts)
	s.restrictiveFirst = p.mode.behaviour.restrictiveFirst && (p.mode.shareRatio || !p.mode.preempt)
	n, m := len(parts), len(held)
	s.left, s.order = s.left[:0], s.order[:0]
	for k, pt := range parts {
		s.left = append(s.left, pt.slots)
		s.order = append(s.order, k)
	}
	s.amtFlat = slices.Grow(s.amtFlat[:0], m*n)[:m*n]
	clear(s.amtFlat)
	s.poolFlat, s.mayFlat = slices.Grow(s.poolFlat[:0], m*n)[:m*n], slices.Grow(s.mayFlat[:0], m*n)[:m*n]
	s.rest, s.keepers, s.amt, s.pool, s.may = s.rest[:0], s.keepers[:0], s.amt[:0], s.pool[:0], s.may[:0]
	for hk, h := range held {
		s.rest = append(s.rest, h.slots)
		s.keepers = append(s.keepers, hk)
		s.amt = append(s.amt, s.amtFlat[hk*n:(hk+1)*n:(hk+1)*n])
		s.pool = append(s.pool, s.poolFlat[hk*n:(hk+1)*n:(hk+1)*n])
		s.may = append(s.may, s.mayFlat[hk*n:(hk+1)*n:(hk+1)*n])
		for k, pt := range parts {
			s.pool[hk][k], s.may[hk][k] = p.t.partUse(h.host, pt.owner)
		}
	}
	// Parts: leaf owners, private deepest first, public. Holders in the
	// reverse of the return order (docs/rules.md#ownership-placement;
	// priority desc, fewest slots on the host, path descending) sit on the
	// parts they belong to first; the overflow onto other owners' parts,
	// which the owners take back, is then that of the leaves that give back
	// first.
	slices.SortFunc(s.order, func(a, b int) int { return partOrder(p.t, parts[a], parts[b]) })
	slices.SortStableFunc(s.keepers, func(a, b int) int {
		la, lb := held[a].host, held[b].host
		return p.t.keeperOrder(la, held[a].slots, lb, held[b].slots)
	})
	return s
}

// sit seats what holder hk can of the rest on part k.
func (s *seating) sit(k, hk int) {
	if m := minSlots(s.rest[hk], s.left[k]); m > 0 {
		s.rest[hk] -= m
		s.left[k] -= m
		s.amt[hk][k] += m
	}
}

// ownParts: a leaf's own part first.
func (s *seating) ownParts() {
	for _, k := range s.order {
		for _, hk := range s.keepers {
			if s.held[hk].host == s.parts[k].owner {
				s.sit(k, hk)
			}
		}
	}
}

// privatePools: the private pools, deepest first, a pool's own private
// part before the parts lent into it (a pool's own slots are used
// first); within a tier parts in order, holders in keepers' order, each
// pair put in its tier's bucket in that order.
func (s *seating) privatePools() {
	t := s.p.t
	// Per pool, deepest first: its own private part, then the parts lent
	// into it; under rules 4 the parts lent in a restrictive class first
	// (tree.restrictiveFor).
	width := 2
	if s.restrictiveFirst {
		width = 3
	}
	want := width * int(t.maxDepth+1)
	for len(s.tiers) < want {
		s.tiers = append(s.tiers, nil)
	}
	tiers := s.tiers[:want]
	for i := range tiers {
		tiers[i] = tiers[i][:0]
	}
	for _, k := range s.order {
		o := s.parts[k].owner
		for _, hk := range s.keepers {
			if x := s.pool[hk][k]; x != noNode {
				tier := width * int(t.maxDepth-t.nodes[x].depth)
				switch {
				case x != o && s.restrictiveFirst && t.restrictiveFor(s.held[hk].host, o):
				case x != o && s.restrictiveFirst:
					continue // rules 4: after the public part (lentParts; docs/decisions.md #332)
				case x != o:
					tier += width - 1
				case s.restrictiveFirst:
					tier++
				}
				tiers[tier] = append(tiers[tier], seat{k, hk})
			}
		}
	}
	for _, bucket := range tiers {
		for _, st := range bucket {
			s.sit(st.k, st.hk)
		}
	}
}

// restrictiveParts: under rules 4, before the public part, the parts lent
// across the root in a class some leaf may not use.
func (s *seating) restrictiveParts() {
	for _, k := range s.order {
		o := s.parts[k].owner
		for _, hk := range s.keepers {
			if s.may[hk][k] && s.pool[hk][k] == noNode && s.p.t.restrictiveFor(s.held[hk].host, o) {
				s.sit(k, hk)
			}
		}
	}
}

// publicParts: then the public part.
func (s *seating) publicParts() {
	for _, k := range s.order {
		if s.parts[k].owner == noNode {
			for _, hk := range s.keepers {
				s.sit(k, hk)
			}
		}
	}
}

// lentParts: the rest, on other owners' parts, those a leaf may borrow
// first.
func (s *seating) lentParts() {
	for _, eligibleOnly := range []bool{true, false} {
		for k := range s.n {
			for _, hk := range s.keepers {
				if !eligibleOnly || s.may[hk][k] {
					s.sit(k, hk)
				}
			}
		}
	}
}

// repair moves a leaf off a part it may not borrow along an augmenting
// path (another leaf moves over to make room), so nobody sits where it
// may not while some reading of the counts allows it.
func (s *seating) repair() {
	may := func(hk, k int) bool { return s.may[hk][k] }
	r := sitRepair{amt: s.amt, left: s.left, may: may}
	for hk := range s.held {
		for k := range s.n {
			for s.amt[hk][k] > 0 && !may(hk, k) && r.move(hk, k) {
			}
		}
	}
}

// sitPublicHost is sitHost for a host that is one public part with room
// for all its holders: every leaf may use it, so each sits there whole,
// which is what the passes of sitHost come to.
func sitPublicHost(out []sitting, parts []hostPart, i, j int, held []holding) ([]sitting, bool) {
	if j-i != 1 || parts[i].owner != noNode {
		return out, false
	}
	total := Slots(0)
	for _, h := range held {
		total += h.slots
	}
	if total > parts[i].slots {
		return out, false
	}
	for _, h := range held {
		if h.slots > 0 {
			out = append(out, sitting{leaf: h.host, part: i, slots: h.slots})
		}
	}
	return out, true
}

// sitRepair moves single slots between the parts of one host.
type sitRepair struct {
	amt     [][]Slots // by holder, by part
	left    []Slots   // by part: not sat on
	may     func(hk, k int) bool
	visited []bool
}

// move takes one slot of holder hk off part from onto a part it may use,
// making room there by moving another holder on (an augmenting path);
// false when no path exists.
func (r *sitRepair) move(hk, from int) bool {
	r.amt[hk][from]-- // its slot leaves first: another holder may take its place
	r.left[from]++
	r.visited = make([]bool, len(r.left))
	if r.place(hk) { // never back onto from: it may not use it
		return true
	}
	r.amt[hk][from]++
	r.left[from]--
	return false
}

// place puts one more slot of holder hk on a part it may use, not yet
// visited on this path: a free one, or one another holder can leave.
func (r *sitRepair) place(hk int) bool {
	for k := range r.left {
		if !r.visited[k] && r.may(hk, k) && r.left[k] > 0 {
			r.amt[hk][k]++
			r.left[k]--
			return true
		}
	}
	for k := range r.left {
		if r.visited[k] || !r.may(hk, k) {
			continue
		}
		r.visited[k] = true
		for other := range r.amt {
			if other != hk && r.amt[other][k] > 0 && r.may(other, k) && r.place(other) {
				r.amt[other][k]--
				r.amt[hk][k]++
				return true
			}
		}
	}
	return false
}

// mayUse reports whether leaf may hold slots of owner's part: its own,
// an ancestor's private slots and public slots always; slots another
// consumer owns only if they are lent up to a common ancestor (every
// owner on the way lends) and the leaf's reclaim_grace is at most every
// one of their lend_grace.
func (p *Pool) mayUse(leaf, owner int32) bool { return p.t.mayUse(leaf, owner) }

func (t *tree) mayUse(leaf, owner int32) bool {
	_, may := t.partUse(leaf, owner)
	return may
}

// poolOfPart is the private pool (a parent) in which leaf uses the slots
// of owner's part: owner's own pool when leaf is under owner, else the
// pool of the parent both are under when owner lends into it and leaf may
// borrow there; noNode when neither (the public pool, or slots lent to
// leaf across the root, or the leaf's own part).
func (p *Pool) poolOfPart(leaf, owner int32) int32 {
	pool, _ := p.t.partUse(leaf, owner)
	return pool
}

// partUse is poolOfPart and mayUse in one walk of the tree (the seating
// asks both of every holder and part of a host).
func (t *tree) partUse(leaf, owner int32) (pool int32, may bool) {
	switch {
	case owner == noNode || owner == leaf:
		return noNode, true
	case t.contains(owner, leaf):
		return owner, true
	}
	top := t.commonAncestor(owner, leaf)
	g := t.nodes[leaf].reclaimGrace
	for o := owner; o != top; o = t.nodes[o].parent {
		if n := &t.nodes[o]; !n.lend || g > n.lendGrace {
			return noNode, false
		}
	}
	if top == 0 {
		return noNode, true
	}
	return top, true
}

// heldByPool attributes every leaf's slots to the pool they are used in:
// slots of a private part of an ancestor X are pool(X)'s own, public
// slots the public pool's (0), and slots another consumer L owns were lent
// into the pool of the deepest common ancestor of L and the leaf.
func (p *Pool) heldByPool(parts []hostPart) heldSlots {
	sits := p.sittings(parts)
	held := heldSlots{amount: make(map[heldKey]Slots, len(sits))}
	add := func(k heldKey, n Slots) {
		if _, seen := held.amount[k]; !seen {
			held.keys = append(held.keys, k)
		}
		held.amount[k] += n
	}
	for _, s := range sits {
		if k, ok := sittingKey(p.t, parts, s); ok {
			add(k, s.slots)
		}
	}
	return held
}

// ineligibleSittings lists, by host, what leaves sit on in parts they may
// not hold (after the seating's repair re-seated what it could on the
// same host): what a plan or host event made ineligible (docs/rules.md
// #version-4, ruling 10).
func (p *Pool) ineligibleSittings() [][]ineligibleSlots {
	parts, _ := p.hostParts()
	out := make([][]ineligibleSlots, len(p.hosts))
	for _, s := range p.sittings(parts) {
		if owner := parts[s.part].owner; !p.mayUse(s.leaf, owner) {
			h := parts[s.part].host
			out[h] = append(out[h], ineligibleSlots{leaf: s.leaf, owner: owner, slots: s.slots})
		}
	}
	return out
}

// seatedOn is what leaf sits on in owner's part of host h now (rules 4's
// returns pair with it: ruling 11); 0 when the host is down or has no
// such part.
func (p *Pool) seatedOn(h, owner, leaf int32) Slots {
	parts, _ := p.hostParts()
	p.sitsFor(parts)
	n := Slots(0)
	for _, s := range p.sittingsOn(parts, h) {
		if s.leaf == leaf && parts[s.part].owner == owner {
			n += s.slots
		}
	}
	return n
}
