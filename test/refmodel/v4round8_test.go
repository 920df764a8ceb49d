package refmodel

import "testing"

// Round 8 of the differential's adjudication (test/refmodel/AMBIGUITIES.md,
// "Round 8"): each test is a shrunk log whose first difference the spec,
// worked by hand, decided against the model.

// TestRules4ShareRatioGrantIsPlacedInTheTierItComesFrom: under share_ratio
// with preemption and balance /a (reclaim_grace 1m, no demand) owns 2 of
// h3's 9 slots; /b asks 3 and /c 7. The public pool is the 7 public slots
// and /a's 2 lent (lend_grace 0), a class /a may not use, so divided first
// (section 5: "the most restrictive class first"): 1 each to /b and /c;
// then the public slots, /b 2 and /c 5. A grant is placed in the tier it
// comes from (section 5, "Placement with ownership"): /c, first in the
// claimant order, takes 1 of /a's slots and 5 public ones, not both of
// /a's (decision 454; gen.GenerateOwned seed 272, event 2, shrunk).
func TestRules4ShareRatioGrantIsPlacedInTheTierItComesFrom(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /a, own: [{group: g2, slots: 2}], reclaim_grace: 1m}
    - {path: /b}
    - {path: /c}
hosts:
  - {name: h3, group: g2, slots: 9}
steps:
  - events: [{type: demand, demands: {/b: 3, /c: 7}}]
    expect:
      allocations: {/b: 3, /c: 6}
      decisions:
        - {kind: grant, consumer: /c, host: h3, slots: 5, rule: share_ratio.grant}
        - {kind: lend, consumer: /c, from: /a, host: h3, slots: 1, rule: share_ratio.grant}
        - {kind: grant, consumer: /b, host: h3, slots: 2, rule: share_ratio.grant}
        - {kind: lend, consumer: /b, from: /a, host: h3, slots: 1, rule: share_ratio.grant}
`)
}

// TestRules4ShareRatioLentSlotsANearerLeafDoesNotNeed: /a (max 2) owns 8
// of h1's 11 slots; /a/a (reclaim_grace 1m) asks 9, /b/b (max 67% of its
// parent's planned share 5, so 3) asks 24. /a's pool gives /a/a its max, 2,
// and lends 6 upward, a class /a/a may not borrow, divided first in the
// public pool: /b/b's 3 come from it. /b/b, first in the claimant order,
// takes 3 of /a's slots though /a/a has not taken its 2 yet: 5 are left
// for it, so no slot a nearer leaf needs goes outside /a (section 5's
// private-slot property counted in slots; decision 454; withOwnership seed
// 602, event 2, shrunk).
func TestRules4ShareRatioLentSlotsANearerLeafDoesNotNeed(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /a, max: 2, own: [{group: gpu, slots: 8}]}
    - {path: /a/a, reclaim_grace: 1m}
    - {path: /b}
    - {path: /b/b, max: "67%"}
hosts:
  - {name: h1, group: gpu, slots: 11}
steps:
  - events: [{type: demand, demands: {/a/a: 9, /b/b: 24}}]
    expect:
      allocations: {/a/a: 2, /b/b: 3}
      decisions:
        - {kind: lend, consumer: /b/b, from: /a, host: h1, slots: 3, rule: share_ratio.grant}
        - {kind: grant, consumer: /a/a, host: h1, slots: 2, rule: share_ratio.grant}
`)
}

// TestRules4ShareRatioHolderKeepsWhereItSitsAndTheClaimantTakesItsDue:
// /a (reclaim_grace 1m), /b and /c hold 4 public slots each of h1's 12;
// /d's h2 comes up with 6 slots, 4 of them /d's (lent, lend_grace 0, a
// class /a may not use). The public pool's division gives /d's class 2 to
// /b and 2 to /c, and the public slots /a 6, /b 6, /c 2. /c is at its
// target and keeps its 4 public slots (no move, #329, #340), so /b is due
// /c's 2 of /d's class instead of 2 public ones: /b takes /d's 4 and /a the
// 2 public slots of h2, nobody moves (decision 454; withOwnership seed 641,
// event 4, shrunk).
func TestRules4ShareRatioHolderKeepsWhereItSitsAndTheClaimantTakesItsDue(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /a, reclaim_grace: 1m}
    - {path: /b}
    - {path: /c}
    - {path: /d, own: [{group: default, slots: 4}]}
hosts:
  - {name: h1, group: gpu, slots: 12}
steps:
  - events: [{type: demand, demands: {/a: 9, /b: 8}}]
  - events: [{type: demand, demands: {/c: 4}}]
    expect:
      allocations: {/a: 4, /b: 4, /c: 4}
  - events: [{type: host_up, host: h2, group: default, slots: 6}]
    expect:
      allocations: {/a: 6, /b: 8, /c: 4}
      decisions:
        - {kind: own, consumer: /d, host: h2, slots: 4, rule: own.assign}
        - {kind: lend, consumer: /b, from: /d, host: h2, slots: 4, rule: share_ratio.grant}
        - {kind: grant, consumer: /a, host: h2, slots: 2, rule: share_ratio.grant}
`)
}

// TestRules4ShareRatioReclaimFollowsTheVictimWalkOnOneHost: under
// share_ratio /b owns 6 of h2's 11 slots; /b/b (priority 2) holds 5 and
// /b/c (priority 3) 6. /a/b asks 9 and /b/a 21: the targets are /a/b 3,
// /b/a 2, /b/b 3, /b/c 3. Section 4's pairing: /a/b first (deficit 3),
// the victim walk meets /b/c (3 over) before /b/b (2 over), so `reclaim
// /a/b from /b/c 3`, then `reclaim /b/a from /b/b 2`. /b/c sits on /b's
// private part, which /a/b may hold but not take while /b/a needs it; on
// one host the slot's part is only accounting, so /a/b takes the public
// seat /b/b sat on and /b/b /b's part, and /b/a does not take the slot
// back from /a/b by a return (decision 455; withOwnership seed 311,
// shrunk). The model recorded `reclaim /a/b from /b/b 2`, `reclaim /a/b
// from /b/c 1`, `reclaim /b/a from /b/c 2`.
func TestRules4ShareRatioReclaimFollowsTheVictimWalkOnOneHost(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /a}
    - {path: /a/b}
    - {path: /b, own: [{host: h2, slots: 6}]}
    - {path: /b/a}
    - {path: /b/b, priority: 2}
    - {path: /b/c, priority: 3}
hosts:
  - {name: h2, group: default, slots: 11}
steps:
  - events: [{type: demand, demands: {/b/b: 6, /b/c: 9}}]
    expect:
      allocations: {/b/b: 5, /b/c: 6}
  - events: [{type: demand, demands: {/a/b: 9, /b/a: 21}}]
    expect:
      allocations: {/a/b: 3, /b/a: 2, /b/b: 3, /b/c: 3}
      decisions:
        - {kind: reclaim, consumer: /a/b, from: /b/c, host: h2, slots: 3, rule: share_ratio.reclaim}
        - {kind: reclaim, consumer: /b/a, from: /b/b, host: h2, slots: 2, rule: share_ratio.reclaim}
`)
}
