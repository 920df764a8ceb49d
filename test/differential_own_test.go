package test

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
	"github.com/cluster-ledger/ledger/test/refmodel"
)

var (
	ownDiffRuns     = flag.Int("own.runs", 150, "TestDifferentialOwnership: random ownership logs of each generator compared with the reference model")
	ownDiffSeed     = flag.Uint64("own.seed", 0, "TestDifferentialOwnership: compare only this log, and print its events")
	ownDiffShow     = flag.Int("own.show", 5, "TestDifferentialOwnership: how many differing logs to print")
	ownDiffStrict   = flag.Bool("own.strict", false, "TestDifferentialOwnership: fail on any differing log (the goal once rules v3 is released), not only below the agreement floor")
	ownDiffAnyOrder = flag.Bool("own.anyorder", false, "TestDifferentialOwnership: compare each event's decisions as a multiset (to see past differences of order)")
	ownDiffTotals   = flag.Bool("own.totals", false, "TestDifferentialOwnership: compare only each leaf's total allocation after every event (to see past differences of placement and decision order)")
)

// TestDifferentialOwnership folds random logs WITH ownership
// (docs/rules.md#ownership: whole, partial and group entries, preferences,
// lend, lend_grace and reclaim_grace, reclaim_for_preference), every plan
// naming rules version 3 (the version that implements ownership), under every
// policy (priority and share_ratio, leaf and parent, balance and preemption
// on and off), through the engine and through the reference model
// (refmodel.NewRules3, written from the spec alone), and requires after every
// event the same refusal, the same decisions in the same order (kind,
// consumer, from, host, slots, rule) and the same allocations per (consumer,
// host).
//
// Two generators, -own.runs logs each: gen.GenerateOwned (the project's)
// and withOwnership (this file's: gen.Generate's logs with ownership
// added by a generator of its own, so the engine's generator is not the
// only judge of what is drawn).
//
// Every log is compared to its first difference; the test then reports
// how many logs agree, per generator and policy of the log's first plan,
// and prints the first differences (generator, log seed, event index,
// expected (reference) vs found (engine)). The engine and the model still
// read many orders the spec leaves open differently (docs/decisions.md
// #104-#106 sort the differences), so the test fails when agreement falls
// below ownAgreementFloor, a ratchet raised as differences are settled;
// -own.strict fails on any difference. Each log is also compared on the
// leaves' totals alone after every event (how many slots each holds,
// wherever they sit), with a floor of its own, ownTotalsFloor. A log the model refuses
// as not modelled is counted as skipped, never silently: more than 2%
// skipped fails the test. -own.seed=N compares the logs of seed N only
// and prints their events.
func TestDifferentialOwnership(t *testing.T) {
	type tally struct{ agree, totals, total int }
	perPolicy := map[string]*tally{}
	var diffs []string
	skipped := 0
	first, last := uint64(1), uint64(*ownDiffRuns)
	if *ownDiffSeed != 0 {
		first, last = *ownDiffSeed, *ownDiffSeed
	}
	generators := []struct {
		name string
		make func(seed uint64) gen.Scenario
	}{
		{"gen.GenerateOwned", func(seed uint64) gen.Scenario { return gen.GenerateOwned(gen.NewRand(seed), 40) }},
		{"withOwnership", func(seed uint64) gen.Scenario { return withOwnership(gen.Generate(gen.NewRand(seed), 40), seed) }},
	}
	logs := 0
	for _, g := range generators {
		for seed := first; seed <= last; seed++ {
			sc := g.make(seed)
			logs++
			key := g.name + " " + policyKey(sc.Events[0])
			if perPolicy[key] == nil {
				perPolicy[key] = &tally{}
			}
			msg, notModelled := compareOwnedWithReference(sc, *ownDiffTotals)
			if totalsMsg, _ := compareOwnedWithReference(sc, true); totalsMsg == "" {
				perPolicy[key].totals++
			}
			if notModelled {
				skipped++
				continue
			}
			perPolicy[key].total++
			if msg == "" {
				perPolicy[key].agree++
				continue
			}
			d := fmt.Sprintf("%s seed %d (%s): %s", g.name, seed, policyKey(sc.Events[0]), msg)
			if len(diffs) == 0 || *ownDiffSeed != 0 {
				d += "\nevents:\n" + dumpEvents(sc.Events)
			}
			diffs = append(diffs, d)
		}
	}
	var keys []string
	for k := range perPolicy {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	agree, totals, total := 0, 0, 0
	for _, k := range keys {
		agree, totals, total = agree+perPolicy[k].agree, totals+perPolicy[k].totals, total+perPolicy[k].total
		t.Logf("%-70s %4d of %4d logs agree (totals: %4d)", k, perPolicy[k].agree, perPolicy[k].total, perPolicy[k].totals)
	}
	t.Logf("all policies: %d of %d logs agree, %d on the leaves' totals, %d skipped as not modelled", agree, total, totals, skipped)
	if skipped*50 > logs {
		t.Errorf("%d of %d logs skipped as not modelled by the reference model", skipped, logs)
	}
	report := t.Logf
	if *ownDiffStrict || (*ownDiffSeed == 0 && *ownDiffRuns == 150 && (agree < ownAgreementFloor || totals < ownTotalsFloor)) {
		report = t.Errorf
		t.Errorf("%d of %d logs agree (floor %d), %d on the totals (floor %d)", agree, total, ownAgreementFloor, totals, ownTotalsFloor)
	}
	for i, d := range diffs {
		if i == *ownDiffShow {
			report("... and %d more logs differ", len(diffs)-i)
			break
		}
		report("%s", d)
	}
}

// ownAgreementFloor is how many of the 300 default logs (150 per
// generator) agree exactly with the reference model at least; raise it
// whenever a change settles a difference.
const ownAgreementFloor = 62

// ownTotalsFloor is how many of them agree on every leaf's total after
// every event at least.
const ownTotalsFloor = 212

// policyKey names the policy of a log's first plan.
func policyKey(p events.Payload) string {
	pc, ok := p.(*events.PlanChange)
	if !ok {
		return "no plan"
	}
	pol := pc.Plan.Policy
	k := fmt.Sprintf("%s/%s", pol.ReclaimOrDefault(), pol.EnforcementOrDefault())
	if pol.ReclaimOrDefault() == events.ReclaimShareRatio {
		k += fmt.Sprintf(" balance=%v", pol.BalanceOrDefault())
	}
	return k + fmt.Sprintf(" preemption=%v", pol.PreemptionOrDefault())
}

// compareOwnedWithReference folds sc through the engine and the model and
// returns the first difference ("" when none), or notModelled when the
// model refused an event as not modelled (the log is then skipped).
func compareOwnedWithReference(sc gen.Scenario, totalsOnly bool) (msg string, notModelled bool) {
	pool, ref := domain.NewPool("diffown"), refmodel.NewRules3()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seq := uint64(0)
	hostsAgreed, inForce := true, ""
	for i, ev := range sc.Events {
		at = at.Add(time.Second)
		var got domain.Result
		var gotErr error
		if panicked := func() (p any) {
			defer func() { p = recover() }()
			got, gotErr = pool.Apply(domain.Event{Seq: seq + 1, Time: at, Payload: ev})
			return nil
		}(); panicked != nil {
			return fmt.Sprintf("event %d (%s): engine panicked: %v", i, ev.EventType(), panicked), false
		}
		want, wantErr := ref.Apply(seq+1, at, ev)
		if errors.Is(wantErr, refmodel.ErrNotModelled) {
			return "", true
		}
		if (gotErr != nil) != (wantErr != nil) {
			return fmt.Sprintf("event %d (%s): refusal differs:\n expected (reference): %v\n found (engine):       %v",
				i, ev.EventType(), wantErr, gotErr), false
		}
		if gotErr != nil {
			continue
		}
		if pc, ok := ev.(*events.PlanChange); ok {
			inForce = policyKey(pc)
		}
		seq++
		if totalsOnly {
			w := ref.Allocations()
			maps.DeleteFunc(w, func(_ string, v int64) bool { return v == 0 })
			if g := engineTotals(pool); !maps.Equal(g, w) {
				where := "hosts agreed before"
				if !hostsAgreed {
					where = "hosts differed before"
				}
				where += ", policy " + inForce
				return fmt.Sprintf("event %d (%s, seq %d; %s): allocations per consumer differ:\n expected (reference): %v\n found (engine):       %v",
					i, ev.EventType(), seq, where, w, g), false
			}
			hostsAgreed = hostsAgreed && maps.EqualFunc(engineHosts(pool), ref.HostAllocations(), maps.Equal)
			continue
		}
		if g, w := engineDecisions(got.Decisions), referenceDecisions(want); !slices.Equal(g, w) {
			gs, ws := slices.Sorted(slices.Values(g)), slices.Sorted(slices.Values(w))
			orderOnly := slices.Equal(gs, ws)
			if !orderOnly || !*ownDiffAnyOrder {
				what := "decisions differ"
				if orderOnly {
					what = "decisions differ in order only"
				}
				return fmt.Sprintf("event %d (%s, seq %d): %s:\n expected (reference): %s\n found (engine):       %s",
					i, ev.EventType(), seq, what, strings.Join(w, "; "), strings.Join(g, "; ")), false
			}
		}
		hosts := engineHosts(pool)
		if w := ref.HostAllocations(); !maps.EqualFunc(hosts, w, maps.Equal) {
			return fmt.Sprintf("event %d (%s, seq %d): allocations per (consumer, host) differ:\n expected (reference): %v\n found (engine):       %v",
				i, ev.EventType(), seq, w, hosts), false
		}
	}
	return "", false
}

// engineTotals is every leaf's total allocation, as the model reports
// them (leaves holding nothing left out).
func engineTotals(pool *domain.Pool) map[string]int64 {
	out := map[string]int64{}
	for _, a := range pool.Allocations() {
		if a.Slots != 0 {
			out[a.Consumer] += a.Slots
		}
	}
	return out
}

// engineHosts is every leaf's allocation per host, as the model reports
// them.
func engineHosts(pool *domain.Pool) map[string]map[string]int64 {
	hosts := map[string]map[string]int64{}
	for _, a := range pool.Allocations() {
		if a.Slots == 0 {
			continue
		}
		if hosts[a.Consumer] == nil {
			hosts[a.Consumer] = map[string]int64{}
		}
		hosts[a.Consumer][a.Host] += a.Slots
	}
	return hosts
}

// withOwnership returns sc with ownership added to its plans, drawn from
// a generator of its own seeded by seed (gen's draws are unchanged):
// every plan names rules 3; hosts h1, h3, h5, ... are in group "gpu",
// the others in "default"; top-level consumers own hosts (whole or part)
// and group slots, children a part of what their parent names (about one
// plan in twenty has a child owning under a parent that owns nothing,
// which is refused); lend, lend_grace, reclaim_grace, preferences and
// reclaim_for_preference vary.
func withOwnership(sc gen.Scenario, seed uint64) gen.Scenario {
	rng := rand.New(rand.NewPCG(seed, 0x6f776e))
	out := sc
	out.Events = make([]events.Payload, len(sc.Events))
	var hosts []string
	for _, p := range sc.Events {
		if h, ok := p.(*events.HostUp); ok && !slices.Contains(hosts, h.Host) {
			hosts = append(hosts, h.Host)
		}
	}
	if len(hosts) == 0 {
		hosts = []string{"h1"}
	}
	for i, p := range sc.Events {
		switch e := p.(type) {
		case *events.PlanChange:
			q := *e
			q.Plan = ownedPlan(rng, e.Plan, hosts)
			p = &q
		case *events.HostUp:
			h := *e
			h.Group = hostGroup(h.Host)
			p = &h
		}
		out.Events[i] = p
	}
	return out
}

func hostGroup(name string) string {
	var n int
	if _, err := fmt.Sscanf(name, "h%d", &n); err == nil && n%2 == 1 {
		return "gpu"
	}
	return "default"
}

func ownedPlan(rng *rand.Rand, pl events.Plan, hosts []string) events.Plan {
	out := pl
	out.Rules = 3
	out.Consumers = slices.Clone(pl.Consumers)
	switch rng.IntN(3) {
	case 0:
		out.Policy.ReclaimForPreference = boolPtr(true)
	case 1:
		out.Policy.ReclaimForPreference = boolPtr(false)
	}
	grace := func() *events.Duration {
		return []*events.Duration{nil, nil, {Duration: time.Minute}, {Duration: 5 * time.Minute}}[rng.IntN(4)]
	}
	index := map[string]int{}
	for i, c := range out.Consumers {
		index[c.Path] = i
	}
	parentOf := func(p string) string { return p[:strings.LastIndex(p, "/")] }
	// listed in preorder by gen: a parent comes before its children
	for i := range out.Consumers {
		c := &out.Consumers[i]
		c.LendGrace, c.ReclaimGrace = grace(), grace()
		if rng.IntN(8) == 0 {
			c.Lend = boolPtr(rng.IntN(3) > 0)
		}
		var parent *events.Consumer
		if j, ok := index[parentOf(c.Path)]; ok {
			parent = &out.Consumers[j]
		}
		switch {
		case parent == nil && rng.IntN(2) == 0:
			for k := 1 + rng.IntN(2); k > 0; k-- {
				c.Own = append(c.Own, topEntry(rng, hosts, c.Own))
			}
		case parent != nil && len(parent.Own) > 0 && rng.IntN(2) == 0:
			siblings := 0
			for _, o := range out.Consumers {
				if parentOf(o.Path) == parent.Path {
					siblings++
				}
			}
			for _, pe := range parent.Own {
				if e, ok := childEntry(rng, pe, siblings); ok && rng.IntN(2) == 0 {
					c.Own = append(c.Own, e)
				}
			}
		case parent != nil && len(parent.Own) == 0 && rng.IntN(20) == 0:
			c.Own = []events.OwnEntry{{Host: hosts[rng.IntN(len(hosts))]}} // refused: its parent owns nothing
		}
		for k := range c.Own {
			if rng.IntN(3) == 0 {
				c.Own[k].Preference = int64Ptr(int64(1 + rng.IntN(10)))
			}
		}
	}
	return out
}

// topEntry draws a top-level consumer's entry: a whole host, part of one,
// or slots of a group; never a host its list already names.
func topEntry(rng *rand.Rand, hosts []string, have []events.OwnEntry) events.OwnEntry {
	h := hosts[rng.IntN(len(hosts))]
	named := slices.ContainsFunc(have, func(e events.OwnEntry) bool { return e.Host == h })
	switch r := rng.IntN(3); {
	case r == 2 || named:
		return events.OwnEntry{Group: []string{"default", "gpu"}[rng.IntN(2)], Slots: int64Ptr(int64(1 + rng.IntN(8)))}
	case r == 0:
		return events.OwnEntry{Host: h}
	default:
		return events.OwnEntry{Host: h, Slots: int64Ptr(int64(1 + rng.IntN(6)))}
	}
}

// childEntry draws a child's entry within its parent's entry pe: a part
// of the parent's host or group, at most the parent's slots over the
// number of siblings, so the children never own more than their parent
// (false when that is less than one slot).
func childEntry(rng *rand.Rand, pe events.OwnEntry, siblings int) (events.OwnEntry, bool) {
	n := int64(1 + rng.IntN(3))
	if pe.Slots != nil {
		n = min(n, *pe.Slots/int64(siblings))
	}
	return events.OwnEntry{Host: pe.Host, Group: pe.Group, Slots: int64Ptr(n)}, n > 0
}

func boolPtr(v bool) *bool    { return &v }
func int64Ptr(v int64) *int64 { return &v }
