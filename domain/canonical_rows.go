package domain

import (
	"cmp"
	"slices"
)

// Under rules 4 an event on a pool where some consumer owns slots writes
// its rows in one canonical order (docs/rules.md#decisions,
// docs/decisions.md #377). The order in which the fold happened to make
// them (turns, passes, parts of a host) is how the engine got there, not
// what the event decided: the same changes made in another order, or one
// change split per part of a host, are the same decisions, and an auditor
// or a second implementation must be able to write them byte for byte
// without following the engine's inner order. So the rows are
//
//   - merged: one row per (kind, consumer, from, host, rule, deadline),
//     its slots the sum (a leaf's slots of one host in two parts, or one
//     lend made in two passes, are one change of its allocation);
//   - sorted by kind in effect order, then by consumer, from, host, rule
//     and deadline (none first). The kinds: what frees or loses slots,
//     then ownership, then what takes free slots, then what moves slots
//     between consumers (release, trim, own, grant, lend, return,
//     reclaim). No prefix of an event's rows puts more on a host than it
//     held before or after the event (transfers change no host's total),
//     and a leaf's holding on a host stays at or above zero at every
//     prefix, but where the event's settles give it slots by a transfer
//     and then move it off them (#377; transfers before grants left 10
//     times as many such prefixes).
//
// Versions 1 to 3, and a version 4 pool nobody owns slots in before or
// after the event, keep the order they were released with (golden
// corpus).

// kindRank is a kind's place in the canonical order.
func kindRank(k Kind) int {
	switch k {
	case KindRelease:
		return 0
	case KindTrim:
		return 1
	case KindOwn:
		return 2
	case KindGrant:
		return 3
	case KindLend:
		return 4
	case KindReturn:
		return 5
	default: // KindReclaim
		return 6
	}
}

// compareRows orders two rows canonically, slots aside.
func compareRows(a, b *Decision) int {
	return cmp.Or(
		cmp.Compare(kindRank(a.Kind), kindRank(b.Kind)),
		cmp.Compare(a.Consumer, b.Consumer),
		cmp.Compare(a.From, b.From),
		cmp.Compare(a.Host, b.Host),
		cmp.Compare(a.Rule, b.Rule),
		compareDeadlines(a, b),
	)
}

func compareDeadlines(a, b *Decision) int {
	switch {
	case a.Deadline == nil && b.Deadline == nil:
		return 0
	case a.Deadline == nil:
		return -1
	case b.Deadline == nil:
		return 1
	}
	return a.Deadline.Compare(*b.Deadline)
}

// canonicalRows sorts and merges the event's rows in p.decisions and
// numbers them again.
func (p *Pool) canonicalRows() {
	ds := p.decisions
	slices.SortStableFunc(ds, func(a, b Decision) int { return compareRows(&a, &b) })
	out := ds[:0]
	for _, d := range ds {
		if n := len(out); n > 0 && compareRows(&out[n-1], &d) == 0 {
			out[n-1].Slots += d.Slots
			continue
		}
		out = append(out, d)
	}
	for i := range out {
		out[i].Ordinal = i
	}
	p.decisions = out
}
