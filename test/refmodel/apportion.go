package refmodel

import (
	"math"
	"sort"
)

// inf is an infinite cap or max.
const inf = int64(math.MaxInt64)

// item is one participant of apportion: a node of the tree.
type item struct {
	path     string
	w        int64 // share
	cap      int64 // inf when uncapped
	priority int64
}

// apportion follows docs/rules.md#apportion literally and returns the
// slots of each item, in the order of items.
func apportion(q int64, items []item) []int64 {
	out := make([]int64, len(items))
	inS := make([]bool, len(items))
	for i := range items {
		inS[i] = true
	}
	for { // water-fill the capped ones first
		var w int64
		for i := range items {
			if inS[i] {
				w += items[i].w
			}
		}
		if w == 0 {
			return out
		}
		var t []int
		for i := range items {
			// caps are clamped to Q, which never changes a result (decisions.md #5)
			if inS[i] && min(items[i].cap, q)*w <= q*items[i].w {
				t = append(t, i)
			}
		}
		if len(t) == 0 {
			break
		}
		qBefore := q
		for _, i := range t {
			out[i] = min(items[i].cap, qBefore)
			q -= out[i]
			inS[i] = false
		}
	}
	var w int64
	var s []int
	for i := range items {
		if inS[i] {
			w += items[i].w
			s = append(s, i)
		}
	}
	rem := make([]int64, len(items))
	left := q
	for _, i := range s {
		out[i] = q * items[i].w / w
		rem[i] = q * items[i].w % w
		left -= out[i]
	}
	sort.SliceStable(s, func(x, y int) bool {
		a, b := s[x], s[y]
		if rem[a] != rem[b] {
			return rem[a] > rem[b] // largest remainder
		}
		if items[a].priority != items[b].priority {
			return items[a].priority > items[b].priority // then higher priority
		}
		return items[a].path < items[b].path // then smaller path
	})
	for k := 0; k < len(s) && left > 0; k++ {
		out[s[k]]++
		left--
	}
	return out
}
