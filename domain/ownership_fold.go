package domain

import (
	"cmp"
	"slices"
)

// The layered fold (docs/rules.md#layered-fold) for a pool whose plan
// names ownership under a rules version that implements it (rules v3).
// An event then folds as: input; slots on down hosts lost; on plan and
// host events the ownership re-assigned (ownership_assignment.go, own
// decisions); excess released, the slots lent by others first and the
// leaf's own last; the layered targets computed (layered_targets.go) and the
// slots placed on them (ownership_placement.go), which makes the grant, lend,
// reclaim, return and release decisions of the rebalance.

// reassignOwnership re-runs the assignment on plan and host events, when
// the plan names ownership or an assignment is left from a plan that did.
func (p *Pool) reassignOwnership() {
	if !p.allTouch || (!p.mode.owned && len(p.own) == 0) {
		return
	}
	in := ownInput{previous: p.own, plan: p.ownPlanFor(), hosts: make([]ownHost, len(p.hosts))}
	if !p.fromScratch {
		in.keep = &p.keptAssignment
	}
	for i := range p.hosts { // every host, in the pool's order, which the keep relies on
		h := &p.hosts[i]
		in.hosts[i] = ownHost{name: h.name, group: h.group, slots: h.slots, workload: h.used, down: !h.up}
	}
	res := assignOwnership(in)
	for _, d := range res.decisions {
		d.Seq, d.Ordinal = p.seq, len(p.decisions)
		p.decisions = append(p.decisions, d)
	}
	if res.partial {
		p.assigned = assignmentChanges(p.assigned, res.changedFrom, res.changedTo)
	} else {
		p.assigned = assignmentChanges(p.assigned, p.own, res.assignment)
	}
	p.own = res.assignment
	p.partsFresh = false
	if res.rowConsumer != nil { // the rows by ids, from the plan's consumers and the hosts given
		nodes := p.ownPlanMemo.nodes
		ids := make([]ownedRow, len(res.rowConsumer))
		for i, c := range res.rowConsumer {
			ids[i] = ownedRow{node: nodes[c], host: res.rowHost[i], slots: p.own[i].slots}
		}
		p.ownIDs = ownRowsByID{of: p.own, t: p.t, rows: ids}
	}
}

// ownRowsByID is an assignment's rows by ids in a tree and the pool's hosts.
type ownRowsByID struct {
	of   []ownSlot
	t    *tree
	rows []ownedRow
}

// ownRowIDs is p.own by ids (resolveRows), kept while the assignment and
// the tree are the same (hosts are only ever added, so an index stays).
func (p *Pool) ownRowIDs() []ownedRow {
	m := &p.ownIDs
	if m.t == p.t && len(m.of) == len(p.own) && (len(p.own) == 0 || &m.of[0] == &p.own[0]) {
		return m.rows
	}
	*m = ownRowsByID{of: p.own, t: p.t, rows: resolveRows(p.t, p.hostByID, p.own)}
	return m.rows
}

// ownPlanMemo is an ownPlan with what it was made for.
type ownPlanMemo struct {
	t     *tree
	owned bool
	plan  *ownPlan
	nodes []int32 // by the plan's consumer index, its id in t
}

// ownPlanFor is the assignment's view of the plan (newOwnPlan), kept
// while the tree is the plan's: the consumers when the plan names
// ownership, none when an assignment is left from one that did.
func (p *Pool) ownPlanFor() *ownPlan {
	if m := &p.ownPlanMemo; m.plan == nil || m.t != p.t || m.owned != p.mode.owned {
		var cs []ownConsumer
		if p.mode.owned {
			for _, c := range p.plan.Consumers {
				cs = append(cs, ownConsumer{path: c.Path, priority: c.Priority, own: c.Own})
			}
		}
		*m = ownPlanMemo{t: p.t, owned: p.mode.owned, plan: newOwnPlan(cs)}
		m.nodes = make([]int32, len(m.plan.cons))
		for i, c := range m.plan.cons {
			m.nodes[i], _ = p.t.lookup(c.path)
		}
	}
	return p.ownPlanMemo.plan
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
		p.parts, p.partTot = partsOf(p.t, p.hosts, p.ownRowIDs())
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
	if !p.fromScratch && p.incFoldable() {
		built := p.inc.fold(p, parts, tot)
		if built {
			p.layered = p.inc.output(p.t)
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

// onTotals: rules 4's share_ratio without preemption decides counts on
// totals (ruling 4, fill_on_totals.go): the layered targets are those of
// share_ratio with reclaim and balance.
func (p *Pool) onTotals() bool {
	return p.mode.behaviour.countsOnTotals && p.mode.shareRatio && (!p.mode.preempt || !p.mode.balance)
}

// seatsByRounds: rules 4's priority seats each pool's tier inside the
// fold (ruling 12, priority_seating.go).
func (p *Pool) seatsByRounds() bool { return p.mode.behaviour.seatByRounds && !p.mode.shareRatio }

// fullLayered is the layered fold computed from scratch.
func (p *Pool) fullLayered() layeredTargets {
	parts, tot := p.hostParts()
	policy := divisionPolicy{shareRatio: p.mode.shareRatio, preempt: p.mode.preempt, balance: p.mode.balance}
	guarantees := false
	if p.onTotals() {
		policy.preempt, policy.balance = true, true
		guarantees = p.mode.preempt // balance: false with reclaim: T0 too
	}
	in := layeredInput{parentEnf: p.mode.parent, own: tot, lend: func(id int32) bool { return p.t.nodes[id].lend },
		policy: policy, guarantees: guarantees, alloc: func(l int32) Slots { return p.t.nodes[l].alloc },
		priorityPerPool: p.mode.behaviour.priorityPerPool, underLender: p.mode.behaviour.underLender, rules4Classes: p.mode.behaviour.excessInReleaseOrder}
	if p.seatsByRounds() {
		in.seat = newRoundSeating(p.t, parts)
		// as the placement keeps them (keepSwapped): with preemption
		in.seat.swaps = p.mode.behaviour.swapReturns && !p.plan.Policy.ReclaimForPreferenceOrDefault() && p.mode.preempt
		p.seats = in.seat
	} else {
		p.seats = nil
		in.held = p.heldByPool(parts)
	}
	return computeLayeredTargets(p.t, in)
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
	} else {
		p.pk.ready = false
		moves = p.placeAll()
	}
	if p.mode.behaviour.swapReturns && !p.plan.Policy.ReclaimForPreferenceOrDefault() {
		moves = p.swapReturns(moves)
	}
	if p.mode.behaviour.noIdleMoves {
		moves = p.keepIdleMoves(moves)
	}
	if p.mode.behaviour.reclaimsUnderMax {
		moves = p.reclaimsUnderMax(moves, p.placeRules())
	}
	if p.mode.behaviour.compensatedVictims && p.mode.preempt {
		moves = p.netCompensatedVictims(moves, p.placeRules())
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

// returnsFromKeepers: rules 4 with preemption, not on totals, pairs an
// owner's gain with the borrowers seated on its part whom step 1 kept
// elsewhere on the host (docs/decisions.md #342; under priority too,
// #355). With
// reclaim_for_preference false ruling 9 swaps such a return with the
// borrower's compensation, which is what step 1's keep already comes to:
// the owner is given the other slot, the borrower stays.
func (p *Pool) returnsFromKeepers() bool {
	return p.mode.behaviour.returnsFromKeepers && p.mode.preempt && !p.onTotals() &&
		p.plan.Policy.ReclaimForPreferenceOrDefault()
}

// placeRules are the pool's policy's choices for the placement.
func (p *Pool) placeRules() placeRules {
	r := placeRules{grant: RuleShareRatioGrant, borrow: RuleShareRatioGrant, reclaim: RuleShareRatioReclaim,
		preferring: p.plan.Policy.ReclaimForPreferenceOrDefault(), preference: p.preference,
		moveGrace: p.mode.behaviour.moveGrace, lendRevoked: p.mode.behaviour.lendRevoked,
		keepSeating: (p.mode.behaviour.noMoveWithoutPreemption && !p.mode.preempt) || p.onTotals(),
		noReclaim:   p.mode.behaviour.noMoveWithoutPreemption && !p.mode.preempt,
		onTotals:    p.onTotals(), keepMore: p.mode.behaviour.keepMore, swapDues: p.mode.behaviour.swapDues,
		restrictiveFirst: p.mode.behaviour.restrictiveFirst, victimOwnLast: p.mode.behaviour.victimOwnLast,
		returnsFromKeepers: p.returnsFromKeepers(), excessByReleaseOrder: p.mode.behaviour.excessByReleaseOrder,
		excessWithoutPreemption: p.mode.behaviour.excessWithoutPreemption,
		freeFirst:               p.mode.behaviour.freeFirst && p.mode.preempt, freeBeforeKeepers: p.mode.behaviour.freeBeforeKeepers,
		freeByPart: p.mode.behaviour.freeByPart}
	switch {
	case p.seatsByRounds() && p.seats != nil:
		r.seated, r.returnSeated = p.seats.seatedOn, p.seatedOn
	case p.mode.behaviour.seatedReturns:
		r.seated, r.returnSeated = p.seatedOn, p.seatedOn
	}
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
