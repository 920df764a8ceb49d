package domain

import "slices"

// Rules 4's victims compensated on another host (docs/decisions.md #385,
// the lead's reading (c)): a leaf V that loses slots on a host H for a
// claimant C and is given as many on another host H' in the same
// rebalance (free slots, or, for a victim moved, its reclaim from a third
// leaf W: #435) keeps its slots on H; C is given V's compensation on H'
// instead, where C may hold that part (W's slot by C's reclaim from W).
// The end state on totals is the same, and no running work is stopped
// for it (seed 004: minimize the
// impact to existing workload; ruling 7: no move nobody needs). The
// placement states the pair either as C's reclaim from V on H, or, when
// it released V's excess before anyone gained, as V's release.moved on
// H beside C's gain there of slots that were not free before the event.
// An owner's own use is no compensation (ruling 5's own layer, not a
// share rule's gain), and returns are not netted (ruling 11).

// netCompensatedVictims applies the netting to the placement's moves.
func (p *Pool) netCompensatedVictims(moves []placeMove, rules placeRules) []placeMove {
	if !slices.ContainsFunc(moves, func(m placeMove) bool {
		return m.kind == KindReclaim || m.kind == KindRelease && m.rule == RuleMoved
	}) {
		return moves // most events take from nobody
	}
	// taken: by host, the slots gained there beyond those free before the
	// event (what the placement's releases made room for).
	var taken map[int32]Slots
	var given []placeMove
	// net: each leaf's change per host over all the moves. Only a net
	// loss is netted against a net gain elsewhere: a release and a gain
	// of the same leaf on one host are one row (canonical_rows.go), no
	// loss.
	net := map[leafHost]Slots{}
	for _, m := range moves {
		switch m.kind {
		case KindGrant, KindLend:
			net[leafHost{m.leaf, m.host}] += m.slots
		case KindReclaim, KindReturn:
			net[leafHost{m.leaf, m.host}] += m.slots
			net[leafHost{m.from, m.host}] -= m.slots
		case KindRelease:
			net[leafHost{m.leaf, m.host}] -= m.slots
		}
	}
	for i := range moves {
		lost := &moves[i]
		switch {
		case lost.kind == KindReclaim:
		case lost.kind == KindRelease && lost.rule == RuleMoved:
			if taken == nil {
				taken = p.takenBeyondFree(moves)
			}
		default:
			continue
		}
		victim := lost.from
		if lost.kind == KindRelease {
			victim = lost.leaf
		}
		for j := range moves {
			if lost.slots == 0 {
				break
			}
			comp := &moves[j]
			if (comp.kind != KindGrant && comp.kind != KindLend && comp.kind != KindReclaim) || comp.leaf != victim || comp.host == lost.host ||
				comp.rule == RuleOwnUse || comp.slots == 0 {
				continue
			}
			lossAt, gainAt := leafHost{victim, lost.host}, leafHost{victim, comp.host}
			if net[lossAt] >= 0 || net[gainAt] <= 0 {
				continue
			}
			if lost.kind == KindReclaim {
				// A reclaim as compensation only for a victim moved: for
				// one reclaimed from, the exchange left the pool off its
				// seating and the next settle moved another leaf off a
				// free slot (#435).
				if comp.kind == KindReclaim || !p.mayStandIn(moves, lost.leaf, comp) {
					continue
				}
				k := minSlots(minSlots(lost.slots, comp.slots), minSlots(-net[lossAt], net[gainAt]))
				lost.slots -= k
				comp.slots -= k
				net[lossAt] += k
				net[gainAt] -= k
				net[leafHost{lost.leaf, lost.host}] -= k
				net[leafHost{lost.leaf, comp.host}] += k
				given = append(given, standIn(p.t, *comp, lost.leaf, k, rules.grant))
				continue
			}
			// A move: the claimants are those gaining on the host it
			// leaves, as far as they took slots that were not free, by
			// the rule that may reclaim (under priority an entitled
			// gain: a borrower takes what a move frees, it reclaims
			// nothing, and such a move stays).
			for c := range moves {
				if lost.slots == 0 || comp.slots == 0 || taken[lost.host] <= 0 {
					break
				}
				gain := &moves[c]
				if (gain.kind != KindGrant && gain.kind != KindLend) || gain.host != lost.host || gain.leaf == victim ||
					gain.rule != rules.grant || gain.slots == 0 || !p.mayStandIn(moves, gain.leaf, comp) ||
					net[leafHost{gain.leaf, lost.host}] <= 0 || net[lossAt] >= 0 || net[gainAt] <= 0 {
					continue
				}
				k := minSlots(minSlots(lost.slots, comp.slots), minSlots(gain.slots, taken[lost.host]))
				k = minSlots(k, minSlots(minSlots(-net[lossAt], net[gainAt]), net[leafHost{gain.leaf, lost.host}]))
				lost.slots -= k
				comp.slots -= k
				gain.slots -= k
				taken[lost.host] -= k
				net[lossAt] += k
				net[gainAt] -= k
				net[leafHost{gain.leaf, lost.host}] -= k
				net[leafHost{gain.leaf, comp.host}] += k
				given = append(given, standIn(p.t, *comp, gain.leaf, k, gain.rule))
			}
		}
	}
	if len(given) == 0 {
		return moves
	}
	// A claimant given slots on a host where the placement released its
	// own (the two would have swapped hosts) keeps them: nothing moves.
	return withGiven(moves, given)
}

// mayStandIn reports whether claimant c may take the victim's
// compensation comp instead: hold its part, and, for a reclaim from a
// third leaf, not be that leaf nor give slots up on its host (the
// stand-in would cancel against the release there, withGiven, and leave
// the third leaf the slot the placement took from it).
func (p *Pool) mayStandIn(moves []placeMove, c int32, comp *placeMove) bool {
	if !p.mayUse(c, comp.part) {
		return false
	}
	return comp.kind != KindReclaim || comp.from != c && !releasesOn(moves, c, comp.host)
}

// standIn is claimant c given k of the victim's compensation comp: free
// slots of its part by rule, or the reclaim from the third leaf with the
// reclaim's rule and that leaf's grace (#385, #435).
func standIn(t *tree, comp placeMove, c int32, k Slots, rule Rule) placeMove {
	if comp.kind == KindReclaim {
		return placeMove{kind: KindReclaim, leaf: c, from: comp.from, host: comp.host, slots: k, rule: comp.rule, graceOf: comp.from, part: comp.part}
	}
	return freeGain(t, c, comp.part, comp.host, k, rule)
}

// takenBeyondFree is, by host a move leaves, what the event's gains take
// there beyond the slots free before it.
func (p *Pool) takenBeyondFree(moves []placeMove) map[int32]Slots {
	taken := map[int32]Slots{}
	for _, m := range moves {
		if m.kind == KindRelease && m.rule == RuleMoved {
			taken[m.host] = -(p.hosts[m.host].slots - p.hosts[m.host].used)
		}
	}
	for _, m := range moves {
		if _, ok := taken[m.host]; ok && (m.kind == KindGrant || m.kind == KindLend) {
			taken[m.host] += m.slots
		}
	}
	return taken
}

// leafHost is a leaf on a host.
type leafHost struct{ leaf, host int32 }
