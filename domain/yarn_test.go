package domain_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
)

var yarnRuns = flag.Int("yarn.runs", 600, "random logs TestYARNProperties folds")

// TestYARNProperties folds random logs with rules 4's plan fields (priority
// bands, pinned consumers, zero shares; gen.GenerateYARN) under the version
// in development and checks after every event, beside section 1's
// invariants (checkInvariantsPinned):
//   - in a share_ratio pool with pins, every leaf holds at least its floor
//     (a pinned leaf what it held when the rebalance started, another
//     min(that, P));
//   - a pinned leaf is never a reclaim's victim, under either policy;
//   - under share_ratio the targets total min(C, sum of the top-level
//     consumers' E), and with preemption and balance every leaf holds its
//     target;
//   - an event that changes no input (a demand event naming a leaf's
//     current demand) decides nothing;
//
// and that folding the same log twice gives the same decisions. FuzzFold
// folds such logs too.
func TestYARNProperties(t *testing.T) {
	plans, pinned, zero, bands := 0, 0, 0, 0
	for seed := uint64(1); seed <= uint64(*yarnRuns); seed++ {
		sc := gen.GenerateYARN(gen.NewRand(seed), 50)
		first, st := foldYARN(t, fmt.Sprintf("seed %d", seed), sc)
		second, _ := foldYARN(t, fmt.Sprintf("seed %d again", seed), sc)
		if !bytes.Equal(first, second) {
			t.Fatalf("seed %d: two folds of the same log differ", seed)
		}
		plans, pinned, zero, bands = plans+st.plans, pinned+st.pinned, zero+st.zero, bands+st.bands
	}
	t.Logf("%d logs: %d plans accepted, %d with pins, %d with zero shares, %d with priority bands", *yarnRuns, plans, pinned, zero, bands)
	if pinned == 0 || zero == 0 || bands == 0 {
		t.Errorf("the generator drew no plan of some kind: pins %d, zero shares %d, bands %d", pinned, zero, bands)
	}
}

type yarnStats struct{ plans, pinned, zero, bands int }

// foldYARN folds a log under the version in development, checking every
// property after every event; it returns the decisions, encoded.
func foldYARN(t testing.TB, name string, sc gen.Scenario) ([]byte, yarnStats) {
	t.Helper()
	var st yarnStats
	pool := domain.NewPool("yarn", domain.WithDevelopmentRules())
	var log bytes.Buffer
	var plan events.Plan
	seq := uint64(0)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, ev := range sc.Events {
		at = at.Add(time.Second)
		before := pool.Consumers()
		hashBefore := pool.StateHash()
		res, err := pool.Apply(domain.Event{Seq: seq + 1, Time: at, Payload: ev})
		if err != nil {
			if pool.StateHash() != hashBefore {
				t.Fatalf("%s: event %d refused (%v) but the state changed", name, i, err)
			}
			continue
		}
		seq++
		if pc, ok := ev.(*events.PlanChange); ok {
			plan = pc.Plan
			st.plans++
			if len(pinnedLeaves(plan)) > 0 {
				st.pinned++
			}
			if plan.HasZeroShare() {
				st.zero++
			}
			if plan.Policy.PriorityBandsOrDefault() {
				st.bands++
			}
		}
		js, _ := json.Marshal(ev)
		if msg := checkInvariantsPinned(pool, before, res.Decisions, pinnedLeaves(plan)); msg != "" {
			t.Fatalf("%s: event %d (%s %s): %s", name, i, ev.EventType(), js, msg)
		}
		if msg := checkYARN(pool, plan, before, res.Decisions); msg != "" {
			t.Fatalf("%s: event %d (%s %s): %s", name, i, ev.EventType(), js, msg)
		}
		if msg := noOpDecidesNothing(pool, seq+1, at.Add(time.Millisecond)); msg != "" {
			t.Fatalf("%s: after event %d (%s %s): %s", name, i, ev.EventType(), js, msg)
		}
		for _, d := range res.Decisions {
			b, _ := json.Marshal(d)
			log.Write(b)
			log.WriteByte('\n')
		}
	}
	return log.Bytes(), st
}

// checkYARN checks rules 4's properties on the state after one event.
func checkYARN(pool *domain.Pool, plan events.Plan, before []domain.ConsumerView, ds []domain.Decision) string {
	pins := pinnedLeaves(plan)
	for _, d := range ds {
		if (d.Kind == domain.KindReclaim) && pins[d.From] {
			return fmt.Sprintf("%s is not preemptable but gave %d to %s (%s)", d.From, d.Slots, d.Consumer, d.Rule)
		}
	}
	pol := pool.Policy()
	if pol.Reclaim != events.ReclaimShareRatio {
		return ""
	}
	cs := pool.Consumers()
	capacity := int64(0)
	for _, h := range pool.Hosts() {
		if h.Up {
			capacity += h.Slots
		}
	}
	var targets, topE int64
	for _, c := range cs {
		if c.Leaf {
			targets += c.Target
		}
		if strings.Count(c.Path, "/") == 1 {
			topE += c.Effective
		}
	}
	if want := min(capacity, topE); targets != want {
		return fmt.Sprintf("targets total %d, want min(C %d, E %d)", targets, capacity, topE)
	}
	if len(pins) == 0 {
		return ""
	}
	start := map[string]int64{} // what each leaf held when the rebalance started
	for _, c := range before {
		if c.Leaf {
			start[c.Path] = c.Allocated
		}
	}
	for _, d := range ds {
		if d.Kind == domain.KindRelease || d.Kind == domain.KindTrim {
			start[d.Consumer] -= d.Slots
		}
	}
	for _, c := range cs {
		if !c.Leaf {
			continue
		}
		floor := min(start[c.Path], c.Planned)
		if pins[c.Path] {
			floor = start[c.Path]
		}
		if c.Allocated < floor {
			return fmt.Sprintf("%s holds %d below its floor %d (held %d, P %d, pinned %t)", c.Path, c.Allocated, floor, start[c.Path], c.Planned, pins[c.Path])
		}
	}
	return ""
}

// noOpDecidesNothing folds, on a copy of the pool, a demand event that
// names a leaf's current demand (it changes no input of the fold) and
// requires that it decides nothing.
func noOpDecidesNothing(pool *domain.Pool, seq uint64, at time.Time) string {
	for _, c := range pool.Consumers() {
		if !c.Leaf {
			continue
		}
		cp := pool.Clone()
		res, err := cp.Apply(domain.Event{Seq: seq, Time: at, Payload: &events.Demand{Demands: map[string]int64{c.Path: c.Demand}}})
		if err != nil {
			return fmt.Sprintf("the no-op demand of %s was refused: %v", c.Path, err)
		}
		if len(res.Decisions) > 0 {
			return fmt.Sprintf("a no-op event (%s's demand %d again) decided %v", c.Path, c.Demand, res.Decisions)
		}
		return ""
	}
	return ""
}

// pinnedLeaves resolves preemptable's inheritance in a plan: the leaves
// that are not preemptable.
func pinnedLeaves(plan events.Plan) map[string]bool {
	set := map[string]*bool{}
	parents := map[string]bool{}
	for _, c := range plan.Consumers {
		set[c.Path] = c.Preemptable
		for p := parentOf(c.Path); p != "/"; p = parentOf(p) {
			parents[p] = true
		}
	}
	pins := map[string]bool{}
	for _, c := range plan.Consumers {
		if parents[c.Path] {
			continue
		}
		pinned := false
		for p := c.Path; p != "/"; p = parentOf(p) {
			if v := set[p]; v != nil {
				pinned = !*v
				break
			}
		}
		if pinned {
			pins[c.Path] = true
		}
	}
	return pins
}

// TestYARNRefusalCodes: each refusal of rules 4's fields has its code
// (docs/rules.md#version-4), the first matching the builds before version
// 4, which refused the two fields as unknown (malformed) and a zero share
// as invalid_share, under every rules version 1 to 3; a plan naming a
// version the pool does not fold (4 without the development switch) is
// refused as unknown whatever it names.
func TestYARNRefusalCodes(t *testing.T) {
	no, yes := false, true
	zero, minus := int64(0), int64(-1)
	abPlan := func(rules int, pol events.Policy, a events.Consumer) events.Plan {
		a.Path = "/a"
		return events.Plan{Rules: rules, Policy: pol, Consumers: []events.Consumer{a, {Path: "/b"}}}
	}
	sr := events.Policy{Reclaim: events.ReclaimShareRatio}
	bands := events.Policy{Reclaim: events.ReclaimShareRatio, PriorityBands: &yes}
	own := []events.OwnEntry{{Host: "h1"}}
	cases := []struct {
		name        string
		plan        events.Plan
		development bool
		want        events.Code // "" accepted
	}{
		{"rules 3 preemptable", abPlan(3, sr, events.Consumer{Preemptable: &no}), true, events.ErrMalformed.Code()},
		{"rules 3 preemptable true", abPlan(3, sr, events.Consumer{Preemptable: &yes}), true, events.ErrMalformed.Code()},
		{"rules 2 priority_bands", abPlan(2, bands, events.Consumer{}), true, events.ErrMalformed.Code()},
		{"rules 1 (unnamed) priority_bands", abPlan(0, bands, events.Consumer{}), true, events.ErrMalformed.Code()},
		{"rules 3 zero share", abPlan(3, sr, events.Consumer{Share: &zero}), true, domain.ErrZeroShare.Code()},
		{"rules 4 without development", abPlan(4, sr, events.Consumer{Preemptable: &no}), false, domain.ErrUnknownRules.Code()},
		{"rules 4 without development, no new field", abPlan(4, sr, events.Consumer{}), false, domain.ErrUnknownRules.Code()},
		{"rules 5 preemptable", abPlan(5, sr, events.Consumer{Preemptable: &no}), true, domain.ErrUnknownRules.Code()},
		{"rules 5", abPlan(5, sr, events.Consumer{}), true, domain.ErrUnknownRules.Code()},
		{"rules 4 zero share under priority", abPlan(4, events.Policy{}, events.Consumer{Share: &zero}), true, domain.ErrZeroShare.Code()},
		{"rules 4 negative share", abPlan(4, sr, events.Consumer{Share: &minus}), true, domain.ErrZeroShare.Code()},
		{"rules 4 priority_bands under priority", abPlan(4, events.Policy{PriorityBands: &yes}, events.Consumer{}), true, domain.ErrInvalidPlan.Code()},
		{"rules 4 priority_bands false under priority", abPlan(4, events.Policy{PriorityBands: &no}, events.Consumer{}), true, domain.ErrInvalidPlan.Code()},
		{"rules 4 preemptable with own", abPlan(4, sr, events.Consumer{Preemptable: &no, Own: own}), true, domain.ErrUnsupportedWithOwnership.Code()},
		{"rules 4 preemptable true with lend", abPlan(4, sr, events.Consumer{Preemptable: &yes, Lend: &yes}), true, ""},
		{"rules 4 bands with lend", abPlan(4, bands, events.Consumer{Lend: &yes}), true, domain.ErrUnsupportedWithOwnership.Code()},
		{"rules 4 zero share with own", events.Plan{Rules: 4, Policy: sr, Consumers: []events.Consumer{{Path: "/a", Own: own}, {Path: "/b", Share: &zero}}}, true, domain.ErrUnsupportedWithOwnership.Code()},
		{"rules 4 bands false with reclaim_for_preference", abPlan(4, events.Policy{Reclaim: events.ReclaimShareRatio, PriorityBands: &no, ReclaimForPreference: &no}, events.Consumer{}), true, ""},
		{"rules 4 every field", abPlan(4, bands, events.Consumer{Preemptable: &no, Share: &zero}), true, ""},
		{"rules 4 preemptable under priority", abPlan(4, events.Policy{}, events.Consumer{Preemptable: &no}), true, ""},
		{"rules 4 ownership without the fields", abPlan(4, sr, events.Consumer{Own: own}), true, ""},
	}
	for _, c := range cases {
		var opts []domain.PoolOption
		if c.development {
			opts = append(opts, domain.WithDevelopmentRules())
		}
		p := domain.NewPool("codes", opts...)
		_, err := p.Apply(domain.Event{Seq: 1, Time: time.Unix(1, 0), Payload: &events.PlanChange{Plan: c.plan}})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused (%v), want accepted", c.name, err)
		case c.want != "" && events.CodeOf(err) != c.want:
			t.Errorf("%s: %v (code %q), want %q", c.name, err, events.CodeOf(err), c.want)
		}
	}
}

// TestUnknownRulesSaysWhatTheBuildFolds: a plan naming a version the
// pool does not fold is refused with the versions it does fold, the one in
// development included when the pool folds it (an operator running
// --rules-development was told "1 to 3" for rules 5).
func TestUnknownRulesSaysWhatTheBuildFolds(t *testing.T) {
	plan := events.Plan{Rules: 5, Policy: events.Policy{Reclaim: events.ReclaimShareRatio}, Consumers: []events.Consumer{{Path: "/a"}}}
	for _, c := range []struct {
		development bool
		want        string
	}{
		{false, fmt.Sprintf("this build implements versions 1 to %d", domain.RulesNewest)},
		{true, fmt.Sprintf("this build implements versions 1 to %d, and %d in development", domain.RulesNewest, domain.RulesDevelopment)},
	} {
		var opts []domain.PoolOption
		if c.development {
			opts = append(opts, domain.WithDevelopmentRules())
		}
		_, err := domain.NewPool("unknown", opts...).Apply(domain.Event{Seq: 1, Time: time.Unix(1, 0), Payload: &events.PlanChange{Plan: plan}})
		if !errors.Is(err, domain.ErrUnknownRules) || !strings.HasSuffix(err.Error(), c.want) {
			t.Errorf("development %v: %v, want %v ending %q", c.development, err, domain.ErrUnknownRules, c.want)
		}
	}
}

// TestYARNFieldsDecode: a value that is not a boolean is malformed at
// decoding, as any ill-typed field; a list of more than the most consumers
// naming preemptable is malformed, as the builds before rules 4 refused it
// (they stopped at the unknown field), and so keeps a stored log's chain.
func TestYARNFieldsDecode(t *testing.T) {
	for _, data := range []string{
		`{"plan":{"rules":4,"policy":{"reclaim":"share_ratio","priority_bands":1},"consumers":[{"path":"/a"}]}}`,
		`{"plan":{"rules":4,"policy":{"reclaim":"share_ratio"},"consumers":[{"path":"/a","preemptable":"no"}]}}`,
	} {
		if _, err := events.DecodePayload(events.TypePlan, []byte(data)); !errors.Is(err, events.ErrMalformed) {
			t.Errorf("%s: %v, want malformed", data, err)
		}
	}
	var b strings.Builder
	b.WriteString(`{"plan":{"consumers":[{"path":"/c0","preemptable":false}`)
	for i := 1; i <= events.MaxPlanConsumers; i++ {
		fmt.Fprintf(&b, `,{"path":"/c%d"}`, i)
	}
	b.WriteString(`]}}`)
	if _, err := events.DecodePayload(events.TypePlan, []byte(b.String())); !errors.Is(err, events.ErrMalformed) {
		t.Errorf("too many consumers, one naming preemptable: %v, want malformed", err)
	}
	long := strings.Replace(b.String(), `,"preemptable":false`, ``, 1)
	if _, err := events.DecodePayload(events.TypePlan, []byte(long)); !errors.Is(err, events.ErrTooManyConsumers) {
		t.Errorf("too many consumers: %v, want too_many_consumers", err)
	}
}
