package domain_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
)

// worstCasePlan is a plan at every limit of events/limits.go at once:
// MaxPlanConsumers consumers counting the parents, every leaf path
// MaxPathLen bytes long and MaxPathDepth deep, every field set (as the
// API's TestWorstCasePlan sends it).
func worstCasePlan(tb testing.TB) (events.Plan, []string) {
	seg := func(prefix string, i int) string { // 15 bytes
		s := fmt.Sprintf("%s%d", prefix, i)
		return s + strings.Repeat("x", 15-len(s))
	}
	big := int64(1) << 40
	grace := &events.Duration{Duration: 24 * time.Hour}
	full := func(path string, share int64) events.Consumer {
		return events.Consumer{Path: path, Share: &share, Priority: big, Max: &events.Max{Percent: 100, IsPercent: true},
			BorrowLimit: &big, ReclaimGrace: grace, LendGrace: grace}
	}
	var cs []events.Consumer
	chain := ""
	for d := range events.MaxPathDepth - 1 {
		chain += "/" + seg("p", d)
		cs = append(cs, full(chain, 1))
	}
	var leaves []string
	for i := range events.MaxPlanConsumers - len(cs) {
		path := chain + "/" + seg("l", i)
		if len(path) != events.MaxPathLen {
			tb.Fatalf("leaf path of %d bytes", len(path))
		}
		cs = append(cs, full(path, 2000))
		leaves = append(leaves, path)
	}
	return events.Plan{Policy: events.Policy{Reclaim: events.ReclaimShareRatio}, Consumers: cs}, leaves
}

// BenchmarkWorstCasePlan folds the worst-case plan on a pool with
// MaxHostsPerPool hosts and every leaf asking for slots, then a demand
// event naming every leaf: the engine's part of issue 9's "a plan at every
// limit is folded and projected in under a second" (the API's
// TestWorstCasePlan measures the whole stack).
func BenchmarkWorstCasePlan(b *testing.B) {
	plan, leaves := worstCasePlan(b)
	for _, kind := range []string{"plan", "demand-all"} {
		b.Run(kind, func(b *testing.B) {
			p := domain.NewPool("worst")
			seq := uint64(0)
			apply := func(ev events.Payload) {
				seq++
				if _, err := p.Apply(domain.Event{Seq: seq, Time: time.Unix(int64(seq), 0), Payload: ev}); err != nil {
					b.Fatal(err)
				}
			}
			for h := range events.MaxHostsPerPool {
				apply(&events.HostUp{Host: fmt.Sprintf("h%04d", h), Slots: 1})
			}
			apply(&events.PlanChange{Plan: plan})
			b.ResetTimer()
			for i := range b.N {
				if kind == "plan" {
					apply(&events.PlanChange{Plan: plan})
					continue
				}
				d := &events.Demand{Demands: make(map[string]int64, len(leaves))}
				for _, l := range leaves {
					d.Demands[l] = int64(1 + (i+len(l))%3)
				}
				apply(d)
			}
		})
	}
}
