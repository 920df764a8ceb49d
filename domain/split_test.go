package domain

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSplitReducesToApportion: without a zero share, a floor or bands over
// several priorities, split is apportion item for item (the "Reduction"
// that keeps rules 1-3 unchanged), whatever the bases say; and with bands
// over one priority it is too.
func TestSplitReducesToApportion(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var sp splitter
	var ap apportioner
	for i := 0; i < 20000; i++ {
		items := randomItems(r, false)
		bands := r.IntN(2) == 0
		if bands {
			for j := range items {
				items[j].priority = items[0].priority
			}
		}
		q := Slots(r.IntN(60))
		want := slices.Clone(items)
		ap.apportion(q, want)
		got := slices.Clone(items)
		sp.split(q, got, bands)
		for j := range want {
			if got[j].got != want[j].got {
				t.Fatalf("q %d, bands %t, items %+v: split %v, apportion %v", q, bands, items, gots(got), gots(want))
			}
		}
	}
}

// TestSplitProperties: with zero shares, floors and bands, every item gets
// at least its floor and at most its cap, and the parts total min(q, sum
// of caps) (section 2, "Floors", and section 3, "The sibling split").
func TestSplitProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var sp splitter
	for i := 0; i < 50000; i++ {
		items := randomItems(r, true)
		var sumF, sumC Slots
		for _, it := range items {
			sumF, sumC = sumF+it.floor, addCap(sumC, it.cap)
		}
		q := sumF + Slots(r.IntN(40))
		bands := r.IntN(2) == 0
		sp.split(q, items, bands)
		var total Slots
		for _, it := range items {
			if it.got < it.floor || it.got > it.cap {
				t.Fatalf("q %d, bands %t: item %+v outside [floor, cap]: %v", q, bands, it, dump(items))
			}
			total += it.got
		}
		if want := minSlots(q, sumC); total != want {
			t.Fatalf("q %d, bands %t: total %d, want %d: %v", q, bands, total, want, dump(items))
		}
	}
}

// TestSplitBands: the band arithmetic of the spec's worked examples
// (scenarios-v4 d-prio-1 step 2 and d-prio-6 step 2): a lower band is
// taken down to its bases before a higher one gives anything.
func TestSplitBands(t *testing.T) {
	var sp splitter
	// d-prio-1 step 2: C 13; a, b (priority 2, share 1, base 2, E 12), c
	// (priority 1, share 2, base 4, E 12); d has no demand.
	items := []share{
		{weight: 1, base: 2, cap: 12, priority: 2, rank: 1},
		{weight: 1, base: 2, cap: 12, priority: 2, rank: 2},
		{weight: 2, base: 4, cap: 12, priority: 1, rank: 3},
	}
	sp.split(13, items, true)
	if g := gots(items); !slices.Equal(g, []Slots{5, 4, 4}) {
		t.Errorf("d-prio-1 step 2: %v, want [5 4 4]", g)
	}
	// d-prio-6 step 2: C 24; hi (priority 1, share 1, base 6, E0 12), lo
	// (priority 0, share 1, base 6, E0 12), new (priority 0, share 2, base
	// 6, E0 6).
	items = []share{
		{weight: 1, base: 6, cap: 12, priority: 1, rank: 1},
		{weight: 1, base: 6, cap: 12, priority: 0, rank: 2},
		{weight: 2, base: 6, cap: 6, priority: 0, rank: 3},
	}
	sp.split(24, items, true)
	if g := gots(items); !slices.Equal(g, []Slots{12, 6, 6}) {
		t.Errorf("d-prio-6 step 2: %v, want [12 6 6]", g)
	}
	// Zero shares after the positive ones, evenly (d-zero-2 step 1): p
	// (share 1, E 4), z (share 0, E 3), z2 (share 0, E 10), C 10.
	items = []share{
		{weight: 1, cap: 4, rank: 1},
		{weight: 0, cap: 3, rank: 2},
		{weight: 0, cap: 10, rank: 3},
	}
	sp.split(10, items, false)
	if g := gots(items); !slices.Equal(g, []Slots{4, 3, 3}) {
		t.Errorf("d-zero-2 step 1: %v, want [4 3 3]", g)
	}
	// A floor holds an item up; the others are split again (d-pin-1 step
	// 2 at the root: A cap 17 floor 14, B cap 10 floor 0, C 20).
	items = []share{
		{weight: 1, floor: 14, base: 14, cap: 17, rank: 1},
		{weight: 1, cap: 10, rank: 2},
	}
	sp.split(20, items, false)
	if g := gots(items); !slices.Equal(g, []Slots{14, 6}) {
		t.Errorf("d-pin-1 step 2: %v, want [14 6]", g)
	}
}

// randomItems draws 1 to 5 items with f <= b <= c; with extras, zero
// shares, floors and several priorities.
func randomItems(r *rand.Rand, extras bool) []share {
	n := 1 + r.IntN(5)
	items := make([]share, n)
	for i := range items {
		c := Slots(r.IntN(20))
		if r.IntN(4) == 0 {
			c = Unlimited
		}
		it := share{weight: int64(1 + r.IntN(4)), cap: c, priority: int64(r.IntN(3)), rank: int32(i)}
		if extras {
			if r.IntN(4) == 0 {
				it.weight = 0
			}
			top := minSlots(c, 15)
			it.base = Slots(r.IntN(int(top) + 1))
			if r.IntN(2) == 0 {
				it.floor = Slots(r.IntN(int(it.base) + 1))
			}
		} else {
			it.base = Slots(r.IntN(10))
		}
		items[i] = it
	}
	return items
}

func gots(items []share) []Slots {
	out := make([]Slots, len(items))
	for i, it := range items {
		out[i] = it.got
	}
	return out
}

func dump(items []share) string {
	s := ""
	for _, it := range items {
		s += fmt.Sprintf("{w %d f %d b %d c %d p %d got %d} ", it.weight, it.floor, it.base, it.cap, it.priority, it.got)
	}
	return s
}
