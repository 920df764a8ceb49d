package domain

// Rules 4's reclaims inside a capped branch (section 1 and section 4,
// docs/decisions.md #354). The placement releases what a leaf holds
// above its target before anyone gains, so a claimant whose ancestor is
// at its max is given a free slot on another host once its sibling's
// slot is released: the log says `grant` to the claimant and
// `release.moved` of the sibling, though the sibling gains nothing (no
// move: ruling 7's move keeps the count) and the slot it lost went to the
// claimant. Section 4's procedure runs in order: free slots first, which
// the max forbids ("no grant or reclaim takes a consumer or any of its
// ancestors above its max"), then a reclaim from the borrower, taken on
// the host the victim holds it. So the pair is one reclaim.

// reclaimsUnderMax turns, in the placement's moves, a claimant's grant of
// free slots that its ancestors' max would not allow over what was held
// before the event's releases, paired with a leaf's release.moved that
// gains nothing in the event, into the claimant's reclaim from that leaf
// on the host it releases, as far as the victim sits there in the part
// the grant is in (the part the claimant is due; a reclaim of another
// part would move the claimant off its due and the next settle back) and
// the reclaim fits under the ancestors the two do not share. Only a claimant that may reclaim takes part: under
// priority an entitled grant, under share_ratio any grant.
func (p *Pool) reclaimsUnderMax(moves []placeMove, rules placeRules) []placeMove {
	if !p.t.hasMax || !p.mode.preempt {
		return moves
	}
	gains := map[int32]bool{} // leaves gaining slots in the event
	losers := false           // a release.moved or a reclaim
	for _, m := range moves {
		switch m.kind {
		case KindGrant, KindLend, KindReturn:
			gains[m.leaf] = true
		case KindReclaim:
			gains[m.leaf], losers = true, true
		case KindRelease:
			losers = losers || m.rule == RuleMoved
		}
	}
	if !losers {
		return moves
	}
	cur := make([]Slots, len(p.t.nodes)) // what each node holds before the moves, with the gains taken so far
	for _, l := range p.t.leaves {
		for a := l; a > 0; a = p.t.nodes[a].parent {
			cur[a] += p.t.nodes[l].alloc
		}
	}
	hold := func(l int32, k Slots) {
		for a := l; a > 0; a = p.t.nodes[a].parent {
			cur[a] += k
		}
	}
	room := func(l, from int32) Slots {
		r := Unlimited
		for a := p.t.nodes[l].parent; a > 0 && (from == noNode || !p.t.contains(a, from)); a = p.t.nodes[a].parent {
			if n := &p.t.nodes[a]; n.maxCap != Unlimited {
				r = minSlots(r, maxSlots(n.maxCap-cur[a], 0))
			}
		}
		return r
	}
	var reclaims []placeMove
	for gi := range moves {
		g := &moves[gi]
		if (g.kind != KindGrant && g.kind != KindLend) || g.rule == RuleOwnUse || (g.rule != rules.grant && rules.phased) {
			continue
		}
		blocked := g.slots - room(g.leaf, noNode)
		for vi := range moves {
			if blocked <= 0 {
				break
			}
			v := &moves[vi]
			if v.kind != KindRelease || v.rule != RuleMoved || v.slots == 0 || v.host == g.host || v.leaf == g.leaf || gains[v.leaf] {
				continue
			}
			k := minSlots(minSlots(blocked, v.slots), minSlots(p.seatedIn(v.leaf, v.host, g.part), room(g.leaf, v.leaf)))
			if k <= 0 {
				continue
			}
			g.slots -= k
			v.slots -= k
			blocked -= k
			reclaims = append(reclaims, placeMove{kind: KindReclaim, leaf: g.leaf, from: v.leaf, host: v.host, slots: k, rule: rules.reclaim, graceOf: v.leaf})
		}
		// Or another claimant's reclaim from a leaf inside the blocking
		// ancestor: the capped claimant takes that reclaim, the other
		// one its free slots, when each may hold the other's part.
		for ri := range moves {
			if blocked <= 0 {
				break
			}
			r := &moves[ri]
			if r.kind != KindReclaim || r.slots == 0 || r.leaf == g.leaf || r.from == g.leaf || r.host == g.host || !p.t.mayUse(r.leaf, g.part) {
				continue
			}
			k := minSlots(minSlots(blocked, r.slots), g.slots)
			k = minSlots(k, minSlots(p.seatedIn(r.from, r.host, g.part), room(g.leaf, r.from)))
			k = minSlots(k, room(r.leaf, noNode))
			if k <= 0 {
				continue
			}
			g.slots -= k
			r.slots -= k
			blocked -= k
			reclaims = append(reclaims, placeMove{kind: KindReclaim, leaf: g.leaf, from: r.from, host: r.host, slots: k, rule: rules.reclaim, graceOf: r.from})
			reclaims = append(reclaims, p.gainMove(r.leaf, g.part, g.host, k, rules.grant))
			hold(r.leaf, k)
		}
		hold(g.leaf, g.slots)
	}
	if len(reclaims) == 0 {
		return moves
	}
	out := moves[:0]
	for _, m := range append(moves, reclaims...) {
		if m.slots > 0 {
			out = append(out, m)
		}
	}
	return out
}

// seatedIn is how many slots victim sits on at host in owner's part (the
// seating): the part the claimant's grant is in, so the reclaim takes
// the slots the claimant is due.
func (p *Pool) seatedIn(victim, host, owner int32) Slots {
	parts, _ := p.hostParts()
	n := Slots(0)
	for _, s := range p.sittingsOn(parts, host) {
		if s.leaf == victim && parts[s.part].owner == owner {
			n += s.slots
		}
	}
	return n
}

// gainMove is leaf l given k free slots of owner's part on host under
// rule: a grant on its own, an ancestor's or the public part, a lend on
// a part another consumer owns (as the placement's grant records them).
func (p *Pool) gainMove(l, owner, host int32, k Slots, rule Rule) placeMove {
	switch {
	case owner == l:
		return placeMove{kind: KindGrant, leaf: l, from: noNode, host: host, slots: k, rule: RuleOwnUse, graceOf: noNode, part: owner}
	case owner == noNode || p.t.contains(owner, l):
		return placeMove{kind: KindGrant, leaf: l, from: noNode, host: host, slots: k, rule: rule, graceOf: noNode, part: owner}
	}
	return placeMove{kind: KindLend, leaf: l, from: owner, host: host, slots: k, rule: rule, graceOf: noNode, part: owner}
}
