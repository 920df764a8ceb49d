package domain

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/gen"
)

// TestSittingsCacheMatchesFull: after every event of random logs with
// ownership, the sittings kept per host (recomputed only where holdings
// changed) equal a computation from scratch, and so do the views built
// on them.
func TestSittingsCacheMatchesFull(t *testing.T) {
	runs := 300
	if testing.Short() {
		runs = 60
	}
	compared := 0
	for seed := range uint64(runs) {
		foldEach(gen.GenerateOwned(gen.NewRand(seed+93000), 40), func(pool *Pool, i int) {
			if !pool.mode.owned {
				return
			}
			parts, _ := pool.hostParts()
			cached := pool.sittings(parts)
			kept := pool.sits
			pool.sits = sitCache{}
			full := pool.sittings(parts)
			pool.sits = kept
			if !slices.Equal(cached, full) {
				t.Fatalf("seed %d event %d: cached sittings %v, from scratch %v", seed, i, cached, full)
			}
			compared++
		})
	}
	if compared < runs*5 {
		t.Fatalf("only %d states compared", compared)
	}
	t.Logf("%d states compared", compared)
}

// TestConsumerViewMatchesAll: after every event of random logs with
// ownership, one consumer's view (its ownership figures from its own
// hosts' sittings) equals its entry among every consumer's views (one
// pass over the whole pool).
func TestConsumerViewMatchesAll(t *testing.T) {
	runs := 200
	if testing.Short() {
		runs = 40
	}
	compared := 0
	for seed := range uint64(runs) {
		foldEach(gen.GenerateOwned(gen.NewRand(seed+51000), 40), func(pool *Pool, i int) {
			for _, all := range pool.Consumers() {
				one, _ := pool.Consumer(all.Path)
				if !reflect.DeepEqual(one, all) {
					t.Fatalf("seed %d event %d: %s alone %+v, among all %+v", seed, i, all.Path, one, all)
				}
				compared++
			}
		})
	}
	t.Logf("%d views compared", compared)
}

// foldEach folds a generated log, calling each after every event the
// pool applied (refused ones are skipped).
func foldEach(sc gen.Scenario, each func(pool *Pool, i int)) {
	pool := NewPool("each")
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seq := uint64(0)
	for i, ev := range sc.Events {
		at = at.Add(time.Second)
		if _, err := pool.Apply(Event{Seq: seq + 1, Time: at, Payload: ev}); err != nil {
			continue
		}
		seq++
		each(pool, i)
	}
}
