package domain

import (
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
)

// TestKeptFoldMatchesFull: on random logs with ownership whose plans the
// kept fold can take (incFoldable: share_ratio with preemption and
// balance, no max, one class group), after every event the layered
// targets equal computeLayeredTargets' from scratch (each leaf's own
// layer, total and part of every pool by lender), and the placement over
// the leaves that are not quiet makes the moves of a placement over
// every leaf from the same state.
var keptRuns = flag.Int("kept.runs", 400, "TestKeptFoldMatchesFull: random logs folded")

func TestKeptFoldMatchesFull(t *testing.T) {
	reclaims := []string{"share_ratio", "priority"}
	runs := *keptRuns
	if testing.Short() {
		runs = min(runs, 80)
	}
	folds, places := 0, 0
	for seed := range uint64(runs) {
		// Every fourth log under the rules version in development, whose
		// placement differs (rulings 7, 9, 10, 11, 13).
		var rules []RulesVersion
		if seed%4 == 3 {
			rules = append(rules, RulesDevelopment)
		}
		f, pl, err := foldKept(gen.GenerateOwned(gen.NewRand(seed+71000), 60), seed%2 == 1, reclaims[seed/2%2], rules...)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		folds, places = folds+f, places+pl
	}
	if folds < runs*10 || places < runs*10 {
		t.Fatalf("only %d folds and %d placements compared", folds, places)
	}
	t.Logf("%d folds and %d placements compared", folds, places)
}

// TestKeptFoldMatchesFullLarge: the same on the benchmarks' pool
// (ownedBenchPool's shape at 600 leaves), demand and release events.
func TestKeptFoldMatchesFullLarge(t *testing.T) {
	for _, reclaim := range []string{"share_ratio", "priority"} {
		f, pl, err := foldKept(benchShaped(600, 400), false, reclaim)
		if err != nil {
			t.Fatalf("%s: %v", reclaim, err)
		}
		if f < 300 || pl < 300 { // releases of a leaf holding nothing are refused
			t.Fatalf("%s: only %d folds and %d placements compared", reclaim, f, pl)
		}
	}
}

// FuzzKeptFold: the kept fold and placement against the full ones on
// logs drawn from the fuzzer's bytes.
func FuzzKeptFold(f *testing.F) {
	for _, seed := range [][]byte{{}, {1, 2, 3, 4, 5, 6, 7, 8}, bytes.Repeat([]byte{0xff, 0x10, 0x33}, 40)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		reclaim := "share_ratio"
		if len(data)%4 >= 2 {
			reclaim = "priority"
		}
		if _, _, err := foldKept(gen.GenerateOwned(gen.NewBytes(data), 30), len(data)%2 == 1, reclaim); err != nil {
			t.Fatal(err)
		}
	})
}

// foldKept folds a log, its plans made foldable (foldablePlan), twice in
// lockstep: by a pool that keeps its fold and placement between events
// and by one that computes both from scratch at every event
// (fromScratch). After every event the two agree on the refusal, the
// Result, the state hash and the layered targets (each leaf's own layer,
// total and part of every pool by lender: the kept fold's memo against
// the computation from scratch). It returns how many kept folds and kept
// placements it compared. The memo is observed from outside the fold,
// after the event: no hook in the production type.
func foldKept(sc gen.Scenario, graces bool, reclaim string, rules ...RulesVersion) (folds, places int, err error) {
	kept, scratch := NewPool("inc", WithDevelopmentRules()), NewPool("inc", WithDevelopmentRules())
	scratch.fromScratch = true
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seq := uint64(0)
	for i, ev := range sc.Events {
		if pc, ok := ev.(*events.PlanChange); ok {
			ev = foldablePlan(pc, graces, reclaim)
			if len(rules) > 0 {
				ev.(*events.PlanChange).Plan.Rules = int(rules[0])
			}
		}
		at = at.Add(time.Second)
		e := Event{Seq: seq + 1, Time: at, Payload: ev}
		rk, errK := kept.Apply(e)
		rs, errS := scratch.Apply(e)
		if (errK == nil) != (errS == nil) || (errK != nil && errK.Error() != errS.Error()) {
			return folds, places, fmt.Errorf("event %d (%T): kept refuses %v, from scratch %v", i, ev, errK, errS)
		}
		if errK != nil {
			continue
		}
		seq++
		if d := compareResults(rk, rs); d != "" {
			return folds, places, fmt.Errorf("event %d (%T): %s", i, ev, d)
		}
		if kept.StateHash() != scratch.StateHash() {
			return folds, places, fmt.Errorf("event %d (%T): state hashes differ", i, ev)
		}
		if kept.inc.ready {
			folds++
			if d := compareLayered(kept.inc.output(kept.t), scratch.layered, kept.mode.shareRatio); d != "" {
				return folds, places, fmt.Errorf("event %d (%T): %s", i, ev, d)
			}
		}
		if kept.pk.ready {
			places++
		}
	}
	if scratch.inc.ready || scratch.pk.ready {
		return folds, places, fmt.Errorf("the pool made fromScratch kept its fold")
	}
	return folds, places, nil
}

// compareResults compares two results as their readers see them; "" when
// equal.
func compareResults(kept, scratch Result) string {
	a, _ := json.Marshal(kept)
	b, _ := json.Marshal(scratch)
	if !bytes.Equal(a, b) {
		return fmt.Sprintf("result kept %s, from scratch %s", a, b)
	}
	return ""
}

// foldablePlan makes a plan the kept fold takes: share_ratio with
// preemption and balance, or priority with or without preemption, as
// reclaim says; no max; graces are kept when asked (one class group or
// not, as they fall).
func foldablePlan(pc *events.PlanChange, graces bool, reclaim string) *events.PlanChange {
	plan := pc.Plan
	pol := events.Policy{Reclaim: reclaim, Enforcement: plan.Policy.Enforcement, ReclaimForPreference: plan.Policy.ReclaimForPreference}
	if reclaim == "priority" {
		pol.Preemption = plan.Policy.Preemption
	}
	plan.Policy = pol
	plan.Consumers = slices.Clone(plan.Consumers)
	for i := range plan.Consumers {
		c := &plan.Consumers[i]
		c.Max = nil
		if !graces {
			c.ReclaimGrace, c.LendGrace = nil, nil
		}
	}
	return &events.PlanChange{Plan: plan}
}

// compareLayered compares the kept fold's layered targets with those
// computed from scratch; "" when equal.
func compareLayered(inc, full layeredTargets, shareRatio bool) string {
	if !slices.Equal(inc.target, full.target) {
		return fmt.Sprintf("targets %v, from scratch %v", inc.target, full.target)
	}
	if !slices.Equal(inc.ownUse, full.ownUse) {
		return fmt.Sprintf("own layer %v, from scratch %v", inc.ownUse, full.ownUse)
	}
	if a, b := sumTakes(inc.takes), sumTakes(full.takes); !slices.Equal(a, b) {
		return fmt.Sprintf("takes %v, from scratch %v", a, b)
	}
	if !shareRatio && !slices.Equal(inc.transfers, full.transfers) {
		return fmt.Sprintf("transfers %v, from scratch %v", inc.transfers, full.transfers)
	}
	return ""
}

// sumTakes adds up takes by (pool, leaf, lender), sorted.
func sumTakes(ts []poolTake) []poolTake {
	var out []poolTake
	for _, t := range ts {
		i := slices.IndexFunc(out, func(o poolTake) bool { return o.pool == t.pool && o.leaf == t.leaf && o.lender == t.lender })
		if i < 0 {
			out = append(out, poolTake{pool: t.pool, leaf: t.leaf, lender: t.lender})
			i = len(out) - 1
		}
		out[i].slots += t.slots
		out[i].entitled += t.entitled
	}
	slices.SortFunc(out, func(a, b poolTake) int {
		return cmp.Or(cmp.Compare(a.pool, b.pool), cmp.Compare(a.leaf, b.leaf), cmp.Compare(a.lender, b.lender))
	})
	return out
}

// benchShaped is a log on gen.OwnedBench's pool of n leaves under
// share_ratio: the hosts, the plan, a first round of demand, then nEvents
// demand changes (a third of them releases of one slot, refused when the
// leaf holds none).
func benchShaped(n, nEvents int) gen.Scenario {
	hosts, cs, leaves := gen.OwnedBench(n)
	sc := gen.Scenario{Events: hosts}
	sc.Events = append(sc.Events, &events.PlanChange{Plan: events.Plan{Rules: int(RulesV3), Policy: events.Policy{Reclaim: "share_ratio"}, Consumers: cs}})
	rng := gen.NewRand(7)
	first := &events.Demand{Demands: map[string]int64{}}
	for _, l := range leaves {
		first.Demands[l] = int64(rng.Intn(5))
	}
	sc.Events = append(sc.Events, first)
	for i := 0; i < nEvents; i++ {
		l := leaves[rng.Intn(len(leaves))]
		if i%3 == 2 {
			sc.Events = append(sc.Events, &events.Release{Consumer: l, Slots: 1})
			continue
		}
		sc.Events = append(sc.Events, &events.Demand{Demands: map[string]int64{l: int64(rng.Intn(7))}})
	}
	return sc
}

// TestKeptFoldMatchesFullGroups: the same on a pool whose owners own
// group slots spread over every host (groupShaped), with host events: the
// leaves' keeps compete for the owners' parts, so runs cut keeps and wake
// quiet leaves (kept_placement.go) on most events.
func TestKeptFoldMatchesFullGroups(t *testing.T) {
	for seed, reclaim := range []string{"share_ratio", "priority", "share_ratio", "priority"} {
		f, pl, err := foldKept(groupShaped(300, 250, uint64(seed)), seed >= 2, reclaim)
		if err != nil {
			t.Fatalf("%s, seed %d: %v", reclaim, seed, err)
		}
		if f < 200 || pl < 200 {
			t.Fatalf("%s, seed %d: only %d folds and %d placements compared", reclaim, seed, f, pl)
		}
	}
}

// groupShaped is a log on gen.OwnedGroups' pool of n leaves under
// share_ratio: the hosts, the plan, a first round of demand, then nEvents
// demand changes, releases and hosts going down and up.
func groupShaped(n, nEvents int, seed uint64) gen.Scenario {
	hosts, cs, leaves := gen.OwnedGroups(n)
	sc := gen.Scenario{Events: hosts}
	sc.Events = append(sc.Events, &events.PlanChange{Plan: events.Plan{Rules: int(RulesV3), Policy: events.Policy{Reclaim: "share_ratio"}, Consumers: cs}})
	rng := gen.NewRand(seed)
	first := &events.Demand{Demands: map[string]int64{}}
	for _, l := range leaves {
		first.Demands[l] = int64(rng.Intn(8))
	}
	sc.Events = append(sc.Events, first)
	down := map[int]bool{}
	for range nEvents {
		l := leaves[rng.Intn(len(leaves))]
		switch r := rng.Intn(100); {
		case r < 70:
			d := &events.Demand{Demands: map[string]int64{l: int64(rng.Intn(8))}}
			for range rng.Intn(3) {
				d.Demands[leaves[rng.Intn(len(leaves))]] = int64(rng.Intn(8))
			}
			sc.Events = append(sc.Events, d)
		case r < 95:
			sc.Events = append(sc.Events, &events.Release{Consumer: l, Slots: 1 + int64(rng.Intn(2))})
		default:
			h := rng.Intn(len(hosts))
			if down[h] {
				sc.Events = append(sc.Events, hosts[h])
			} else {
				sc.Events = append(sc.Events, &events.HostDown{Host: hosts[h].(*events.HostUp).Host})
			}
			down[h] = !down[h]
		}
	}
	return sc
}
