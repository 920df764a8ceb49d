package test

import (
	"errors"
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

var (
	v4DiffRuns = flag.Int("v4.runs", 300, "differentialV4: random logs of each generator compared under rules 4 (the issue asks for 1,000 per generator, CI 300)")
	v4DiffSeed = flag.Uint64("v4.seed", 0, "differentialV4: compare only this log of each generator, and print its events")
	v4DiffShow = flag.Int("v4.show", 5, "differentialV4: how many differing logs to print")
)

// differentialV4 is the strict differential test of rules version 4
// (issue 24): random logs of three generators, gen.Generate (no
// ownership), gen.GenerateOwned and withOwnership (this package's), every
// plan renamed to rules 4, folded through the engine and through the
// reference model (refmodel.NewRules4, written from rules-v4.md alone),
// event by event: the same refusal, the same decisions in the same order
// (kind, consumer, from, host, slots, rule and deadline) and the same
// allocations per (consumer, host). Every log must agree: any difference
// fails, and the first differences are printed (generator, seed, event,
// expected (reference) vs found (engine)); -v4.seed=N prints a log.
//
// It is not a Test yet: the engine folds rules 4 in development
// (domain.WithDevelopmentRules) with rulings 1, 4, 7, 9, 10, 11 and 13 of parts
// A and B built, not 12. On 2026-11-27, 200 logs of each
// generator: every log without ownership agrees, 114 of 400 with ownership
// do, counting decisions without their deadlines (the model gives a
// reclaim of reclaim_grace 0 no deadline, where section 6 says time + 0,
// as the engine does and the spec's part C writes "+0s"). To switch it on
// once the engine builds every ruling, add to this file:
//
//	func TestDifferentialV4(t *testing.T) { differentialV4(t) }
//
// and run it with -v4.runs=1000 for the count (300, the default,
// in CI). Part D's plan fields (priority_bands, preemptable, share: 0) are
// not drawn: events.Plan does not carry them yet; once it does,
// refmodel's ownedPlanOf maps them (OwnedPlan's PriorityBands and
// Preemptable) and the generators can draw them.
func differentialV4(t *testing.T) {
	generators := []struct {
		name string
		make func(seed uint64) gen.Scenario
	}{
		{"gen.Generate", func(seed uint64) gen.Scenario { return gen.Generate(gen.NewRand(seed), 40) }},
		{"gen.GenerateOwned", func(seed uint64) gen.Scenario { return gen.GenerateOwned(gen.NewRand(seed), 40) }},
		{"withOwnership", func(seed uint64) gen.Scenario { return withOwnership(gen.Generate(gen.NewRand(seed), 40), seed) }},
	}
	first, last := uint64(1), uint64(*v4DiffRuns)
	if *v4DiffSeed != 0 {
		first, last = *v4DiffSeed, *v4DiffSeed
	}
	logs, agree := 0, 0
	var diffs []string
	for _, g := range generators {
		for seed := first; seed <= last; seed++ {
			sc := g.make(seed)
			sc.Events = rules4(sc.Events)
			logs++
			msg := compareV4WithReference(sc)
			if msg == "" {
				agree++
				continue
			}
			d := fmt.Sprintf("%s seed %d (%s): %s", g.name, seed, policyKey(sc.Events[0]), msg)
			if len(diffs) == 0 || *v4DiffSeed != 0 {
				d += "\nevents:\n" + dumpEvents(sc.Events)
			}
			diffs = append(diffs, d)
		}
	}
	t.Logf("rules 4: %d of %d logs agree exactly", agree, logs)
	for i, d := range diffs {
		if i == *v4DiffShow {
			t.Errorf("... and %d more logs differ", len(diffs)-i)
			break
		}
		t.Errorf("%s", d)
	}
}

// rules4 renames every plan of a log to rules version 4.
func rules4(evs []events.Payload) []events.Payload {
	out := make([]events.Payload, len(evs))
	for i, p := range evs {
		if pc, ok := p.(*events.PlanChange); ok {
			q := *pc
			q.Plan.Rules = 4
			p = &q
		}
		out[i] = p
	}
	return out
}

// compareV4WithReference folds sc through the engine and the model
// (rules 4) and returns the first difference, "" when none.
func compareV4WithReference(sc gen.Scenario, asEngineOn ...int) string {
	pool, ref := domain.NewPool("diffv4", domain.WithDevelopmentRules()), refmodel.NewRules4().AsEngineOn(asEngineOn...)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seq := uint64(0)
	for i, ev := range sc.Events {
		at = at.Add(time.Second)
		var got domain.Result
		var gotErr error
		if panicked := func() (p any) {
			defer func() { p = recover() }()
			got, gotErr = pool.Apply(domain.Event{Seq: seq + 1, Time: at, Payload: ev})
			return nil
		}(); panicked != nil {
			return fmt.Sprintf("event %d (%s): engine panicked: %v", i, ev.EventType(), panicked)
		}
		want, wantErr := ref.Apply(seq+1, at, ev)
		if errors.Is(wantErr, refmodel.ErrNotModelled) {
			return fmt.Sprintf("event %d (%s): not modelled: %v", i, ev.EventType(), wantErr)
		}
		if (gotErr != nil) != (wantErr != nil) {
			return fmt.Sprintf("event %d (%s): refusal differs:\n expected (reference): %v\n found (engine):       %v",
				i, ev.EventType(), wantErr, gotErr)
		}
		if gotErr != nil {
			continue
		}
		seq++
		g, w := engineDecisionsV4(got.Decisions), referenceDecisionsV4(want)
		if v4Canon {
			g, w = canonicalV4(g), canonicalV4(w)
		}
		if !slices.Equal(g, w) {
			return fmt.Sprintf("event %d (%s, seq %d): decisions differ:\n expected (reference): %s\n found (engine):       %s",
				i, ev.EventType(), seq, strings.Join(w, "; "), strings.Join(g, "; "))
		}
		if h, w := engineHosts(pool), ref.HostAllocations(); !maps.EqualFunc(h, w, maps.Equal) {
			return fmt.Sprintf("event %d (%s, seq %d): allocations per (consumer, host) differ:\n expected (reference): %v\n found (engine):       %v",
				i, ev.EventType(), seq, w, h)
		}
	}
	return ""
}

// engineDecisionsV4 and referenceDecisionsV4 print decisions with their
// deadlines (rules 4 settles them: rulings 8, 10, 11, 13).
func engineDecisionsV4(ds []domain.Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		dl := "-"
		if d.Deadline != nil {
			dl = d.Deadline.UTC().Format(time.RFC3339)
		}
		out[i] = fmt.Sprintf("%s %s<-%s %s %d %s %s", d.Kind, d.Consumer, d.From, d.Host, d.Slots, d.Rule, dl)
	}
	return out
}

func referenceDecisionsV4(ds []refmodel.Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		dl := "-"
		if !d.Deadline.IsZero() {
			dl = d.Deadline.UTC().Format(time.RFC3339)
		}
		out[i] = fmt.Sprintf("%s %s<-%s %s %d %s %s", d.Kind, d.Consumer, d.From, d.Host, d.Slots, d.Rule, dl)
	}
	return out
}

// differentialV4 is not called by a Test yet (see its comment); this
// keeps it referenced.
var _ = differentialV4

var v4Canon = false

// canonicalV4 sums an event's decisions per (kind, consumer, from, host,
// rule, deadline) and sorts them.
func canonicalV4(ds []string) []string {
	sum := map[string]int64{}
	for _, d := range ds {
		f := strings.Fields(d)
		var n int64
		fmt.Sscan(f[3], &n)
		k := strings.Join(append(append([]string{}, f[:3]...), f[4:]...), " ")
		sum[k] += n
	}
	var out []string
	for k, n := range sum {
		if n != 0 {
			out = append(out, fmt.Sprintf("%s %d", k, n))
		}
	}
	slices.Sort(out)
	return out
}
