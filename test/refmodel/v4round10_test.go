package refmodel

import "testing"

// Round 10 of the differential's adjudication (test/refmodel/AMBIGUITIES.md,
// "Round 10"): each test is a shrunk log whose first difference the spec,
// worked by hand, or a decision where it is silent, decided against the
// model.

// TestRules4ShareRatioClaimantOrderIsTakenAsTheRebalanceStarts: under
// share_ratio with preemption and balance /b (share 5) owns 3 of h4's 8
// slots; h3 has 6. /a/a/a (share 3) asks 2 and /b 5: T /b 5 (3 of them
// its own), /a/a/a 2. #238 orders the rebalance by largest deficit per
// unit of share as the rebalance starts, before /b's own slots are in use:
// /b 5/5 before /a/a/a 2/3, and the leaves place their slots in that order
// (decision 473, the lead's reading (k)(ii)): /b takes its own 3, then the
// host with most free slots, h3, for its other 2; /a/a/a takes h4's public
// slots. The model served /a/a/a first (/b's deficit counted after its own
// layer, 2/5) and gave it h3 (gen.GenerateOwned seed 937, event 3, shrunk).
func TestRules4ShareRatioClaimantOrderIsTakenAsTheRebalanceStarts(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /a}
    - {path: /a/a}
    - {path: /a/a/a, share: 3}
    - {path: /b, share: 5, own: [{host: h4, slots: 3}]}
hosts:
  - {name: h3, group: g2, slots: 6}
  - {name: h4, group: g1, slots: 8}
steps:
  - events: [{type: demand, demands: {/a/a/a: 2, /b: 5}}]
    expect:
      allocations: {/a/a/a: 2, /b: 5}
      decisions:
        - {kind: grant, consumer: /b, host: h4, slots: 3, rule: own.use}
        - {kind: grant, consumer: /b, host: h3, slots: 2, rule: share_ratio.grant}
        - {kind: grant, consumer: /a/a/a, host: h4, slots: 2, rule: share_ratio.grant}
`)
}

// TestRules4ShareRatioVictimGivesUpAPublicSlotBeforeItsOwn: under
// share_ratio with preemption and balance /b owns 4 slots of group g2, all
// of h3; h2 (g1) has 3 public slots. /b asks 7: its own 4 and the public 3.
// /d asks 1: T /b 6 (4 own, 2 public), /d 1, nothing is free, /b is the
// victim. /b's slot on h3 is its own: taken, it would leave /b short while
// /d uses /b's private slot (section 5: "a slot privately owned by X is
// used outside X's subtree only while no descendant of X with unmet demand
// could use it"), and /d, due a public slot, "would use first" a public
// host (section 5's placement: public hosts before hosts lent by others).
// So `reclaim /d from /b` on h2. The model took h3, /b's part coming first
// in the public pool's class order (/a's reclaim_grace 1m makes /b's lent
// class the more restrictive), the victim's own shortfall uncounted
// (decision 485; gen.GenerateOwned seed 158, event 11, shrunk).
func TestRules4ShareRatioVictimGivesUpAPublicSlotBeforeItsOwn(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /a, reclaim_grace: 1m}
    - {path: /b, own: [{group: g2, slots: 4}]}
    - {path: /d}
hosts:
  - {name: h2, group: g1, slots: 3}
  - {name: h3, group: g2, slots: 4}
steps:
  - events: [{type: demand, demands: {/b: 7}}]
    expect:
      allocations: {/b: 7}
  - events: [{type: demand, demands: {/d: 1}}]
    expect:
      allocations: {/b: 6, /d: 1}
      decisions:
        - {kind: reclaim, consumer: /d, from: /b, host: h2, slots: 1, rule: share_ratio.reclaim}
`)
}

// TestRules4ShareRatioReclaimIsPlacedInTheTierItComesFrom: under
// share_ratio with preemption and balance /b owns all of h4 (2 slots); h1
// has 1 public slot. /b/b/a asks 3 and holds h4's 2 and h1's 1. /b/a asks
// 2: /b's pool gives /b/a 1 and /b/b/a 1, the public pool its slot to
// /b/a: T /b/a 2 (1 of /b's, 1 public), /b/b/a 1 (of /b's). /b/a reclaims 2
// from /b/b/a, "from the host the claimant would use first" (section 5),
// its slots placed "in the tier it comes from" (section 5, as a grant's,
// #454): 1 on h4 and 1 on h1, /b/b/a keeping its slot of /b's pool. The
// model took both on h4, /b's part first in /b/a's fold order whatever
// the division gave it there (decision 486; gen.GenerateOwned seed 5,
// event 6, shrunk).
func TestRules4ShareRatioReclaimIsPlacedInTheTierItComesFrom(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio, reclaim_for_preference: true}
  consumers:
    - {path: /b, own: [{host: h4, preference: 10}]}
    - {path: /b/a}
    - {path: /b/b}
    - {path: /b/b/a}
hosts:
  - {name: h1, group: g2, slots: 1}
  - {name: h4, group: g1, slots: 2}
steps:
  - events: [{type: demand, demands: {/b/b/a: 3}}]
    expect:
      allocations: {/b/b/a: 3}
  - events: [{type: demand, demands: {/b/a: 2}}]
    expect:
      allocations: {/b/a: 2, /b/b/a: 1}
      decisions:
        - {kind: reclaim, consumer: /b/a, from: /b/b/a, host: h4, slots: 1, rule: share_ratio.reclaim}
        - {kind: reclaim, consumer: /b/a, from: /b/b/a, host: h1, slots: 1, rule: share_ratio.reclaim}
`)
}
