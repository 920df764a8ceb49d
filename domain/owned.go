package domain

import (
	"cmp"
	"slices"
)

// The layered fold (docs/rules.md#layered-fold) for a pool whose plan
// names ownership under a rules version that implements it (rules v3).
// An event then folds as: input; slots on down hosts lost; on plan and
// host events the ownership re-assigned (ownership.go, own
// decisions); excess released, the slots lent by others first and the
// leaf's own last; the layered targets computed (layered.go) and the
// slots placed on them (ownplace.go), which makes the grant, lend,
// reclaim, return and release decisions of the rebalance.

// reassignOwnership re-runs the assignment on plan and host events, when
// the plan names ownership or an assignment is left from a plan that did.
func (p *Pool) reassignOwnership() {
	if !p.allTouch || (!p.mode.owned && len(p.own) == 0) {
		return
	}
	in := ownInput{previous: p.own}
	if p.mode.owned {
		for _, c := range p.plan.Consumers {
			in.consumers = append(in.consumers, ownConsumer{path: c.Path, priority: c.Priority, own: c.Own})
		}
	}
	for i := range p.hosts {
		if h := &p.hosts[i]; h.up {
			in.hosts = append(in.hosts, ownHost{name: h.name, group: h.group, slots: h.slots, workload: h.used})
		}
	}
	res := assignOwnership(in)
	for _, d := range res.decisions {
		d.Seq, d.Ordinal = p.seq, len(p.decisions)
		p.decisions = append(p.decisions, d)
	}
	p.assigned = assignmentChanges(p.assigned, p.own, res.assignment)
	p.own = res.assignment
	p.partsFresh = false
}

// assignmentChanges appends to out the rows of the assignment that differ
// between before and after (both by consumer, then host), with their
// slots after (0: no longer owned).
func assignmentChanges(out []OwnedSlots, before, after []ownSlot) []OwnedSlots {
	less := func(a, b ownSlot) bool {
		return a.consumer < b.consumer || (a.consumer == b.consumer && a.host < b.host)
	}
	i, j := 0, 0
	for i < len(before) || j < len(after) {
		switch {
		case j == len(after) || (i < len(before) && less(before[i], after[j])):
			out = append(out, OwnedSlots{Consumer: before[i].consumer, Host: before[i].host})
			i++
		case i == len(before) || less(after[j], before[i]):
			out = append(out, OwnedSlots{Consumer: after[j].consumer, Host: after[j].host, Slots: int64(after[j].slots)})
			j++
		default:
			if before[i].slots != after[j].slots {
				out = append(out, OwnedSlots{Consumer: after[j].consumer, Host: after[j].host, Slots: int64(after[j].slots)})
			}
			i++
			j++
		}
	}
	return out
}

// hostParts divides the up hosts into parts by the current assignment,
// computed once per event (or after the assignment changed).
func (p *Pool) hostParts() ([]hostPart, ownTotals) {
	if !p.partsFresh {
		p.parts, p.partTot = partsOf(p.t, p.hosts, p.own)
		p.partsFresh = true
		p.partsGen++
	}
	return p.parts, p.partTot
}

// updateLayeredTargets computes every leaf's layered target and keeps it
// as the leaf's target (the T reported and hashed), touching the leaves
// whose target moved.
func (p *Pool) updateLayeredTargets() {
	parts, tot := p.hostParts()
	if p.incFoldable() {
		built := p.inc.fold(p, parts, tot)
		if p.foldCheck != nil || built {
			p.layered = p.inc.output(p.t)
		}
		if p.foldCheck != nil {
			p.foldCheck(p)
		}
		if !built {
			p.keptTargets()
			return
		}
		p.inc.targetMoved.take()
		p.takeTargets(p.layered.target)
		return
	}
	p.inc.ready = false
	p.layered = p.fullLayered()
	p.takeTargets(p.layered.target)
	if p.mode.shareRatio && p.mode.preempt && p.mode.balance {
		p.layered.transfers = p.shareRatioPairing(p.t.sortedLeaves)
	}
}

// fullLayered is the layered fold computed from scratch.
func (p *Pool) fullLayered() layeredTargets {
	parts, tot := p.hostParts()
	return computeLayeredTargets(p.t, layeredInput{parentEnf: p.mode.parent, own: tot, lend: func(id int32) bool { return p.t.nodes[id].lend },
		policy: divisionPolicy{shareRatio: p.mode.shareRatio, preempt: p.mode.preempt, balance: p.mode.balance}, held: p.heldByPool(parts)})
}

// takeTargets sets every node's target, touching those that moved.
func (p *Pool) takeTargets(target []Slots) {
	for id := range p.t.nodes {
		if s := p.sh(int32(id)); s.target != target[id] {
			s.target = target[id]
			if id > 0 {
				p.touch(int32(id))
			}
		}
	}
}

// keptTargets takes the kept fold's targets: only the leaves whose target
// may have moved are looked at, and their ancestors moved by as much.
func (p *Pool) keptTargets() {
	for _, l := range p.inc.targetMoved.take() {
		s := p.sh(l)
		delta := p.inc.target(p.t, l) - s.target
		if delta == 0 {
			continue
		}
		for a := l; a > 0; a = p.t.nodes[a].parent { // the root's stays 0, as sumTargets leaves it
			p.sh(a).target += delta
		}
		p.touch(l)
	}
}

// shareRatioPairing is the share_ratio pairing (docs/rules.md#share-ratio) on
// the leaves' totals, for the decision log (decisions.md #111): claimants
// below their layered target, largest deficit per unit of share first, take
// free slots first, then from the leaves above their target in the victim
// walk's order. It only names who gives to whom: the placement pairs a
// claimant's gains with these victims first. leaves (path order) must hold
// every leaf off its target.
func (p *Pool) shareRatioPairing(leaves []int32) []transfer {
	var claimants, victims []int32
	for _, l := range leaves {
		switch a, tg := p.t.nodes[l].alloc, p.sh(l).target; {
		case a < tg:
			claimants = append(claimants, l)
		case a > tg:
			victims = append(victims, l)
		}
	}
	if len(claimants) == 0 || len(victims) == 0 {
		return nil
	}
	slices.SortFunc(claimants, p.claimantOrder)
	p.sortVictimWalk(victims)
	// Every leaf ends on its target, so what the claimants take from free
	// slots is what they gain beyond what the victims give up (not every
	// free slot may be used: lend: false, grace classes).
	excess := make([]Slots, len(victims))
	free := Slots(0)
	for i, v := range victims {
		excess[i] = p.t.nodes[v].alloc - p.sh(v).target
		free -= excess[i]
	}
	for _, c := range claimants {
		free += p.sh(c).target - p.t.nodes[c].alloc
	}
	free = maxSlots(free, 0)
	var out []transfer
	for _, c := range claimants {
		need := p.sh(c).target - p.t.nodes[c].alloc
		k := minSlots(need, free)
		free -= k
		need -= k
		for i := 0; i < len(victims) && need > 0; i++ {
			if give := minSlots(need, excess[i]); give > 0 {
				excess[i] -= give
				need -= give
				out = append(out, transfer{claimant: c, victim: victims[i], slots: give})
			}
		}
	}
	return out
}

// rebalanceOwned places every leaf on its layered target.
func (p *Pool) rebalanceOwned() {
	var moves []placeMove
	if p.inc.ready {
		moves = p.placeKept()
		if p.placeCheck != nil {
			p.placeCheck(p, moves)
		}
	} else {
		p.pk.ready = false
		moves = p.placeAll()
	}
	for _, m := range moves {
		switch m.kind {
		case KindReclaim, KindReturn:
			p.addAlloc(m.from, m.host, -m.slots)
			p.addAlloc(m.leaf, m.host, m.slots)
		case KindRelease:
			p.addAlloc(m.leaf, m.host, -m.slots)
		default: // grant, lend
			p.addAlloc(m.leaf, m.host, m.slots)
		}
		d := Decision{Seq: p.seq, Ordinal: len(p.decisions), Kind: m.kind, Consumer: p.t.nodes[m.leaf].path,
			Host: p.hosts[m.host].name, Slots: int64(m.slots), Rule: m.rule, Deadline: m.deadline(p.t, p.now)}
		if m.from != noNode {
			d.From = p.t.nodes[m.from].path
		}
		p.decisions = append(p.decisions, d)
	}
}

// holders lists, by host, the leaves holding slots there, in path order.
func (p *Pool) holders() [][]leafSlots {
	out := make([][]leafSlots, len(p.hosts))
	for _, l := range p.t.sortedLeaves {
		for _, h := range p.t.nodes[l].holdings {
			out[h.host] = append(out[h.host], leafSlots{leaf: l, slots: h.slots})
		}
	}
	return out
}

// placeRules are the pool's policy's choices for the placement.
func (p *Pool) placeRules() placeRules {
	r := placeRules{grant: RuleShareRatioGrant, borrow: RuleShareRatioGrant, reclaim: RuleShareRatioReclaim,
		preferring: p.plan.Policy.ReclaimForPreferenceOrDefault(), preference: p.preference}
	if !p.mode.shareRatio {
		r.grant, r.borrow, r.reclaim, r.phased = RulePriorityEntitled, RulePriorityBorrow, RulePriorityReclaim, true
	}
	return r
}

// preference is how much owner prefers its slots on host: the highest
// preference of its own entries that name the host or the host's group
// (0 when none does: slots it only has through a child's entry).
func (p *Pool) preference(owner, host int32) int64 {
	h := &p.hosts[host]
	best := int64(0)
	for _, e := range p.t.nodes[owner].own {
		if e.Host == h.name || (e.Host == "" && e.Group == h.group) {
			best = max(best, int64(e.PreferenceOrDefault()))
		}
	}
	return best
}

// releaseHost is where a leaf gives slots back first, and how many of
// its slots there are in that tier. With ownership
// (docs/rules.md#ownership-placement), by the part of a host each slot
// sits in: slots lent by others first, then public, then private pools
// (farthest ancestor first), its own last; within a tier the host
// holding most of its slots, then name. Without, the host holding most,
// then name.
func (p *Pool) releaseHost(id int32) (int32, Slots) {
	if !p.mode.owned {
		h := p.mostHeldHost(id)
		return h, p.held(id, h)
	}
	parts, _ := p.hostParts()
	p.sitsFor(parts)
	best, bestTier, bestN := holding{host: -1}, int64(0), Slots(0)
	for _, h := range p.t.nodes[id].holdings {
		tier, n := int64(0), h.slots // a host without parts: lent by nobody, given back first
		if sits := p.sittingsOn(parts, h.host); sits != nil {
			if t, k := p.lowestReleaseTier(id, parts, sits); k > 0 {
				tier, n = t, k
			}
		}
		if best.host < 0 || cmp.Or(cmp.Compare(tier, bestTier), cmpDesc(h.slots, best.slots),
			cmp.Compare(p.hosts[h.host].name, p.hosts[best.host].name)) < 0 {
			best, bestTier, bestN = h, tier, n
		}
	}
	return best.host, bestN
}

// lowestReleaseTier is the first tier leaf id gives back from among its
// sittings on one host, and how many of its slots are in it.
func (p *Pool) lowestReleaseTier(id int32, parts []hostPart, sits []sitting) (int64, Slots) {
	tier, n := int64(-1), Slots(0)
	for _, s := range sits {
		if s.leaf != id {
			continue
		}
		switch t := p.releaseTier(id, parts[s.part].owner); {
		case tier < 0 || t < tier:
			tier, n = t, s.slots
		case t == tier:
			n += s.slots
		}
	}
	return tier, n
}

// releaseTier ranks the part owner's slots for leaf id's release
// (smaller first): lent by others, public, private pools (farthest
// ancestor first), its own.
func (p *Pool) releaseTier(id, owner int32) int64 {
	switch {
	case owner == id:
		return 1 << 40
	case owner == noNode:
		return 1
	case p.t.contains(owner, id):
		return 2 + int64(p.t.nodes[owner].depth)
	}
	return 0
}

// firstPartOf returns the index of the first part on a host (parts are in
// host order).
func firstPartOf(parts []hostPart, hostID int32) int {
	i, _ := slices.BinarySearchFunc(parts, hostID, func(pt hostPart, h int32) int { return cmp.Compare(pt.host, h) })
	return i
}

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
			s.pool[hk][k], s.may[hk][k] = p.poolOfPart(h.host, pt.owner), p.mayUse(h.host, pt.owner)
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
	want := int(2*t.maxDepth + 2)
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
				tier := 2 * int(t.maxDepth-t.nodes[x].depth)
				if x != o {
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
func (p *Pool) mayUse(leaf, owner int32) bool {
	if owner == noNode || owner == leaf || p.t.contains(owner, leaf) {
		return true
	}
	top := p.t.commonAncestor(owner, leaf)
	g := p.t.nodes[leaf].reclaimGrace
	for o := owner; o != top; o = p.t.nodes[o].parent {
		if n := &p.t.nodes[o]; !n.lend || g > n.lendGrace {
			return false
		}
	}
	return true
}

// poolOfPart is the private pool (a parent) in which leaf uses the slots
// of owner's part: owner's own pool when leaf is under owner, else the
// pool of the parent both are under when owner lends into it and leaf may
// borrow there; noNode when neither (the public pool, or slots lent to
// leaf across the root, or the leaf's own part).
func (p *Pool) poolOfPart(leaf, owner int32) int32 {
	switch {
	case owner == noNode || owner == leaf:
		return noNode
	case p.t.contains(owner, leaf):
		return owner
	}
	if x := p.t.commonAncestor(owner, leaf); x != 0 && p.mayUse(leaf, owner) {
		return x
	}
	return noNode
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

// ownFigures is the ownership part of the consumer views, by node id.
type ownFigures struct {
	owned, used, lent []Slots
	sources           [][]Source
}

// ownFigures computes the views' ownership figures from where the slots
// sit; nil when the pool has no assignment.
func (p *Pool) ownFigures() *ownFigures {
	if !p.HasOwnership() {
		return nil
	}
	n := len(p.t.nodes)
	parts, tot := p.hostParts()
	of := &ownFigures{owned: tot.owned, used: make([]Slots, n), lent: make([]Slots, n), sources: make([][]Source, n)}
	for _, s := range p.sittings(parts) {
		o := parts[s.part].owner
		of.sources[s.leaf] = addSource(of.sources[s.leaf], p.sourceOf(parts, s))
		// The owner of the part and its ancestors that own the slots too
		// see them used inside their subtree or lent out.
		for a := o; a > 0; a = p.t.nodes[a].parent {
			if tot.owned[a] == 0 {
				break
			}
			if p.t.contains(a, s.leaf) {
				of.used[a] += s.slots
			} else {
				of.lent[a] += s.slots
			}
		}
	}
	return of
}

// ownView is one consumer's ownership figures.
type ownView struct {
	owned, used, lent Slots
	sources           []Source
}

// of is consumer id's figures (nil figures: nil).
func (of *ownFigures) of(id int32) *ownView {
	if of == nil {
		return nil
	}
	return &ownView{owned: of.owned[id], used: of.used[id], lent: of.lent[id], sources: of.sources[id]}
}

// ownFiguresOf is ownFigures for consumer id alone: its sources from the
// sittings of the hosts it holds slots on, what it owns used or lent out
// from the sittings of the hosts it owns slots on (its descendants own
// only slots it owns). nil when the pool has no assignment.
func (p *Pool) ownFiguresOf(id int32) *ownView {
	if !p.HasOwnership() {
		return nil
	}
	parts, tot := p.hostParts()
	p.sitsFor(parts)
	of := &ownView{owned: tot.owned[id]}
	for _, h := range p.t.nodes[id].holdings {
		for _, s := range p.sittingsOn(parts, h.host) {
			if s.leaf == id {
				of.sources = addSource(of.sources, p.sourceOf(parts, s))
			}
		}
	}
	if tot.owned[id] == 0 {
		return of
	}
	for _, i := range p.ownRowsOf(p.t.nodes[id].path) {
		h, ok := p.hostByID[p.own[i].host]
		if !ok || !p.hosts[h].up {
			continue
		}
		for _, s := range p.sittingsOn(parts, h) {
			if p.ownsThrough(tot, id, parts[s.part].owner) {
				if p.t.contains(id, s.leaf) {
					of.used += s.slots
				} else {
					of.lent += s.slots
				}
			}
		}
	}
	return of
}

// ownRowsOf lists the rows of the assignment that name consumer path.
func (p *Pool) ownRowsOf(path string) []int { return p.ownRows().byConsumer[path] }

// ownIndex is the rows of the assignment by consumer and by host, for the
// assignment as it was when built (of).
type ownIndex struct {
	of                 []ownSlot
	byConsumer, byHost map[string][]int
}

// ownRows is the index of the current assignment, rebuilt when it changed.
func (p *Pool) ownRows() *ownIndex {
	ix := &p.ownIdx
	if len(ix.of) != len(p.own) || (len(p.own) > 0 && &ix.of[0] != &p.own[0]) || ix.byConsumer == nil {
		ix.byConsumer, ix.byHost = make(map[string][]int, len(p.own)), map[string][]int{}
		for i, o := range p.own {
			ix.byConsumer[o.consumer] = append(ix.byConsumer[o.consumer], i)
			ix.byHost[o.host] = append(ix.byHost[o.host], i)
		}
		ix.of = p.own
	}
	return ix
}

// ownsThrough reports whether slots of owner's part count as a's: owner
// is a or below it, and every consumer from owner up to a owns slots.
func (p *Pool) ownsThrough(tot ownTotals, a, owner int32) bool {
	if owner == noNode || (owner != a && !p.t.contains(a, owner)) {
		return false
	}
	for o := owner; ; o = p.t.nodes[o].parent {
		if tot.owned[o] == 0 {
			return false
		}
		if o == a {
			return true
		}
	}
}

// sourceOf is the source row of one sitting: its own slots, the public
// pool's, a private pool's, or a pool's slots lent by another consumer.
func (p *Pool) sourceOf(parts []hostPart, s sitting) Source {
	o := parts[s.part].owner
	src := Source{Pool: "/", Slots: int64(s.slots)}
	switch {
	case o == s.leaf:
		src.Pool = SourceOwn
	case o == noNode:
	case p.t.contains(o, s.leaf):
		src.Pool = p.t.nodes[o].path
	default:
		src.Pool = p.t.nodes[p.t.commonAncestor(o, s.leaf)].path
		src.Lender = p.t.nodes[o].path
	}
	return src
}

// addSource adds a row to a leaf's sources, kept sorted by pool then
// lender, merging equal ones.
func addSource(rows []Source, s Source) []Source {
	i, found := slices.BinarySearchFunc(rows, s, func(a, b Source) int {
		return cmp.Or(cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Lender, b.Lender))
	})
	if found {
		rows[i].Slots += s.Slots
		return rows
	}
	return slices.Insert(rows, i, s)
}
