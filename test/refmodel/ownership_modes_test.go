package refmodel

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

// Hand-worked scenarios of ownership under reclaim: priority, share_ratio's
// balance: false, and preemption: false (rules version 3, NewRules3;
// AMBIGUITIES.md, ownership 23-33). The comments work each step out from
// the spec.

// TestOwnPriorityPublicLayer: an idle owner's slots join the public layer;
// G is the planned share of the layer's capacity; first-come first-served
// borrowing up to G + borrow_limit; the owner takes its slots back (a
// return); a late claimant reclaims inside the layer.
func TestOwnPriorityPublicLayer(t *testing.T) {
	runYAML(t, `
plan:
  rules: 3
  policy: {reclaim: priority}
  consumers:
    - {path: /A, own: [{host: h1}]}
    - {path: /B}
    - {path: /C}
hosts:
  - {name: h1, slots: 4}
  - {name: h2, slots: 4}
steps:
  # seq 4. Own layer: nobody. Public layer: the public part (h2 4) and
  # A's 4 idle slots lent (class lend_grace 0: every leaf may borrow them,
  # one group with the public slots): capacity 8, P over the tree 1:1:1 =
  # 3, 3, 2 (remainders 2, 2, 2: /A and /B get the 2 left). B: G = 3,
  # entitled to 3 (the pool's own part first: h2); borrows up to G +
  # borrow_limit (default G) = 6: h2's last slot, then A's lent h1 (kind
  # lend). 2 slots stay idle: B is at its borrowing cap.
  - events: [{type: demand, demands: {/B: 8}}]
    expect:
      allocations: {/B: 6}
      placed: {/B: {h2: 4, h1: 2}}
      decisions:
        - {kind: grant, consumer: /B, host: h2, rule: priority.entitled, slots: 3}
        - {kind: grant, consumer: /B, host: h2, rule: priority.borrow, slots: 1}
        - {kind: lend, consumer: /B, from: /A, host: h1, rule: priority.borrow, slots: 2}
  # seq 5 (00:00:04). A asks 3: own layer min(3, 4) = 3: its 2 free slots
  # on h1 (own.use), then (no idle slot anywhere) 1 back from B on h1:
  # return, deadline = time + A's lend_grace 0. Public layer: h2 4 + A's
  # last lent slot = 5, P = 2, 2, 1. B holds 5 there, above its cap 4:
  # priority never takes it back (nobody is entitled and short).
  - events: [{type: demand, demands: {/A: 3}}]
    expect:
      allocations: {/A: 3, /B: 5}
      placed: {/A: {h1: 3}, /B: {h2: 4, h1: 1}}
      decisions:
        - {kind: grant, consumer: /A, host: h1, rule: own.use, slots: 2}
        - {kind: return, consumer: /A, from: /B, host: h1, rule: own.return, deadline: "2026-01-01T00:00:04Z", slots: 1}
  # seq 6. C asks 4: public layer, C's G = 1 (P 2, 2, 1): entitled to 1,
  # nothing is free; it reclaims from the layer's borrower B (5 > G 2, its
  # branch over its planned share), on the part C would use first: the
  # public part, h2. C's borrowing cap is 2, but nothing is free.
  - events: [{type: demand, demands: {/C: 4}}]
    expect:
      allocations: {/A: 3, /B: 4, /C: 1}
      placed: {/A: {h1: 3}, /B: {h2: 3, h1: 1}, /C: {h2: 1}}
      decisions:
        - {kind: reclaim, consumer: /C, from: /B, host: h2, rule: priority.reclaim, slots: 1}
`)
}

// TestOwnPriorityPrivatePool runs one scenario under both enforcements
// and both values of preemption: a parent's private pool is a layer of its
// own; its leaves take its slots back from an outsider (a return, with or
// without preemption, deadline = time + the pool owner's lend_grace);
// reclaim inside the pool only with preemption.
func TestOwnPriorityPrivatePool(t *testing.T) {
	const tmpl = `
plan:
  rules: 3
  policy: {reclaim: priority, enforcement: ENF, preemption: PRE}
  consumers:
    - {path: /P, own: [{host: p1}], lend_grace: 1m}
    - {path: /P/a}
    - {path: /P/b}
    - {path: /Q}
hosts:
  - {name: p1, slots: 4}
  - {name: q1, slots: 4}
steps:
  # seq 4. Pool P (p1 4): nobody under P asks, all 4 lent upward (class
  # 1m: every leaf may borrow them, one group with the public slots).
  # Public layer: q1 4 + 4 = 8, P(/P) = P(/Q) = 4: Q entitled to 4 (q1,
  # the pool's own part), borrows 4 more (P's slots on p1, kind lend).
  - events: [{type: demand, demands: {/Q: 8}}]
    expect:
      allocations: {/Q: 8}
      placed: {/Q: {q1: 4, p1: 4}}
      decisions:
        - {kind: grant, consumer: /Q, host: q1, rule: priority.entitled, slots: 4}
        - {kind: lend, consumer: /Q, from: /P, host: p1, rule: priority.borrow, slots: 4}
  # seq 5 (00:00:04). a asks 3. Pool P's layer: its 4 slots, all held by
  # the outsider Q; P over the pool 1:1 = a 2, b 2. a is entitled to 2:
  # nothing is free, so it takes them back from Q (return, deadline =
  # time + P's lend_grace 1m); then borrows its third (cap 2 + 2): one
  # more return. Public layer: q1 4 + the slot Q still holds on p1 = 5,
  # P = 3, 2: Q (5) is no claimant.
  - events: [{type: demand, demands: {/P/a: 3}}]
    expect:
      allocations: {/P/a: 3, /Q: 5}
      placed: {/P/a: {p1: 3}, /Q: {q1: 4, p1: 1}}
      decisions:
        - {kind: return, consumer: /P/a, from: /Q, host: p1, rule: own.return, deadline: "2026-01-01T00:01:04Z", slots: 3}
STEP3
`
	// seq 6, preemption: b asks 4. Pool P: b is entitled to 2: Q's last
	// slot on p1 comes back (return); then b reclaims 1 from a (3 > its G
	// 2; with enforcement parent a's branch gives at most A - min(P, E) =
	// 3 - 2). Public layer: q1's 4, all Q's; P(/P) = P(/Q) = 2, and /P's
	// 2 is a 1, b 1 (leaf: P; parent: split over the demands left, 1 and
	// 2). a (1 short) and b (2 short) are entitled to 1 each there and
	// reclaim them from Q (4 > G 2; parent: Q's branch gives at most 4 -
	// min(2, 8)), a first (waiting since seq 5). Ownership comes on top
	// of the share: a 3, b 3, Q 2, as share_ratio's layered targets would
	// give.
	pre := `
  - events: [{type: demand, demands: {/P/b: 4}}]
    expect:
      allocations: {/P/a: 3, /P/b: 3, /Q: 2}
      placed: {/P/a: {p1: 2, q1: 1}, /P/b: {p1: 2, q1: 1}, /Q: {q1: 2}}
      decisions:
        - {kind: return, consumer: /P/b, from: /Q, host: p1, rule: own.return, slots: 1}
        - {kind: reclaim, consumer: /P/b, from: /P/a, host: p1, rule: priority.reclaim, slots: 1}
        - {kind: reclaim, consumer: /P/a, from: /Q, host: q1, rule: priority.reclaim, slots: 1}
        - {kind: reclaim, consumer: /P/b, from: /Q, host: q1, rule: priority.reclaim, slots: 1}`
	// without preemption the return still happens, no reclaim does: b
	// stays 1 short of its G in pool P, and 1 short of its G in public
	nopre := `
  - events: [{type: demand, demands: {/P/b: 4}}]
    expect:
      allocations: {/P/a: 3, /P/b: 1, /Q: 4}
      decisions:
        - {kind: return, consumer: /P/b, from: /Q, host: p1, rule: own.return, slots: 1}
        - {kind: reclaim, consumer: /P/b, from: /P/a, slots: 0}`
	for _, enf := range []string{"leaf", "parent"} {
		for _, c := range []struct{ pre, step string }{{"true", pre}, {"false", nopre}} {
			t.Run(enf+"/preemption="+c.pre, func(t *testing.T) {
				runYAML(t, strings.NewReplacer("ENF", enf, "PRE", c.pre, "STEP3", c.step).Replace(tmpl))
			})
		}
	}
}

// TestOwnPriorityGraceClasses: in priority mode each group of lending
// classes is a layer of its own, G its planned share over the leaves
// eligible for it.
func TestOwnPriorityGraceClasses(t *testing.T) {
	runYAML(t, `
plan:
  rules: 3
  policy: {reclaim: priority}
  consumers:
    - {path: /ml, own: [{host: g1}], lend_grace: 5m}
    - {path: /web, reclaim_grace: 1m}
    - {path: /batch, reclaim_grace: 10m}
hosts:
  - {name: g1, slots: 8}
  - {name: c1, slots: 2}
steps:
  # seq 4. Public pool: ml's 8 lent with grace 5m (ml and web may borrow
  # them) and c1's 2 (everyone). Layer 1, the 5m class: 8 slots, P over
  # ml and web = 4, 4: web entitled to 4, borrows 4 more. Layer 2, the
  # public slots: 2, P over the three leaves = batch 1, ml 1, web 0
  # (remainders equal: smaller paths first): batch entitled to 1,
  # borrows 1 (cap 1 + 1).
  - events: [{type: demand, demands: {/web: 8, /batch: 8}}]
    expect:
      allocations: {/web: 8, /batch: 2}
      placed: {/web: {g1: 8}, /batch: {c1: 2}}
      decisions:
        - {kind: lend, consumer: /web, from: /ml, host: g1, rule: priority.entitled, slots: 4}
        - {kind: lend, consumer: /web, from: /ml, host: g1, rule: priority.borrow, slots: 4}
        - {kind: grant, consumer: /batch, host: c1, rule: priority.entitled, slots: 1}
        - {kind: grant, consumer: /batch, host: c1, rule: priority.borrow, slots: 1}
  # seq 5 (00:00:04). ml asks 6: own layer 6, nothing idle: 6 back from
  # web (deadline + 5m). The 5m layer is now ml's 2 left, both held by
  # web (G 1, cap 2). The public layer: web's G there is 0, so it gets
  # nothing of c1 and reclaims nothing: web 2, batch 2 (share_ratio would
  # give 3 and 1, TestOwnLendGraceClasses).
  - events: [{type: demand, demands: {/ml: 6}}]
    expect:
      allocations: {/ml: 6, /web: 2, /batch: 2}
      placed: {/ml: {g1: 6}, /web: {g1: 2}, /batch: {c1: 2}}
      decisions:
        - {kind: return, consumer: /ml, from: /web, host: g1, deadline: "2026-01-01T00:05:04Z", slots: 6}
        - {kind: reclaim, consumer: /web, from: /batch, slots: 0}
`)
}

// TestOwnBalanceFalse runs one scenario with balance: false and with
// balance: true. Without balancing, reclaim restores each layer's planned
// share (T0, on the allocations when the rebalance starts), the free slots
// left go to leaves below their full layered target; returns happen as
// ever.
func TestOwnBalanceFalse(t *testing.T) {
	const tmpl = `
plan:
  rules: 3
  policy: {reclaim: share_ratio, balance: BAL}
  consumers:
    - {path: /A, own: [{host: h1}], lend_grace: 30s}
    - {path: /B}
    - {path: /C}
hosts:
  - {name: h1, slots: 4}
  - {name: h2, slots: 8}
STEPS
`
	// seq 4: B asks 12. Public pool: h2 8 + A's 4 lent = 12, all to B.
	// balance: false: T0 = B's demand capped at max(P 4, held 0) = 4
	// (reclaim phase: 4 from the free public slots), then the leftover
	// phase grants the rest up to T = 12: two grant rows on h2, then
	// A's slots (lend).
	step1 := `
  - events: [{type: demand, demands: {/B: 12}}]
    expect:
      allocations: {/B: 12}
      placed: {/B: {h2: 8, h1: 4}}
      decisions:
        - {kind: grant, consumer: /B, host: h2, slots: 8}
        - {kind: lend, consumer: /B, from: /A, host: h1, slots: 4}`
	// seq 5: C asks 6. balance true: T = 6, 6: C reclaims 6 from B.
	// balance false: T0 over the public pool (12, P 4, 4, 4): B's demand
	// capped at max(4, 12) = 12, C's at max(4, 0) = 4: T0 = 8, 4. C
	// reclaims 4 from B; the leftover phase has no free slot: B 8, C 4
	// (T is 6, 6; B keeps what it held above its guarantee).
	// Placement (share_ratio's, unchanged): B's slots above its target,
	// hosts by name, are what C may take: A's lent h1 first.
	// seq 6 (00:00:05): A asks 2: own layer 2, nothing free: 2 back from
	// the borrower on h1, C (return, deadline + 30s), in both modes.
	// balance true: public 10 = 5, 5: C (4 after the return) reclaims 1
	// from B (6).
	// balance false: public 10, P = 4, 3, 3 (/A gets the slot left);
	// held when the rebalance starts (before the return): B 8, C 4: T0
	// demands B min(12, max(3, 8)) = 8, C min(6, max(3, 4)) = 4: T0 =
	// 6, 4. C, 2 after the return, reclaims 2 from B (8 > 6): B 6, C 4.
	// T = 5, 5, but no slot is free and nobody reclaims above T0.
	bal := step1 + `
  - events: [{type: demand, demands: {/C: 6}}]
    expect:
      allocations: {/B: 6, /C: 6}
      placed: {/B: {h2: 6}, /C: {h2: 2, h1: 4}}
      decisions:
        - {kind: reclaim, consumer: /C, from: /B, slots: 6}
  - events: [{type: demand, demands: {/A: 2}}]
    expect:
      allocations: {/A: 2, /B: 5, /C: 5}
      decisions:
        - {kind: return, consumer: /A, from: /C, host: h1, deadline: "2026-01-01T00:00:35Z", slots: 2}
        - {kind: reclaim, consumer: /C, from: /B, slots: 1}`
	unbal := step1 + `
  - events: [{type: demand, demands: {/C: 6}}]
    expect:
      allocations: {/B: 8, /C: 4}
      placed: {/B: {h2: 8}, /C: {h1: 4}}
      decisions:
        - {kind: reclaim, consumer: /C, from: /B, host: h1, slots: 4}
  - events: [{type: demand, demands: {/A: 2}}]
    expect:
      allocations: {/A: 2, /B: 6, /C: 4}
      placed: {/A: {h1: 2}, /B: {h2: 6}, /C: {h1: 2, h2: 2}}
      decisions:
        - {kind: return, consumer: /A, from: /C, host: h1, deadline: "2026-01-01T00:00:35Z", slots: 2}
        - {kind: reclaim, consumer: /C, from: /B, host: h2, slots: 2}`
	t.Run("balance=true", func(t *testing.T) {
		runYAML(t, strings.NewReplacer("BAL", "true", "STEPS", "steps:"+bal).Replace(tmpl))
	})
	t.Run("balance=false", func(t *testing.T) {
		runYAML(t, strings.NewReplacer("BAL", "false", "STEPS", "steps:"+unbal).Replace(tmpl))
	})
}

// TestOwnRules3Gate: New() stays a model of versions 1 and 2 (rules 3
// refused, ownership under priority or balance: false not modelled);
// NewRules3 accepts rules 3 and folds them; under versions 1 and 2
// NewRules3 keeps the earlier reach. A plan event's own ownership fields
// (events.Plan carries them) are read as an OwnedPlan's.
func TestOwnRules3Gate(t *testing.T) {
	ownPlan := func(rules int, reclaim string, balance *bool) *events.PlanChange {
		p := planV(rules, reclaim, "", balance, cons("/A", 1, 0), cons("/B", 1, 0))
		p.Plan.Consumers[0].Own = []events.OwnEntry{{Host: "h1"}}
		return p
	}
	if _, err := New().Apply(1, time.Unix(1, 0), ownPlan(3, "share_ratio", nil)); !errors.Is(err, ErrUnknownRules) {
		t.Errorf("New, rules 3: %v", err)
	}
	for _, c := range []struct {
		rules   int
		reclaim string
		balance *bool
		want    error
	}{
		{3, "priority", nil, nil},
		{3, "share_ratio", boolp(false), nil},
		{3, "share_ratio", nil, nil},
		{2, "priority", nil, ErrNotModelled},
		{1, "share_ratio", boolp(false), ErrNotModelled},
		{4, "share_ratio", nil, ErrUnknownRules},
	} {
		m := NewRules3()
		_, err := m.Apply(1, time.Unix(1, 0), ownPlan(c.rules, c.reclaim, c.balance))
		if !errors.Is(err, c.want) && !(err == nil && c.want == nil) {
			t.Errorf("rules %d %s balance %v: %v, want %v", c.rules, c.reclaim, c.balance, err, c.want)
		}
		if err == nil && (!m.hasOwnership() || m.Rules() != c.rules) {
			t.Errorf("rules %d %s: ownership %v, version %d", c.rules, c.reclaim, m.hasOwnership(), m.Rules())
		}
	}
	// the plan event's fields and an OwnedPlan fold alike
	a, b := NewRules3(), NewRules3()
	p := ownPlan(3, "priority", nil)
	p.Plan.Policy.ReclaimForPreference = boolp(true)
	p.Plan.Consumers[0].Lend = boolp(false)
	mustApply(t, a, 1, p)
	mustApply(t, b, 1, &OwnedPlan{Plan: planV(3, "priority", "", nil, cons("/A", 1, 0), cons("/B", 1, 0)).Plan,
		ReclaimForPreference: boolp(true), Owners: []Owner{{Path: "/A", Own: []OwnEntry{{Host: "h1"}}, Lend: boolp(false)}}})
	for _, m := range []*Model{a, b} {
		mustApply(t, m, 2, &events.HostUp{Host: "h1", Slots: 4})
		mustApply(t, m, 3, &events.HostUp{Host: "h2", Slots: 4})
		mustApply(t, m, 4, demand("/B", 8))
	}
	if !a.pol.reclaimForPreference || a.nodes["/A"].lend || a.Allocations()["/B"] != b.Allocations()["/B"] ||
		a.Allocations()["/B"] != 4 {
		t.Errorf("plan event fields: %+v %v, OwnedPlan %v", a.pol, a.Allocations(), b.Allocations())
	}
}

// TestOwnPriorityPreference: a leaf lends its idle owned slots to its
// sibling through the parent's pool; when it wants them again,
// reclaim_for_preference decides which slots move, not how many each
// holds: false, the owner uses the idle public slots first and takes back
// only the rest; true, it takes its own slots back and the borrower is
// moved onto the idle slots (rule own.return).
func TestOwnPriorityPreference(t *testing.T) {
	const tmpl = `
plan:
  rules: 3
  policy: {reclaim: priority, reclaim_for_preference: FLAG}
  consumers:
    - {path: /P, own: [{host: p1}]}
    - {path: /P/a, own: [{host: p1, slots: 4}]}
    - {path: /P/b}
    - {path: /Q}
hosts:
  - {name: p1, slots: 6}   # /P/a owns 4 of it, P's private pool the other 2
  - {name: q1, slots: 2}   # public
steps:
  # seq 4. Pool P: its private 2 and a's idle 4 lent (lend_grace 0: a
  # and b may borrow them, one group with the private slots): 6, P over
  # the pool 3, 3. b is entitled to 3: P's private part first (2), then
  # a's part (1, kind lend); it borrows 3 more (cap 3 + 3), a's part.
  - events: [{type: demand, demands: {/P/b: 6}}]
    expect:
      allocations: {/P/b: 6}
      placed: {/P/b: {p1: 6}}
      decisions:
        - {kind: grant, consumer: /P/b, host: p1, rule: priority.entitled, slots: 2}
        - {kind: lend, consumer: /P/b, from: /P/a, host: p1, rule: priority.entitled, slots: 1}
        - {kind: lend, consumer: /P/b, from: /P/a, host: p1, rule: priority.borrow, slots: 3}
STEPS
`
	// seq 5. a asks 3: its own layer is 3; none of its slots is free,
	// q1's 2 are idle (nobody else wants more). false: a takes the 2 idle
	// slots (own.use, public tier) and 1 back from b (return): a 3, b 5.
	// Its 2 slots on q1 are its own layer's, not the public layer's. Q
	// asks 2 (seq 6): the public layer has no slot left to divide (q1
	// serves a's own layer, a's other slots are in P's pool): Q waits.
	off := `
  - events: [{type: demand, demands: {/P/a: 3}}]
    expect:
      allocations: {/P/a: 3, /P/b: 5}
      placed: {/P/a: {q1: 2, p1: 1}, /P/b: {p1: 5}}
      decisions:
        - {kind: grant, consumer: /P/a, host: q1, rule: own.use, slots: 2}
        - {kind: return, consumer: /P/a, from: /P/b, host: p1, rule: own.return, slots: 1}
  - events: [{type: demand, demands: {/Q: 2}}]
    expect:
      allocations: {/P/a: 3, /P/b: 5, /Q: 0}`
	// true: a takes its 3 back from b (return) and b is granted the 2
	// idle slots (rule own.return): the same counts, a 3, b 5. Q asks 2:
	// public layer q1's 2, held by b (G 0 there: P(/P) = P(/Q) = 1, /P's
	// 1 to /P/a); Q is entitled to 1 and reclaims it from b.
	on := `
  - events: [{type: demand, demands: {/P/a: 3}}]
    expect:
      allocations: {/P/a: 3, /P/b: 5}
      placed: {/P/a: {p1: 3}, /P/b: {p1: 3, q1: 2}}
      decisions:
        - {kind: return, consumer: /P/a, from: /P/b, host: p1, rule: own.return, slots: 3}
        - {kind: grant, consumer: /P/b, host: q1, rule: own.return, slots: 2}
  - events: [{type: demand, demands: {/Q: 2}}]
    expect:
      allocations: {/P/a: 3, /P/b: 4, /Q: 1}
      decisions:
        - {kind: reclaim, consumer: /Q, from: /P/b, host: q1, rule: priority.reclaim, slots: 1}`
	t.Run("false", func(t *testing.T) { runYAML(t, strings.NewReplacer("FLAG", "false", "STEPS", off).Replace(tmpl)) })
	t.Run("true", func(t *testing.T) { runYAML(t, strings.NewReplacer("FLAG", "true", "STEPS", on).Replace(tmpl)) })
}
