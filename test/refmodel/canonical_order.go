package refmodel

import (
	"cmp"
	"slices"
)

// canonicalOrder writes an event's decisions as rules 4 orders them on a
// pool where some consumer owns slots before or after the event
// (docs/decisions.md #377): one row
// per (kind, consumer, from, host, rule, deadline), its slots summed,
// sorted by kind (release, trim, own, grant, lend, return, reclaim), then
// consumer, from, host, rule and deadline (none first). The order the
// model made them in (#233, #238) is how it got there; this is what it
// writes.
func canonicalOrder(ds []Decision) []Decision {
	rank := map[string]int{"release": 0, "trim": 1, "own": 2, "grant": 3, "lend": 4, "return": 5, "reclaim": 6}
	key := func(a, b Decision) int {
		return cmp.Or(cmp.Compare(rank[a.Kind], rank[b.Kind]), cmp.Compare(a.Consumer, b.Consumer),
			cmp.Compare(a.From, b.From), cmp.Compare(a.Host, b.Host), cmp.Compare(a.Rule, b.Rule),
			a.Deadline.Compare(b.Deadline)) // the zero time (none) is the earliest
	}
	out := slices.Clone(ds)
	slices.SortStableFunc(out, key)
	merged := out[:0]
	for _, d := range out {
		if n := len(merged); n > 0 && key(merged[n-1], d) == 0 {
			merged[n-1].Slots += d.Slots
			continue
		}
		merged = append(merged, d)
	}
	return merged
}
