package projections

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestIDsExact: the set answers exactly as a map of strings does, with
// its own hash and with one that makes ids collide (so the overflow list
// is exercised), for ids added, added again and never added.
func TestIDsExact(t *testing.T) {
	for name, ids := range map[string]*IDs{
		"maphash":    NewIDs(),
		"collisions": newIDs(func(id string) uint64 { return uint64(len(id) % 3) }),
		"one bucket": newIDs(func(string) uint64 { return 7 }),
	} {
		ref := map[string]bool{}
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range 5000 {
			id := fmt.Sprintf("id-%d-%x", rng.IntN(3000), rng.Uint32()%7)
			if i%3 == 0 {
				ids.Add(id)
				ref[id] = true
			}
			if got := ids.has(id); got != ref[id] {
				t.Fatalf("%s: has(%q) = %v, want %v", name, id, got, ref[id])
			}
		}
		for id := range ref {
			if !ids.has(id) {
				t.Fatalf("%s: lost %q", name, id)
			}
		}
		if ids.has("") || ids.has("id-none") {
			t.Fatalf("%s: holds an id never added", name)
		}
	}
	var none *IDs
	none.Add("x")
	if none.has("x") {
		t.Fatal("a nil set holds an id")
	}
}

// BenchmarkIDs adds a million ids and looks each up, as a replay of a
// pool with a million applied events does.
func BenchmarkIDs(b *testing.B) {
	ids := make([]string, 1_000_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-replay-abcd-%d", i)
	}
	b.ReportAllocs()
	for range b.N {
		set := NewIDs()
		for _, id := range ids {
			if !set.has(id) {
				set.Add(id)
			}
		}
	}
}
