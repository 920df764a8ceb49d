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
