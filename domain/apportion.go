package domain

import (
	"cmp"
	"slices"
)

// apportioner holds scratch space so the hot path does not allocate.
type apportioner struct {
	live []int
}

// apportion splits q over items by weight with caps (floors and bases
// are not read: splitter.split handles them), exactly as
// docs/rules.md#apportion: water-fill the items whose cap is below
// their fair part first, give the others floor(q*w/W), and hand the
// leftover slots one each by largest remainder, then higher priority, then
// smaller path. The result totals min(q, sum of caps).
//
// Caps are clamped to q before any product is formed; that never changes
// the outcome and keeps every product below MaxQuantity*MaxShare.
func (ap *apportioner) apportion(q Slots, items []share) {
	live := ap.live[:0]
	for i := range items {
		items[i].got = 0
		live = append(live, i)
	}
	for len(live) > 0 {
		var w int64
		for _, i := range live {
			w += items[i].weight
		}
		capped := Slots(0)
		rest := live[:0]
		for _, i := range live {
			c := minSlots(items[i].cap, q)
			if int64(c)*w <= int64(q)*items[i].weight {
				items[i].got = c
				capped += c
			} else {
				rest = append(rest, i)
			}
		}
		if len(rest) == len(live) {
			break
		}
		q -= capped
		live = rest
	}
	ap.live = live
	if len(live) == 0 {
		return
	}
	var w int64
	for _, i := range live {
		w += items[i].weight
	}
	left := q
	for _, i := range live {
		prod := int64(q) * items[i].weight
		items[i].got = Slots(prod / w)
		items[i].rem = prod % w
		left -= items[i].got
	}
	if left == 0 {
		return
	}
	slices.SortFunc(live, func(a, b int) int { return leftoverOrder(&items[a], &items[b]) })
	for _, i := range live[:left] {
		items[i].got++
	}
}

// leftoverOrder ranks items for leftover slots: largest remainder, then
// higher priority, then smaller path.
func leftoverOrder(a, b *share) int {
	switch {
	case a.rem != b.rem:
		return cmpDesc(a.rem, b.rem)
	case a.priority != b.priority:
		return cmpDesc(a.priority, b.priority)
	default:
		return cmp.Compare(a.rank, b.rank)
	}
}

// cmpDesc orders larger values first.
func cmpDesc[T cmp.Ordered](a, b T) int { return cmp.Compare(b, a) }
