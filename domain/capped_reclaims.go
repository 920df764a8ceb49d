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
	if rules.phased {
		moves = p.freeSlotsInEntitledOrder(moves, rules)
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
		p.t.hold(cur, l, p.t.nodes[l].alloc)
	}
	room := func(l, from int32) Slots { return p.t.headroomFrom(l, from, cur) }
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
			k := minSlots(minSlots(blocked, v.slots), minSlots(p.seatedOn(v.host, g.part, v.leaf), room(g.leaf, v.leaf)))
			if k <= 0 {
				continue
			}
			g.slots -= k
			v.slots -= k
			blocked -= k
			reclaims = append(reclaims, placeMove{kind: KindReclaim, leaf: g.leaf, from: v.leaf, host: v.host, slots: k, rule: rules.reclaim, graceOf: v.leaf, part: g.part})
		}
		// Or another claimant's reclaim from a leaf inside the blocking
		// ancestor: the capped claimant takes that reclaim, the other
		// one its free slots, when each may hold the other's part, on
		// one host as on two (#433).
		for ri := range moves {
			if blocked <= 0 {
				break
			}
			r := &moves[ri]
			if r.kind != KindReclaim || r.slots == 0 || r.leaf == g.leaf || r.from == g.leaf || !p.t.mayUse(r.leaf, g.part) {
				continue
			}
			k := minSlots(minSlots(blocked, r.slots), g.slots)
			k = minSlots(k, minSlots(p.seatedOn(r.host, g.part, r.from), room(g.leaf, r.from)))
			k = minSlots(k, room(r.leaf, noNode))
			if k <= 0 {
				continue
			}
			g.slots -= k
			r.slots -= k
			blocked -= k
			reclaims = append(reclaims, placeMove{kind: KindReclaim, leaf: g.leaf, from: r.from, host: r.host, slots: k, rule: rules.reclaim, graceOf: r.from, part: g.part})
			reclaims = append(reclaims, freeGain(p.t, r.leaf, g.part, g.host, k, rules.grant))
			p.t.hold(cur, r.leaf, k)
		}
		p.t.hold(cur, g.leaf, g.slots)
	}
	if len(reclaims) == 0 {
		return moves
	}
	return dropEmpty(append(moves, reclaims...))
}

// freeSlotsInEntitledOrder: under priority, inside an ancestor with a
// max, section 4 gives the free slots to the entitled leaves in the
// entitled order and has those still short reclaim (#434, engine dispute
// 49). When the pairing has a leaf reclaim from a sibling inside such an
// ancestor while a leaf after it in that order is granted free slots,
// the two exchange: the first takes the free slots, the second the
// reclaim. Every node's count is as before, so no max moves; each must
// be allowed the other's part.
func (p *Pool) freeSlotsInEntitledOrder(moves []placeMove, rules placeRules) []placeMove {
	var out []placeMove
	for ri := range moves {
		r := &moves[ri]
		if r.kind != KindReclaim || r.rule != rules.reclaim || r.slots == 0 {
			continue
		}
		for gi := range moves {
			if r.slots == 0 {
				break
			}
			g := &moves[gi]
			if (g.kind != KindGrant && g.kind != KindLend) || g.rule != rules.grant || g.slots == 0 ||
				g.leaf == r.leaf || g.leaf == r.from || p.t.entitledOrder(r.leaf, g.leaf) >= 0 ||
				!p.underCappedAncestor(r.leaf, g.leaf, r.from) || !p.mayUse(r.leaf, g.part) || !p.mayUse(g.leaf, r.part) {
				continue
			}
			k := minSlots(r.slots, g.slots)
			r.slots -= k
			g.slots -= k
			out = append(out, freeGain(p.t, r.leaf, g.part, g.host, k, rules.grant),
				placeMove{kind: KindReclaim, leaf: g.leaf, from: r.from, host: r.host, slots: k, rule: rules.reclaim, graceOf: r.from, part: r.part})
		}
	}
	if len(out) == 0 {
		return moves
	}
	return dropEmpty(append(moves, out...))
}

// underCappedAncestor reports whether leaves a, b and c share an ancestor
// with a max.
func (p *Pool) underCappedAncestor(a, b, c int32) bool {
	for x := p.t.commonAncestor(p.t.commonAncestor(a, b), c); x > 0; x = p.t.nodes[x].parent {
		if p.t.nodes[x].max != nil {
			return true
		}
	}
	return false
}
