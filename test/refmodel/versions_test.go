package refmodel

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

// planV is plan() with a rules version and the balance option.
func planV(rules int, reclaim, enforcement string, balance *bool, cs ...events.Consumer) *events.PlanChange {
	p := plan(reclaim, enforcement, cs...)
	p.Plan.Rules = rules
	p.Plan.Policy.Balance = balance
	return p
}

func pct(path string, percent int64) events.Consumer {
	c := cons(path, 1, 0)
	c.Max = &events.Max{Percent: percent, IsPercent: true}
	return c
}

func grantD(c, h string, n int64, rule string) Decision {
	return Decision{Kind: "grant", Consumer: c, Host: h, Slots: n, Rule: rule}
}

// reclaimD is a share_ratio reclaim at event seq (mustApply's time) from a
// victim whose reclaim_grace is 0: its deadline is the event's time
// (section 6).
func reclaimD(seq int64, c, from, h string, n int64) Decision {
	return Decision{Kind: "reclaim", Consumer: c, From: from, Host: h, Slots: n, Rule: "share_ratio.reclaim",
		Deadline: time.Unix(seq, 0)}
}

func expectDecisions(t *testing.T, name string, got, want []Decision) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: decisions\n got  %+v\n want %+v", name, got, want)
	}
}

func expectAlloc(t *testing.T, name string, m *Model, want map[string]int64) {
	t.Helper()
	if got := m.Allocations(); !reflect.DeepEqual(got, want) {
		t.Errorf("%s: allocations %v, want %v", name, got, want)
	}
}

// TestRulesV2HostDownShrinksPercentMax: a host loss shrinks a percentage max.
// Version 1 releases the excess first (on the healthy host, where the leaf
// holds most) and then loses the dead host's slots, so the leaf pays twice
// and is granted slots back; version 2 loses the slots first and releases
// only what is still above E.
func TestRulesV2HostDownShrinksPercentMax(t *testing.T) {
	// priority, leaf; /A max 50% of C, /B idle. h1 8 + h2 4: C = 12,
	// P(A) = 6, max(A) = 6.
	// seq 4: A asks 5 -> entitled (G 6), granted 5 on h1 (8 free > 4).
	// seq 5: A asks 6 -> granted 1 on h2 (4 free > h1's 3). A: h1 5, h2 1.
	// seq 6: h2 down -> C = 8, P(A) = 4, max(A) = 50% of 8 = 4, E(A) = 4.
	//   v1: release 6-4 = 2 from h1 (A holds most there): A h1 3, h2 1;
	//       trim h2's 1: A holds 3; A is entitled to min(E, G) = 4: grant 1.
	//   v2: trim h2's 1: A holds 5 on h1; release 5-4 = 1 (max_lowered).
	// Both end with A = 4 on h1.
	// A second case: h1 6 + h2 4, A asks 3 then 5 -> A h1 3, h2 2; h2 down
	// -> C 6, max(A) = 3 = E(A).
	//   v1: release 2 on h1, trim 2 on h2, grant 2 on h1 (A back to 3).
	//   v2: trim 2 on h2; A holds 3 = E: nothing is released.
	cases := []struct {
		name                  string
		h1, h2, d1, d2, final int64
		v1, v2                []Decision
	}{
		{"loss smaller than the shrink", 8, 4, 5, 6, 4,
			[]Decision{
				{Kind: "release", Consumer: "/A", Host: "h1", Slots: 2, Rule: "release.max_lowered"},
				{Kind: "trim", Consumer: "/A", Host: "h2", Slots: 1, Rule: "trim.host_down"},
				grantD("/A", "h1", 1, "priority.entitled"),
			},
			[]Decision{
				{Kind: "trim", Consumer: "/A", Host: "h2", Slots: 1, Rule: "trim.host_down"},
				{Kind: "release", Consumer: "/A", Host: "h1", Slots: 1, Rule: "release.max_lowered"},
			}},
		{"loss covers the shrink", 6, 4, 3, 5, 3,
			[]Decision{
				{Kind: "release", Consumer: "/A", Host: "h1", Slots: 2, Rule: "release.max_lowered"},
				{Kind: "trim", Consumer: "/A", Host: "h2", Slots: 2, Rule: "trim.host_down"},
				grantD("/A", "h1", 2, "priority.entitled"),
			},
			[]Decision{
				{Kind: "trim", Consumer: "/A", Host: "h2", Slots: 2, Rule: "trim.host_down"},
			}},
	}
	for _, c := range cases {
		for _, rules := range []int{0, 1, 2} {
			m := New()
			mustApply(t, m, 1, planV(rules, "priority", "leaf", nil, pct("/A", 50), cons("/B", 1, 0)))
			mustApply(t, m, 2, &events.HostUp{Host: "h1", Slots: c.h1})
			mustApply(t, m, 3, &events.HostUp{Host: "h2", Slots: c.h2})
			mustApply(t, m, 4, demand("/A", int(c.d1)))
			mustApply(t, m, 5, demand("/A", int(c.d2)))
			if got := m.HostAllocations()["/A"]; got["h2"] == 0 || got["h1"] == 0 {
				t.Fatalf("%s: setup placed A on %v, want both hosts", c.name, got)
			}
			want := c.v1
			if rules == 2 {
				want = c.v2
			}
			expectDecisions(t, c.name, mustApply(t, m, 6, &events.HostDown{Host: "h2"}), want)
			expectAlloc(t, c.name, m, map[string]int64{"/A": c.final, "/B": 0})
		}
	}

	// A later plan moves the pool to version 2; it changes nothing else, and
	// the next host loss folds under version 2.
	m := New()
	mustApply(t, m, 1, planV(0, "priority", "leaf", nil, pct("/A", 50), cons("/B", 1, 0)))
	if m.Rules() != 1 {
		t.Fatalf("plan without rules: version %d, want 1", m.Rules())
	}
	mustApply(t, m, 2, &events.HostUp{Host: "h1", Slots: 8})
	mustApply(t, m, 3, &events.HostUp{Host: "h2", Slots: 4})
	mustApply(t, m, 4, demand("/A", 5))
	mustApply(t, m, 5, demand("/A", 6))
	if ds := mustApply(t, m, 6, planV(2, "priority", "leaf", nil, pct("/A", 50), cons("/B", 1, 0))); len(ds) != 0 {
		t.Fatalf("version move made %+v", ds)
	}
	if m.Rules() != 2 {
		t.Fatalf("after the move: version %d, want 2", m.Rules())
	}
	expectDecisions(t, "after the move", mustApply(t, m, 7, &events.HostDown{Host: "h2"}), cases[0].v2)
}

// TestRulesVersionValidation: only versions 1 and 2 exist; any other is
// refused and changes nothing. `balance` is a share_ratio option.
func TestRulesVersionValidation(t *testing.T) {
	if New().Rules() != 0 {
		t.Fatalf("no plan: version %d, want 0", New().Rules())
	}
	base := func() *Model {
		m := New()
		mustApply(t, m, 1, planV(2, "share_ratio", "leaf", nil, cons("/A", 1, 0), cons("/B", 1, 0)))
		mustApply(t, m, 2, &events.HostUp{Host: "h1", Slots: 6})
		mustApply(t, m, 3, demand("/A", 4, "/B", 1))
		return m
	}
	cs := []events.Consumer{cons("/A", 1, 0), cons("/B", 1, 0)}
	cases := []struct {
		name string
		p    *events.PlanChange
		want error
	}{
		{"rules 3", planV(3, "share_ratio", "leaf", nil, cs...), ErrUnknownRules},
		{"rules -1", planV(-1, "share_ratio", "leaf", nil, cs...), ErrUnknownRules},
		{"balance false under priority", planV(2, "priority", "leaf", boolp(false), cs...), ErrMalformedPlan},
		{"balance true under priority", planV(2, "priority", "leaf", boolp(true), cs...), ErrMalformedPlan},
		{"balance under default reclaim", planV(2, "", "", boolp(false), cs...), ErrMalformedPlan},
	}
	for _, c := range cases {
		m := base()
		before := m.clone()
		ds, err := m.Apply(4, time.Unix(4, 0), c.p)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
		if ds != nil || !reflect.DeepEqual(m, before) || m.Rules() != 2 {
			t.Errorf("%s: refused plan changed the model (decisions %v, version %d)", c.name, ds, m.Rules())
		}
	}
	// accepted: balance under share_ratio, with or without preemption; a
	// plan without rules means version 1, even after a version 2 plan
	m := base()
	ok := planV(0, "share_ratio", "parent", boolp(false), cs...)
	ok.Plan.Policy.Preemption = boolp(false)
	mustApply(t, m, 4, ok)
	if m.Rules() != 1 || m.pol.balance || m.pol.preemption {
		t.Fatalf("accepted plan: version %d, policy %+v", m.Rules(), m.pol)
	}
	mustApply(t, m, 5, planV(1, "share_ratio", "leaf", boolp(true), cs...))
	if m.Rules() != 1 || !m.pol.balance {
		t.Fatalf("balance true: version %d, policy %+v", m.Rules(), m.pol)
	}
}

// TestBalanceFalseYARN is YARN's default preemption on a flat pool (leaf
// enforcement): a queue above its guarantee keeps what it holds, a queue
// below its guarantee gets exactly its guarantee back, and free slots still
// go to whoever wants them.
func TestBalanceFalseYARN(t *testing.T) {
	// /A /B /C share 1 each, 12 slots on h1: P = 4, 4, 4.
	cs := []events.Consumer{cons("/A", 1, 0), cons("/B", 1, 0), cons("/C", 1, 0)}
	m := New()
	mustApply(t, m, 1, planV(2, "share_ratio", "leaf", boolp(false), cs...))
	mustApply(t, m, 2, &events.HostUp{Host: "h1", Slots: 12})

	// A asks 12. T(A) = 12 (alone). E'(A) = min(12, max(P 4, a 0)) = 4, so
	// T0(A) = 4: the reclaim phase grants 4, then the leftover phase grants
	// the 8 free slots up to T (elasticity): two grant rows.
	expectDecisions(t, "A alone", mustApply(t, m, 3, demand("/A", 12)), []Decision{
		grantD("/A", "h1", 4, "share_ratio.grant"), grantD("/A", "h1", 8, "share_ratio.grant"),
	})

	// B asks 12. T = 6, 6. E'(A) = min(12, max(4, 12)) = 12, E'(B) =
	// min(12, max(4, 0)) = 4. T0 (leaf): Pdyn 6, 6; bases 6, 4; surplus
	// min(12, 16) - 10 = 2 to A (residual 6; B's is 0): T0 = A 8, B 4.
	// B reclaims 4 from A; no free slot is left for B's way to T = 6.
	// (balanced, B would take 6: see below.)
	expectDecisions(t, "B arrives", mustApply(t, m, 4, demand("/B", 12)), []Decision{reclaimD(4, "/B", "/A", "h1", 4)})
	expectAlloc(t, "B arrives", m, map[string]int64{"/A": 8, "/B": 4, "/C": 0})
	if tg := m.Targets(); tg["/A"] != 6 || tg["/B"] != 6 {
		t.Errorf("Targets() = %v, want the full T (6, 6), not T0", tg)
	}

	// C asks 2. T: Pdyn 4, 4, 4; bases 4, 4, 2; surplus 2 -> 1, 1: T = 5, 5, 2.
	// E' = A min(12, 8) = 8, B min(12, max(4, 4)) = 4, C min(2, 4) = 2.
	// T0: bases 4, 4, 2; surplus min(12, 14) - 10 = 2, all to A (the only
	// residual): T0 = 6, 4, 2. C reclaims 2 from A (8 > 6); B, at its
	// guarantee, is not a victim, and A keeps 6 > T(A) = 5.
	expectDecisions(t, "C arrives", mustApply(t, m, 5, demand("/C", 2)), []Decision{reclaimD(5, "/C", "/A", "h1", 2)})
	expectAlloc(t, "C arrives", m, map[string]int64{"/A": 6, "/B": 4, "/C": 2})

	// B wants only 4, C leaves: C releases 2. T: Pdyn 6, 6; bases A 6, B 4;
	// surplus min(12, 16) - 10 = 2 to A: T = 8, 4. E' = A min(12, max(4, 6))
	// = 6, B 4 -> T0 = 6, 4: nobody reclaims. The 2 free slots go to A,
	// below its full target, although A is above its guarantee.
	expectDecisions(t, "C leaves", mustApply(t, m, 6, demand("/B", 4, "/C", 0)), []Decision{
		{Kind: "release", Consumer: "/C", Host: "h1", Slots: 2, Rule: "release.demand_dropped"},
		grantD("/A", "h1", 2, "share_ratio.grant"),
	})
	expectAlloc(t, "C leaves", m, map[string]int64{"/A": 8, "/B": 4, "/C": 0})

	// The same first two steps balanced: B takes A down to T = 6.
	b := New()
	mustApply(t, b, 1, planV(2, "share_ratio", "leaf", nil, cs...))
	mustApply(t, b, 2, &events.HostUp{Host: "h1", Slots: 12})
	expectDecisions(t, "balanced A alone", mustApply(t, b, 3, demand("/A", 12)), []Decision{grantD("/A", "h1", 12, "share_ratio.grant")})
	expectDecisions(t, "balanced B arrives", mustApply(t, b, 4, demand("/B", 12)), []Decision{reclaimD(4, "/B", "/A", "h1", 6)})
}

// TestBalanceFalseEnforcement: seed 002's tree under both enforcement
// levels, with two leaves above their guarantee when a new one arrives.
func TestBalanceFalseEnforcement(t *testing.T) {
	// /X/1 /X/2 /Y/1 /Y/2, share 1 everywhere, 16 slots on h1:
	// P(X) = P(Y) = 8, P(leaf) = 4.
	//
	// seq 3, Y/1 asks 9: T(Y/1) = 9; E'(Y/1) = min(9, max(4, 0)) = 4, T0 = 4:
	//   grant 4 (reclaim phase), then grant 5 (leftover, up to T).
	// seq 4, X/1 asks 2, X/2 asks 5: T = 2, 5, 9 (room for all).
	//   E' = 2, min(5, 4) = 4, 9. T0 parent: root 16 -> X cap 6, Y cap 9 ->
	//   6, 9; X -> 2, 4. T0 leaf: Pdyn X 8 Y 8, X/1 4 X/2 4 Y/1 8; bases
	//   2, 4, 8; surplus min(16, 15) - 14 = 1 to Y: T0 = 2, 4, 9. Both:
	//   claimants by deficit: X/2 (4) then X/1 (2); then X/2 +1 up to T.
	// seq 5, X/2, Y/1, Y/2 ask 50; a0 = 2, 5, 9, 0.
	//   E' = X/1 2, X/2 min(50, max(4, 5)) = 5, Y/1 9, Y/2 4; E'(X) 7, E'(Y) 13.
	//   parent: T = 2, 6, 4, 4 (X/1's unused share goes to its sibling X/2).
	//     T0: root 16 -> X cap 7 (7*2 <= 16), Y 9; X -> 2, 5; Y 9 -> Y/2 cap
	//     4 (4*2 <= 9), Y/1 5. T0 = 2, 5, 5, 4.
	//   leaf: T = 2, 5, 5, 4 (seed 002). T0: bases 2, 4, 4, 4; surplus
	//     min(16, 20) - 14 = 2 over X (residual 1) and Y (residual 5) ->
	//     1, 1 -> X/2 5, Y/1 5. T0 = 2, 5, 5, 4.
	//   Walk on T0: X (A 7 - T0 7 = 0) and Y (9 - 9 = 0) tie, path: X, whose
	//   leaves are at T0; then Y/1 (9 > 5). Y/2 reclaims 4 from Y/1.
	//   End 2, 5, 5, 4 under both. With parent enforcement that is not T:
	//   X/2, above its guarantee 4, is not lifted to T = 6 by reclaim, and
	//   Y/1 keeps 5 > T = 4. Balanced parent enforcement ends at 2, 6, 4, 4.
	tree := []events.Consumer{{Path: "/X/1"}, {Path: "/X/2"}, {Path: "/Y/1"}, {Path: "/Y/2"}}
	for _, enf := range []string{"parent", "leaf"} {
		m := New()
		mustApply(t, m, 1, planV(2, "share_ratio", enf, boolp(false), tree...))
		mustApply(t, m, 2, &events.HostUp{Host: "h1", Slots: 16})
		expectDecisions(t, enf+" Y/1", mustApply(t, m, 3, demand("/Y/1", 9)), []Decision{
			grantD("/Y/1", "h1", 4, "share_ratio.grant"), grantD("/Y/1", "h1", 5, "share_ratio.grant"),
		})
		expectDecisions(t, enf+" X", mustApply(t, m, 4, demand("/X/1", 2, "/X/2", 5)), []Decision{
			grantD("/X/2", "h1", 4, "share_ratio.grant"), grantD("/X/1", "h1", 2, "share_ratio.grant"),
			grantD("/X/2", "h1", 1, "share_ratio.grant"),
		})
		expectDecisions(t, enf+" Y/2", mustApply(t, m, 5, demand("/X/2", 50, "/Y/1", 50, "/Y/2", 50)),
			[]Decision{reclaimD(5, "/Y/2", "/Y/1", "h1", 4)})
		expectAlloc(t, enf+" end", m, map[string]int64{"/X/1": 2, "/X/2": 5, "/Y/1": 5, "/Y/2": 4})
		wantT := map[string]int64{"/X/1": 2, "/X/2": 5, "/Y/1": 5, "/Y/2": 4}
		if enf == "parent" {
			wantT = map[string]int64{"/X/1": 2, "/X/2": 6, "/Y/1": 4, "/Y/2": 4}
		}
		if tg := m.Targets(); !reflect.DeepEqual(tg, wantT) {
			t.Errorf("%s: Targets() = %v, want T %v", enf, tg, wantT)
		}
	}
	// balanced parent enforcement, same events: X/2 also reclaims up to 6
	b := New()
	mustApply(t, b, 1, planV(2, "share_ratio", "parent", nil, tree...))
	mustApply(t, b, 2, &events.HostUp{Host: "h1", Slots: 16})
	mustApply(t, b, 3, demand("/Y/1", 9))
	mustApply(t, b, 4, demand("/X/1", 2, "/X/2", 5))
	mustApply(t, b, 5, demand("/X/2", 50, "/Y/1", 50, "/Y/2", 50))
	expectAlloc(t, "balanced parent", b, map[string]int64{"/X/1": 2, "/X/2": 6, "/Y/1": 4, "/Y/2": 4})
}
