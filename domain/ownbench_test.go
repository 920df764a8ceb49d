package domain_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
)

// ownedBenchPool builds the ownership benchmark pool: a 3-level
// tree of n leaves, n/10 hosts of 20 slots, a third of the leaves owning
// 2 slots of their mid-level parent's host, the parents and top-level
// consumers owning those hosts whole, and a first round of demand (0..4
// a leaf).
func ownedBenchPool(b testing.TB, n int, policy events.Policy) (*domain.Pool, []string, *rand.Rand, []events.Consumer) {
	b.Helper()
	f := 1
	for f*f*f < n {
		f++
	}
	var cs []events.Consumer
	var leaves []string
	idx := 0
	two := int64(2)
	for i := 0; i < f && len(leaves) < n; i++ {
		top := events.Consumer{Path: fmt.Sprintf("/t%02d", i)}
		topAt := len(cs)
		cs = append(cs, top)
		for j := 0; j < f && len(leaves) < n; j++ {
			mid := events.Consumer{Path: fmt.Sprintf("/t%02d/m%02d", i, j)}
			midAt := len(cs)
			cs = append(cs, mid)
			for k := 0; k < f && len(leaves) < n; k++ {
				share := int64(1 + (i+j+k)%4)
				c := events.Consumer{Path: fmt.Sprintf("/t%02d/m%02d/l%02d", i, j, k), Share: &share, Priority: int64(k % 3)}
				if idx%3 == 0 {
					h := fmt.Sprintf("h%05d", i*f+j) // one host per mid-level consumer
					c.Own = []events.OwnEntry{{Host: h, Slots: &two}}
					for _, at := range []int{midAt, topAt} {
						if !slices.ContainsFunc(cs[at].Own, func(e events.OwnEntry) bool { return e.Host == h }) {
							cs[at].Own = append(cs[at].Own, events.OwnEntry{Host: h})
						}
					}
				}
				cs = append(cs, c)
				leaves = append(leaves, c.Path)
				idx++
			}
		}
	}
	p := domain.NewPool("bench")
	seq := uint64(0)
	apply := func(ev events.Payload) {
		seq++
		if _, err := p.Apply(domain.Event{Seq: seq, Time: time.Unix(int64(seq), 0), Payload: ev}); err != nil {
			b.Fatal(err)
		}
	}
	for h := 0; h < max(1, n/10); h++ { // before the plan: one assignment, not one per host
		apply(&events.HostUp{Host: fmt.Sprintf("h%05d", h), Slots: 20})
	}
	apply(&events.PlanChange{Plan: events.Plan{Rules: int(domain.RulesV3), Policy: policy, Consumers: cs}})
	rng := rand.New(rand.NewPCG(1, 2))
	d := &events.Demand{Demands: map[string]int64{}}
	for _, l := range leaves {
		d.Demands[l] = int64(rng.IntN(5))
	}
	apply(d)
	return p, leaves, rng, cs
}

var ownedBenchSizes = []int{1000, 10000}

// BenchmarkOwnedDemand, BenchmarkOwnedRelease, BenchmarkOwnedHost and
// BenchmarkOwnedPlan are the plain benchmarks' events on a pool with
// ownership (ownedBenchPool).
func BenchmarkOwnedDemand(b *testing.B) {
	for _, pol := range benchPolicies {
		for _, n := range ownedBenchSizes {
			b.Run(fmt.Sprintf("%s/leaves=%d", pol.name, n), func(b *testing.B) {
				p, leaves, rng, _ := ownedBenchPool(b, n, pol.policy)
				timed(b, p, demandEvents(leaves, rng))
			})
		}
	}
}

func BenchmarkOwnedRelease(b *testing.B) {
	for _, n := range ownedBenchSizes {
		b.Run(fmt.Sprintf("share_ratio-leaf/leaves=%d", n), func(b *testing.B) {
			p, leaves, rng, _ := ownedBenchPool(b, n, benchPolicies[2].policy)
			timed(b, p, releaseEvents(p, leaves, rng))
		})
	}
}

func BenchmarkOwnedHost(b *testing.B) {
	for _, n := range ownedBenchSizes {
		b.Run(fmt.Sprintf("share_ratio-leaf/leaves=%d", n), func(b *testing.B) {
			p, _, rng, _ := ownedBenchPool(b, n, benchPolicies[2].policy)
			timed(b, p, hostEvents(p, rng))
		})
	}
}

// BenchmarkOwnedPlan: the plan is given again with the enforcement
// switched (leaf, parent, ...): the whole tree, the ownership assignment
// and the layered targets are recomputed, as BenchmarkPlan does without
// ownership.
func BenchmarkOwnedPlan(b *testing.B) {
	for _, n := range ownedBenchSizes {
		b.Run(fmt.Sprintf("share_ratio/leaves=%d", n), func(b *testing.B) {
			p, _, _, cs := ownedBenchPool(b, n, benchPolicies[2].policy)
			timed(b, p, func(i int) events.Payload {
				return &events.PlanChange{Plan: events.Plan{Rules: int(domain.RulesV3), Policy: benchPolicies[2+(i+1)%2].policy, Consumers: cs}}
			})
		})
	}
}
