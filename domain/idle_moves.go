package domain

import "slices"

// Rules 4's moves that free nothing anyone takes (rules-v4 ruling 7,
// docs/decisions.md #347). With preemption a move stops work on one host
// and starts it on another so that every leaf reaches its share of the
// event's end state. The placement derives a leaf's share per part: when
// the division gives the part a leaf sits on to another leaf that is
// served elsewhere anyway, the leaf would be moved to the part the
// division gave it while the slots it leaves stay free. Such a move helps
// no leaf reach its target (the end state on totals is the same without
// it) and stops running work (seed 004: minimize the impact to existing
// workload), so it is not made: the leaf stays where it is.

// keepIdleMoves cancels, from the placement's moves, each move's part
// that frees slots still free after the event: a release.moved of leaf
// l on host h, less what l's own use gains elsewhere for slots it gives
// up off its own parts (ruling 5 takes an owner's own slots whatever it
// holds elsewhere; its own slots leave last), is cut by what h has
// free once every move is made, and as much of l's share-rule gains on
// other hosts (grants and lends) is cut with it, the latest first. l's
// count is unchanged.
func (p *Pool) keepIdleMoves(moves []placeMove) []placeMove {
	if !slices.ContainsFunc(moves, func(m placeMove) bool { return m.kind == KindRelease && m.rule == RuleMoved }) {
		return moves // most events move nothing
	}
	free := make(map[int32]Slots) // by host a move leaves: free after the event
	for _, m := range moves {
		if _, ok := free[m.host]; !ok && m.kind == KindRelease && m.rule == RuleMoved {
			free[m.host] = p.hosts[m.host].slots - p.hosts[m.host].used
		}
	}
	if len(free) == 0 {
		return moves
	}
	for _, m := range moves {
		if _, ok := free[m.host]; !ok {
			continue
		}
		switch m.kind {
		case KindRelease:
			free[m.host] += m.slots
		case KindGrant, KindLend:
			free[m.host] -= m.slots
		}
	}
	cut := false
	ownElse := map[int32]Slots{} // by moved leaf: what its own use gains on hosts it is moved to
	for _, m := range moves {
		if m.kind == KindGrant && m.rule == RuleOwnUse {
			ownElse[m.leaf] += m.slots
		}
	}
	for i := range moves {
		m := &moves[i]
		if m.kind != KindRelease || m.rule != RuleMoved || free[m.host] <= 0 {
			continue
		}
		// Its own use takes what it gives up first (ruling 5): that much is
		// no idle move, unless what it gives up is its own slots (own last
		// in the release order): an owner on its own part is not moved to
		// another of its own parts to leave it free.
		onOwn := p.seatedOn(m.host, m.leaf, m.leaf)
		fromElse := minSlots(m.slots, maxSlots(p.t.holdingOn(m.leaf, m.host)-onOwn, 0))
		own := minSlots(fromElse, ownElse[m.leaf])
		ownElse[m.leaf] -= own
		idle := minSlots(m.slots-own, free[m.host])
		ownToOwn := m.slots - fromElse // own slots given up: an own use gain elsewhere is cut with them
		for j := len(moves) - 1; j >= 0 && idle > 0; j-- {
			g := &moves[j]
			if (g.kind != KindGrant && g.kind != KindLend) || g.leaf != m.leaf || g.host == m.host || g.slots == 0 ||
				(g.rule == RuleOwnUse && ownToOwn == 0) {
				continue
			}
			k := minSlots(idle, g.slots)
			if g.rule == RuleOwnUse {
				k = minSlots(k, ownToOwn)
				ownToOwn -= k
			}
			g.slots -= k
			m.slots -= k
			free[m.host] -= k
			idle -= k
			cut = true
		}
	}
	if !cut {
		return moves
	}
	return dropEmpty(moves)
}
