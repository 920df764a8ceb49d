package domain

import "slices"

// Rules 4's reclaim_for_preference: false (rules-v4 ruling 9,
// docs/rules.md#version-4): an owner uses idle slots, its own parts' and
// the share pools', before it takes lent slots back, and no consumer's
// count changes for it. The placement has already given the owner the
// free slots of its own parts, most preferred first, and made the returns
// it still needs; each such return, from a borrower b, is matched in
// return order with the slots b is given in the same event (its
// compensation, in the order placed: free slots, or slots b reclaims
// from a third leaf, #410) that the owner may hold: for every matched
// slot b keeps the owner's slot and the owner takes b's slot instead, on
// the return's own host too (docs/decisions.md #381): a free slot by a
// grant of rule own.use, a descendant taking its parent's private slots
// back by the compensation's rule, a grant or a lend as the part is
// (#349, #402); a reclaimed slot by the owner's reclaim from the third
// leaf, with that leaf's grace. No compensation is b's use of its own
// part, nor a reclaim on a host where the owner gives slots up, and
// nothing stands in for a holding b may no longer hold (#431). Only the
// unmatched rest is returned. Decisions record the net change per leaf
// and host: a return and a compensation that cancel leave none, so an
// owner already on such slots stays there and the next event decides
// nothing.

// swapReturns applies the swap to the placement's moves.
func (p *Pool) swapReturns(moves []placeMove) []placeMove {
	var given []placeMove
	for i := range moves {
		if moves[i].kind != KindReturn {
			continue
		}
		owner, b := moves[i].leaf, moves[i].from
		if !p.mayUse(b, moves[i].graceOf) {
			// b may no longer hold the part (ruling 10): the return
			// takes the slot back and nothing stands in for it.
			continue
		}
		for j := range moves {
			r, g := &moves[i], &moves[j]
			if r.slots == 0 {
				break
			}
			if (g.kind != KindGrant && g.kind != KindLend && g.kind != KindReclaim) || g.leaf != b || g.slots == 0 || g.rule == RuleOwnUse || !p.mayUse(owner, g.part) ||
				g.kind == KindReclaim && releasesOn(moves, owner, g.host) {
				continue
			}
			m := minSlots(r.slots, g.slots)
			r.slots -= m
			g.slots -= m
			switch {
			case g.kind == KindReclaim && g.from == owner:
				// b reclaims from the owner what the owner takes back
				// from b: each keeps what it holds.
			case g.kind == KindReclaim:
				// The owner reclaims from the third leaf instead, with
				// that leaf's grace (#410).
				given = append(given, placeMove{kind: KindReclaim, leaf: owner, from: g.from, host: g.host, slots: m, rule: g.rule, graceOf: g.from, part: g.part})
			case r.graceOf == owner:
				given = append(given, placeMove{kind: KindGrant, leaf: owner, from: noNode, host: g.host, slots: m, rule: RuleOwnUse, graceOf: noNode, part: g.part})
			default:
				// A descendant taking its parent's private slots back
				// (ruling 8) owns nothing: its stand-in keeps the
				// compensation's rule (#349, #402).
				given = append(given, freeGain(p.t, owner, g.part, g.host, m, g.rule))
			}
		}
	}
	if len(given) == 0 {
		return moves
	}
	return withGiven(moves, given)
}

// releasesOn reports whether the moves release slots of leaf l on host
// h. The owner does not stand in for its borrower's reclaim there: the
// stand-in would cancel against the release (withGiven) and leave the
// victim its slot, one slot more than the placement gave it.
func releasesOn(moves []placeMove, l, h int32) bool {
	return slices.ContainsFunc(moves, func(m placeMove) bool { return m.kind == KindRelease && m.leaf == l && m.host == h && m.slots > 0 })
}

// withGiven is moves with given added as net changes per leaf and host:
// a slot given to a leaf on a host where the placement released its slots
// cancels that release (a release and a gain of one leaf on one host would
// be a decision that changes nothing, made again at every event: ruling
// 12), and moves left with no slots are dropped.
func withGiven(moves, given []placeMove) []placeMove {
	for gi := range given {
		x := &given[gi]
		for j := range moves {
			if m := &moves[j]; m.kind == KindRelease && m.leaf == x.leaf && m.host == x.host && m.slots > 0 {
				k := minSlots(m.slots, x.slots)
				m.slots -= k
				x.slots -= k
			}
		}
	}
	return dropEmpty(append(moves, given...))
}

// dropEmpty removes, in place, the moves a netting left with no slots.
func dropEmpty(moves []placeMove) []placeMove {
	return slices.DeleteFunc(moves, func(m placeMove) bool { return m.slots <= 0 })
}
