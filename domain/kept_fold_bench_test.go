package domain_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
)

// ownedBenchPool builds the ownership benchmark pool
// (gen.OwnedBench) and a first round of demand (0..4 a leaf).
func ownedBenchPool(b testing.TB, n int, policy events.Policy) (*domain.Pool, []string, *rand.Rand, []events.Consumer) {
	b.Helper()
	return ownedBenchPoolAs(b, n, policy, domain.RulesV3)
}

// ownedBenchPoolAs is ownedBenchPool under rules version v (the version
// in development folds in a pool made with WithDevelopmentRules).
func ownedBenchPoolAs(b testing.TB, n int, policy events.Policy, v domain.RulesVersion) (*domain.Pool, []string, *rand.Rand, []events.Consumer) {
	b.Helper()
	hosts, cs, leaves := gen.OwnedBench(n)
	p, rng := ownedPool(b, hosts, cs, leaves, policy, v)
	return p, leaves, rng, cs
}

// ownedPool folds hosts, a plan of cs under policy and rules v, and a
// first round of demand (0..4 a leaf).
func ownedPool(b testing.TB, hosts []events.Payload, cs []events.Consumer, leaves []string, policy events.Policy, v domain.RulesVersion) (*domain.Pool, *rand.Rand) {
	b.Helper()
	p := domain.NewPool("bench", domain.WithDevelopmentRules())
	seq := uint64(0)
	apply := func(ev events.Payload) {
		seq++
		if _, err := p.Apply(domain.Event{Seq: seq, Time: time.Unix(int64(seq), 0), Payload: ev}); err != nil {
			b.Fatal(err)
		}
	}
	for _, h := range hosts { // before the plan: one assignment, not one per host
		apply(h)
	}
	apply(&events.PlanChange{Plan: events.Plan{Rules: int(v), Policy: policy, Consumers: cs}})
	rng := rand.New(rand.NewPCG(1, 2))
	d := &events.Demand{Demands: map[string]int64{}}
	for _, l := range leaves {
		d.Demands[l] = int64(rng.IntN(5))
	}
	apply(d)
	return p, rng
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

// BenchmarkOwnedDemandRules4 is BenchmarkOwnedDemand under rules 4 (in
// development), beside it in make bench: version 4 under priority seats
// each pool by rounds inside the fold (ruling 12) and takes the full fold
// at every event.
func BenchmarkOwnedDemandRules4(b *testing.B) {
	for _, pol := range benchPolicies {
		for _, n := range ownedBenchSizes {
			b.Run(fmt.Sprintf("%s/leaves=%d", pol.name, n), func(b *testing.B) {
				p, leaves, rng, _ := ownedBenchPoolAs(b, n, pol.policy, domain.RulesV4)
				timed(b, p, demandEvents(leaves, rng))
			})
		}
	}
}

// BenchmarkOwnedGroupDemand is BenchmarkOwnedDemand on a pool whose
// owners own group slots spread over every host (gen.OwnedGroups), where
// the leaves' keeps compete for the owners' parts.
func BenchmarkOwnedGroupDemand(b *testing.B) {
	groupBench(b, func(_ *domain.Pool, leaves []string, rng *rand.Rand) func(int) events.Payload {
		return demandEvents(leaves, rng)
	})
}

// BenchmarkOwnedGroupHost is BenchmarkOwnedHost on gen.OwnedGroups' pool.
func BenchmarkOwnedGroupHost(b *testing.B) {
	groupBench(b, func(p *domain.Pool, _ []string, rng *rand.Rand) func(int) events.Payload { return hostEvents(p, rng) })
}

// groupBench times the events next gives on gen.OwnedGroups' pool, at
// each of ownedBenchSizes.
func groupBench(b *testing.B, next func(p *domain.Pool, leaves []string, rng *rand.Rand) func(int) events.Payload) {
	for _, n := range ownedBenchSizes {
		b.Run(fmt.Sprintf("share_ratio-leaf/leaves=%d", n), func(b *testing.B) {
			hosts, cs, leaves := gen.OwnedGroups(n)
			p, rng := ownedPool(b, hosts, cs, leaves, benchPolicies[2].policy, domain.RulesV3)
			timed(b, p, next(p, leaves, rng))
		})
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
