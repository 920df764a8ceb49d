package domain

import (
	"slices"
	"testing"
)

// TestKeepSittings pins the one rule by which a leaf keeps the classes of
// a pool it sits on (keepSittings), which both folds use: a leaf giving up
// slots to others gives up the pool's own first (#106); under rules 4 a
// leaf sitting on more than it brings gives that excess back lent slots
// first (#331), and only the rest of its loss follows #106.
func TestKeepSittings(t *testing.T) {
	// classes in the pool's order: 0 the pool's own, 1 and 2 lent
	cases := []struct {
		name                  string
		sits                  []classSitting
		part, brought, budget Slots
		want                  []Slots // kept per class
		shed                  Slots
	}{
		{"keeps all where it sits", []classSitting{{0, 2}, {1, 4}}, 6, 6, Unlimited, []Slots{2, 4, 0}, 0},
		{"a loss to others gives up the pool's own first", []classSitting{{0, 2}, {1, 4}}, 4, 6, Unlimited, []Slots{0, 4, 0}, 0},
		{"an excess gives back lent slots first (dispute 02)", []classSitting{{0, 2}, {1, 4}}, 4, 4, Unlimited, []Slots{2, 2, 0}, 2},
		{"version 3: no budget, the excess too gives up the pool's own first", []classSitting{{0, 2}, {1, 4}}, 4, 4, 0, []Slots{0, 4, 0}, 0},
		{"the last lent class first", []classSitting{{0, 1}, {1, 2}, {2, 2}}, 3, 3, Unlimited, []Slots{1, 2, 0}, 2},
		{"excess, then a loss to others", []classSitting{{0, 4}, {1, 2}}, 3, 5, Unlimited, []Slots{2, 1, 0}, 1},
		{"the budget bounds the excess", []classSitting{{0, 2}, {1, 4}}, 4, 4, 1, []Slots{1, 3, 0}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kept := make([]Slots, 3)
			shed := keepSittings(slices.Clone(c.sits), c.part, c.brought, c.budget, func(at int, n Slots) Slots {
				kept[at] += n
				return n
			})
			if !slices.Equal(kept, c.want) || shed != c.shed {
				t.Errorf("kept %v, shed %d; want %v, %d", kept, shed, c.want, c.shed)
			}
		})
	}
}
