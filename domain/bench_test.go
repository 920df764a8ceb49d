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

// benchPool builds a 3-level tree of n leaves (fanout about the cube root
// of n), n/10 hosts of 20 slots (2 slots a leaf), and a first round of
// demand (0..4 a leaf) so the pool is busy: some leaves borrow, some wait.
func benchPool(b *testing.B, n int, policy events.Policy) (*domain.Pool, []string, *rand.Rand) {
	b.Helper()
	return benchPoolWith(b, n, policy, nil)
}

// benchPoolWith is benchPool with the plan changed by edit (nil: none)
// and, when edit is given, the rules version in development.
func benchPoolWith(b *testing.B, n int, policy events.Policy, edit func(*events.Plan)) (*domain.Pool, []string, *rand.Rand) {
	b.Helper()
	f := 1
	for f*f*f < n {
		f++
	}
	var cs []events.Consumer
	var leaves []string
	for i := 0; i < f && len(leaves) < n; i++ {
		for j := 0; j < f && len(leaves) < n; j++ {
			for k := 0; k < f && len(leaves) < n; k++ {
				share := int64(1 + (i+j+k)%4)
				path := fmt.Sprintf("/t%02d/m%02d/l%02d", i, j, k)
				cs = append(cs, events.Consumer{Path: path, Share: &share, Priority: int64(k % 3)})
				leaves = append(leaves, path)
			}
		}
	}
	plan := events.Plan{Policy: policy, Consumers: cs}
	var opts []domain.PoolOption
	if edit != nil {
		edit(&plan)
		opts = append(opts, domain.WithDevelopmentRules())
	}
	p := domain.NewPool("bench", opts...)
	seq := uint64(0)
	apply := func(ev events.Payload) {
		seq++
		if _, err := p.Apply(domain.Event{Seq: seq, Time: time.Unix(int64(seq), 0), Payload: ev}); err != nil {
			b.Fatal(err)
		}
	}
	apply(&events.PlanChange{Plan: plan})
	for h := 0; h < max(1, n/10); h++ {
		apply(&events.HostUp{Host: fmt.Sprintf("h%05d", h), Slots: 20})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	d := &events.Demand{Demands: map[string]int64{}}
	for _, l := range leaves {
		d.Demands[l] = int64(rng.IntN(5))
	}
	apply(d)
	return p, leaves, rng
}

// timed applies events from next, timing each Apply, and reports ns/event
// as the mean plus p50 and p99.
func timed(b *testing.B, p *domain.Pool, next func(i int) events.Payload) {
	b.Helper()
	lat := make([]time.Duration, 0, b.N)
	seq := p.Seq()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ev := next(i)
		seq++
		start := time.Now()
		_, err := p.Apply(domain.Event{Seq: seq, Time: time.Unix(int64(seq), 0), Payload: ev})
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns/event")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns/event")
}

var benchPolicies = []struct {
	name   string
	policy events.Policy
}{
	{"priority-leaf", events.Policy{Reclaim: events.ReclaimPriority, Enforcement: events.EnforcementLeaf}},
	{"priority-parent", events.Policy{Reclaim: events.ReclaimPriority, Enforcement: events.EnforcementParent}},
	{"share_ratio-leaf", events.Policy{Reclaim: events.ReclaimShareRatio, Enforcement: events.EnforcementLeaf}},
	{"share_ratio-parent", events.Policy{Reclaim: events.ReclaimShareRatio, Enforcement: events.EnforcementParent}},
}

var benchSizes = []int{10, 1000, 10000}

// BenchmarkDemand: one leaf's demand changes (0..6) per event.
func BenchmarkDemand(b *testing.B) {
	for _, pol := range benchPolicies {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/leaves=%d", pol.name, n), func(b *testing.B) {
				p, leaves, rng := benchPool(b, n, pol.policy)
				timed(b, p, demandEvents(leaves, rng))
			})
		}
	}
}

// BenchmarkYARNDemand: BenchmarkDemand's events under rules 4's plan
// fields (in development): share_ratio with priority bands and a zero
// share in every fourth branch (the incremental passes, as without them),
// and with a non-preemptable leaf in every tenth branch (floors follow the
// allocations: the targets are recomputed over the whole tree every event,
// decisions.md #262).
func BenchmarkYARNDemand(b *testing.B) {
	yes, no, zero := true, false, int64(0)
	bands := func(pl *events.Plan) {
		pl.Rules, pl.Policy.PriorityBands = 4, &yes
		for i := range pl.Consumers {
			if i%4 == 3 {
				pl.Consumers[i].Share = &zero
			}
		}
	}
	pins := func(pl *events.Plan) {
		pl.Rules = 4
		for i := range pl.Consumers {
			if i%10 == 0 {
				pl.Consumers[i].Preemptable = &no
			}
		}
	}
	for _, c := range []struct {
		name string
		edit func(*events.Plan)
	}{{"bands-zero", bands}, {"pins", pins}} {
		for _, pol := range benchPolicies[2:] {
			for _, n := range benchSizes[1:] {
				b.Run(fmt.Sprintf("%s/%s/leaves=%d", c.name, pol.name, n), func(b *testing.B) {
					p, leaves, rng := benchPoolWith(b, n, pol.policy, c.edit)
					timed(b, p, demandEvents(leaves, rng))
				})
			}
		}
	}
}

// BenchmarkRelease: a leaf holding slots releases one; every other event
// a demand tops a leaf up again so the pool stays busy.
func BenchmarkRelease(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("priority-leaf/leaves=%d", n), func(b *testing.B) {
			p, leaves, rng := benchPool(b, n, benchPolicies[0].policy)
			timed(b, p, releaseEvents(p, leaves, rng))
		})
	}
}

// BenchmarkHost: a host goes down, then comes back, alternately.
func BenchmarkHost(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("priority-leaf/leaves=%d", n), func(b *testing.B) {
			p, _, rng := benchPool(b, n, benchPolicies[0].policy)
			timed(b, p, hostEvents(p, rng))
		})
	}
}

// BenchmarkPlan: the plan is replaced by the same tree with the other
// enforcement level, alternately.
func BenchmarkPlan(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("priority/leaves=%d", n), func(b *testing.B) {
			p, leaves, _ := benchPool(b, n, benchPolicies[0].policy)
			cs := make([]events.Consumer, len(leaves))
			for i, l := range leaves {
				cs[i] = events.Consumer{Path: l}
			}
			timed(b, p, func(i int) events.Payload {
				pol := benchPolicies[i%2].policy
				return &events.PlanChange{Plan: events.Plan{Policy: pol, Consumers: cs}}
			})
		})
	}
}

// demandEvents: one leaf's demand changes (0..6) per event.
func demandEvents(leaves []string, rng *rand.Rand) func(int) events.Payload {
	return func(int) events.Payload {
		return &events.Demand{Demands: map[string]int64{leaves[rng.IntN(len(leaves))]: int64(rng.IntN(7))}}
	}
}

// releaseEvents: a leaf holding slots releases one; every other event a
// demand tops a leaf up again so the pool stays busy.
func releaseEvents(p *domain.Pool, leaves []string, rng *rand.Rand) func(int) events.Payload {
	return func(i int) events.Payload {
		l := leaves[rng.IntN(len(leaves))]
		c, _ := p.Consumer(l)
		if i%2 == 1 || c.Allocated == 0 {
			return &events.Demand{Demands: map[string]int64{l: c.Demand + 1}}
		}
		return &events.Release{Consumer: l, Slots: 1}
	}
}

// hostEvents: a host goes down, then comes back, alternately.
func hostEvents(p *domain.Pool, rng *rand.Rand) func(int) events.Payload {
	var down *events.HostUp
	return func(int) events.Payload {
		if down != nil {
			up := down
			down = nil
			return up
		}
		hs := p.Hosts()
		h := hs[rng.IntN(len(hs))]
		down = &events.HostUp{Host: h.Name, Slots: h.Slots}
		return &events.HostDown{Host: h.Name}
	}
}
