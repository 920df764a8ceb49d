package test

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
	"github.com/cluster-ledger/ledger/test/refmodel"
)

var diffRuns = flag.Int("diff.runs", 400, "random scenarios compared with the reference model")

// TestDifferential folds random scenarios without ownership, under every
// rules version (3 among them: it must decide as 2 does),
// through the engine and through
// the independent reference model (test/refmodel, written from the spec
// alone) and requires the same refusals, the same decisions in the same
// order on the same hosts with the same rules, and the same allocations
// and targets after every event.
func TestDifferential(t *testing.T) {
	for seed := uint64(1); seed <= uint64(*diffRuns); seed++ {
		for _, v := range domain.RulesVersions {
			sc := gen.Generate(gen.NewRand(seed), 40).UnderRules(int(v))
			if msg := compareWithReference(sc); msg != "" {
				t.Fatalf("seed %d, %v: %s\nevents:\n%s", seed, v, msg, dumpEvents(sc.Events))
			}
		}
	}
}

func compareWithReference(sc gen.Scenario) string {
	pool, ref := domain.NewPool("diff"), refmodel.NewRules3() // versions 1 and 2 as New, and 3 (ownership; gen.Generate names none)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seq := uint64(0)
	for i, ev := range sc.Events {
		at = at.Add(time.Second)
		got, gotErr := pool.Apply(domain.Event{Seq: seq + 1, Time: at, Payload: ev})
		want, wantErr := ref.Apply(seq+1, at, ev)
		if (gotErr != nil) != (wantErr != nil) {
			return fmt.Sprintf("event %d: engine error %v, reference error %v", i, gotErr, wantErr)
		}
		if gotErr != nil {
			continue
		}
		seq++
		if g, w := engineDecisions(got.Decisions), referenceDecisions(want); !slices.Equal(g, w) {
			return fmt.Sprintf("event %d decisions differ:\n engine:    %s\n reference: %s", i, strings.Join(g, "; "), strings.Join(w, "; "))
		}
		if msg := compareState(pool, ref); msg != "" {
			return fmt.Sprintf("event %d: %s", i, msg)
		}
	}
	return ""
}

func compareState(pool *domain.Pool, ref *refmodel.Model) string {
	alloc, target := map[string]int64{}, map[string]int64{}
	for _, c := range pool.Consumers() {
		if c.Leaf {
			alloc[c.Path], target[c.Path] = c.Allocated, c.Target
		}
	}
	if w := ref.Allocations(); !maps.Equal(alloc, w) {
		return fmt.Sprintf("allocations differ: engine %v, reference %v", alloc, w)
	}
	if w := ref.Targets(); !maps.Equal(target, w) {
		return fmt.Sprintf("targets differ: engine %v, reference %v", target, w)
	}
	hosts := map[string]map[string]int64{}
	for _, a := range pool.Allocations() {
		if hosts[a.Consumer] == nil {
			hosts[a.Consumer] = map[string]int64{}
		}
		hosts[a.Consumer][a.Host] = a.Slots
	}
	if w := ref.HostAllocations(); !maps.EqualFunc(hosts, w, maps.Equal) {
		return fmt.Sprintf("placement differs: engine %v, reference %v", hosts, w)
	}
	return ""
}

func engineDecisions(ds []domain.Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%s %s<-%s %s %d %s", d.Kind, d.Consumer, d.From, d.Host, d.Slots, d.Rule)
	}
	return out
}

func referenceDecisions(ds []refmodel.Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%s %s<-%s %s %d %s", d.Kind, d.Consumer, d.From, d.Host, d.Slots, d.Rule)
	}
	return out
}

func dumpEvents(evs []events.Payload) string {
	var b strings.Builder
	for i, ev := range evs {
		js, _ := json.Marshal(ev)
		fmt.Fprintf(&b, "  %d %s %s\n", i, ev.EventType(), js)
	}
	return b.String()
}
