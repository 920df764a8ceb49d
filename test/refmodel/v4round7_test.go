package refmodel

import (
	"fmt"
	"testing"
)

// Round 7 of the differential's adjudication (test/refmodel/AMBIGUITIES.md,
// "Round 7"): each test is a shrunk log whose first difference the spec,
// worked by hand, or the lead's decision, decided against the model.

// TestRules4MetLeafServedByADeeperPoolWaitsFromThisEvent: under priority
// (parent enforcement) /b owns 4 of h2's 9 slots, 1 of them /b/b's; /b/a
// asks 9 and /b/b 3 before h2 comes up. /b's pool (its 3 private slots)
// gives /b/b 1 and /b/a 1 up to their G, then /b/a (waiting since the
// demand, seq 2) borrows the third; /b/b takes its G of the public pool
// and /b/a its G + borrow_limit there. /b/b's demand is then met, yet
// /b's pool serves it: settling to rest, it waits from this event (seq 3),
// after /b/a (decision 411, section 4's "waiting since"), so /b's borrow
// round seats /b/a's slot again and the event ends /b/a 4, /b/b 3 with two
// slots idle under the borrow caps. As a missing entry (0) /b/b came
// first at the settle and /b/a ended with 5 (withOwnership seed 372,
// event 4, shrunk).
func TestRules4MetLeafServedByADeeperPoolWaitsFromThisEvent(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {enforcement: parent, reclaim: priority}
  consumers:
    - {path: /a}
    - {path: /b, own: [{host: h2, slots: 4}]}
    - {path: /b/a}
    - {path: /b/b, own: [{host: h2, slots: 1}], share: 3}
    - {path: /b/c, share: 3}
steps:
  - events: [{type: demand, demands: {/b/a: 9, /b/b: 3}}]
    expect:
      allocations: {}
  - events: [{type: host_up, host: h2, slots: 9}]
    expect:
      allocations: {/b/a: 4, /b/b: 3}
      decisions:
        - {kind: grant, consumer: /b/a, host: h2, slots: 2, rule: priority.borrow}
        - {kind: grant, consumer: /b/a, host: h2, slots: 2, rule: priority.entitled}
        - {kind: grant, consumer: /b/b, host: h2, slots: 1, rule: own.use}
        - {kind: grant, consumer: /b/b, host: h2, slots: 2, rule: priority.entitled}
`)
}

// TestRules4ReclaimMadeUpByAnEntitledGainElsewhereIsAMove: under priority
// /b (max 12) owns h3; /b/b holds 6 on the public h1 and 6 on h3. /c/a
// asks 5: its G of the public pool is 3, and /b/b's share of the end state
// is 7 on h3 (its pool's last slot) and 3 on h1. /b/b gives up 3 on h1 and
// gains 1 on h3: one slot it gives up because its share lies on another
// host, its count unchanged, which ruling 7 records as a move
// (`release.moved`, its reclaim_grace, ruling 13) and `/c/a` takes as a
// free slot; the other two are what /c/a's reclaim takes (decision 413;
// gen.GenerateOwned seed 532, event 4, shrunk). The model recorded a
// reclaim of 3 beside /b/b's grant.
func TestRules4ReclaimMadeUpByAnEntitledGainElsewhereIsAMove(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: priority}
  consumers:
    - {path: /b, max: 12, own: [{host: h3}]}
    - {path: /b/b}
    - {path: /c}
    - {path: /c/a, reclaim_grace: 5m}
hosts:
  - {name: h1, group: g2, slots: 6}
steps:
  - events: [{type: demand, demands: {/b/b: 24}}]
    expect:
      allocations: {/b/b: 6}
  - events: [{type: host_up, host: h3, group: g2, slots: 7}]
    expect:
      allocations: {/b/b: 12}
      placed: {/b/b: {h1: 6, h3: 6}}
  - events: [{type: demand, demands: {/c/a: 5}}]
    expect:
      allocations: {/b/b: 10, /c/a: 3}
      placed: {/b/b: {h1: 3, h3: 7}, /c/a: {h1: 3}}
      decisions:
        - {kind: release, consumer: /b/b, host: h1, slots: 1, rule: release.moved, deadline: "+0s"}
        - {kind: grant, consumer: /b/b, host: h3, slots: 1, rule: priority.entitled}
        - {kind: grant, consumer: /c/a, host: h1, slots: 1, rule: priority.entitled}
        - {kind: reclaim, consumer: /c/a, from: /b/b, host: h1, slots: 2, rule: priority.reclaim, deadline: "+0s"}
`)
}

// TestRules4ReclaimOfAnAncestorsPrivateSlotIsAReturn: under priority /b
// owns h2's one slot; /a/a/c holds all 7 of h2, one of them /b's private
// slot (it sits there in the seating the rebalance starts from). /b/c/c
// asks 6: /b's pool (S = 1) gives it nothing (its G there is 0: /b/c and
// /b/d tie and the remainder goes to the higher priority /b/d, section 2;
// borrow cap G + G = 0), and the public pool (S = 7, /b's slot lent in)
// gives it G = 1, which it reclaims from /a/a/c (G 4). A reclaim takes
// the victim's slots class by class, the most restrictive first (ruling
// 1): /b's lent class (lend_grace 0, which /b/c/c's reclaim_grace of 1m
// could not use were it not /b's own descendant) comes before the public
// slots, so the slot taken is /b's private one, where /a/a/c sits: ruling
// 8's take-back, `return` with /b's lend_grace (decision 414;
// withOwnership seed 488, event 3, shrunk). With /b's lend_grace 2m the
// lent class is one every leaf may use, the pool's own (public) slots go
// first, and it stays a reclaim (/a/a/c's reclaim_grace, 0).
func TestRules4ReclaimOfAnAncestorsPrivateSlotIsAReturn(t *testing.T) {
	const plan = `
plan:
  rules: 4
  policy: {reclaim: priority}
  consumers:
    - {path: /a, share: 5}
    - {path: /a/a}
    - {path: /a/a/c}
    - {path: /b, own: [{group: default, slots: 1}], share: 5%s}
    - {path: /b/c}
    - {path: /b/c/c, reclaim_grace: 1m}
    - {path: /b/d, priority: 3}
hosts:
  - {name: h2, group: default, slots: 7}
steps:
  - events: [{type: demand, demands: {/a/a/c: 12}}]
    expect:
      allocations: {/a/a/c: 7}
  - events: [{type: demand, demands: {/b/c/c: 6}}]
    expect:
      allocations: {/a/a/c: 6, /b/c/c: 1}
      decisions:
`
	runYAML(t, fmt.Sprintf(plan, "")+`
        - {kind: return, consumer: /b/c/c, from: /a/a/c, host: h2, slots: 1, rule: own.return, deadline: "+0s"}
        - {kind: reclaim, consumer: /b/c/c, from: /a/a/c, slots: 0}
`)
	runYAML(t, fmt.Sprintf(plan, ", lend_grace: 2m")+`
        - {kind: reclaim, consumer: /b/c/c, from: /a/a/c, host: h2, slots: 1, rule: priority.reclaim, deadline: "+0s"}
        - {kind: return, consumer: /b/c/c, from: /a/a/c, slots: 0}
`)
}

// TestRules4ShareRatioClaimantTakesNoFreeSlotANearerLeafMayTake: under
// share_ratio (preemption, balance) /a asks 9 and /b/a 8 in one event; /b
// owns h1's 8 slots, /c h3's 12 (idle, lent). /a comes first in the
// claimant order (deficit per share 9 against 8), and its fold order
// lists /b's lent part before /c's (lender path); but /b/a, nearer to
// /b's part, has unmet demand and room, so /a may not take it (ruling 4's
// "may take"; section 5: "a slot privately owned by X is used outside X's
// subtree only while no descendant of X with unmet demand could use it"):
// `lend /a from /c 9`, `grant /b/a 8`. The model lent /a /b's 8 slots and
// had /b/a take them back by a return in the same event (decision 415;
// gen.GenerateOwned seed 574, event 3, shrunk).
func TestRules4ShareRatioClaimantTakesNoFreeSlotANearerLeafMayTake(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio, reclaim_for_preference: true}
  consumers:
    - {path: /a}
    - {path: /b, own: [{host: h1}]}
    - {path: /b/a}
    - {path: /c, own: [{host: h3}]}
hosts:
  - {name: h1, group: g2, slots: 8}
  - {name: h3, group: g2, slots: 12}
steps:
  - events: [{type: demand, demands: {/a: 9, /b/a: 8}}]
    expect:
      allocations: {/a: 9, /b/a: 8}
      placed: {/a: {h3: 9}, /b/a: {h1: 8}}
      decisions:
        - {kind: grant, consumer: /b/a, host: h1, slots: 8, rule: share_ratio.grant}
        - {kind: lend, consumer: /a, from: /c, host: h3, slots: 9, rule: share_ratio.grant}
        - {kind: lend, consumer: /a, from: /b, slots: 0}
        - {kind: return, consumer: /b/a, from: /a, slots: 0}
`)
}

// TestRules4ShareRatioVictimGivesFirstWhatTheClaimantMayTake: under
// share_ratio (preemption, balance) /b owns h3's 3 gpu slots; /b/a holds
// them and 3 public slots of h2. /a/a asks 8 and /b/b 9: T /a/a 2, /b/a
// 3, /b/b 2. /a/a (first in the claimant order, by path) takes h2's free
// slot and reclaims one more from /b/a: of /b/a's slots it takes a public
// one, since /b/b, nearer to /b's part, has unmet demand (ruling 4's "may
// take"; section 5's private-slot property), not /b's private slot in
// /b's lent class, which it may hold but which leaves /b's own leaf on the
// public part (decision 416; withOwnership seed 413, event 4, shrunk).
// /b/b then reclaims its 2 from /b/a.
func TestRules4ShareRatioVictimGivesFirstWhatTheClaimantMayTake(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /a}
    - {path: /a/a}
    - {path: /b, own: [{group: gpu, slots: 7}]}
    - {path: /b/a}
    - {path: /b/b, reclaim_grace: 1m}
hosts:
  - {name: h2, group: default, slots: 4}
  - {name: h3, group: gpu, slots: 3}
steps:
  - events: [{type: demand, demands: {/b/a: 6}}]
    expect:
      allocations: {/b/a: 6}
  - events: [{type: demand, demands: {/a/a: 8, /b/b: 9}}]
    expect:
      allocations: {/a/a: 2, /b/a: 3, /b/b: 2}
      placed: {/a/a: {h2: 2}}
      decisions:
        - {kind: grant, consumer: /a/a, host: h2, slots: 1, rule: share_ratio.grant}
        - {kind: reclaim, consumer: /a/a, from: /b/a, host: h2, slots: 1, rule: share_ratio.reclaim, deadline: "+0s"}
        - {kind: reclaim, consumer: /b/b, from: /b/a, slots: 2, rule: share_ratio.reclaim, deadline: "+0s"}
`)
}

// TestRules4SwapFindsTheCompensationsPartFromItsGrant: under share_ratio
// (reclaim_for_preference false by default) /a owns h2's one slot and /c
// 4 of h1's 8 (gpu). /c/a holds 9: /c's 4, 4 public slots of h2 and /a's
// private slot (lent; the class group only /c/a may use comes first,
// ruling 1). /a/a (reclaim_grace 5m) asks 8: it takes /a's slot back from
// /c/a (ruling 8), and /c/a's compensation is a public slot of h1 (/c's 4
// are all /c/a's already). Ruling 9's swap matches the return with that
// compensation, which /a/a may hold: /c/a keeps /a's slot, /a/a is given
// the public one with the compensation's rule (#349), and nothing is
// returned. The model looked for the compensation's part in the seating
// (/c/a sits on /c's part on h1) and found /c's part, which /a/a may not
// hold, so it returned the slot and granted /c/a one (decision 417;
// withOwnership seed 589, event 5, shrunk).
func TestRules4SwapFindsTheCompensationsPartFromItsGrant(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /a, own: [{host: h2, slots: 1}]}
    - {path: /a/a, reclaim_grace: 5m}
    - {path: /c, own: [{group: gpu, slots: 4}]}
    - {path: /c/a}
hosts:
  - {name: h1, group: gpu, slots: 8}
  - {name: h2, group: default, slots: 10}
steps:
  - events: [{type: demand, demands: {/c/a: 9}}]
    expect:
      allocations: {/c/a: 9}
      decisions:
        - {kind: lend, consumer: /c/a, from: /a, host: h2, slots: 1, rule: share_ratio.grant}
  - events: [{type: demand, demands: {/a/a: 8}}]
    expect:
      allocations: {/a/a: 8, /c/a: 9}
      decisions:
        - {kind: grant, consumer: /a/a, slots: 8, rule: share_ratio.grant}
        - {kind: return, consumer: /a/a, from: /c/a, slots: 0}
        - {kind: grant, consumer: /c/a, slots: 0}
`)
}

// TestRules4SwapCancelsAReclaimOfTheOwnersOwnSlot: under priority (and
// reclaim_for_preference false, the default) /c owns h2's 4 slots and 4 of
// h4's, /b 4 of h4's; /b holds /c's 4 on h2 and one of /c's on h4 beside
// its own 4. /c asks 23: it takes its free own slots and returns from /b,
// and /b, still due a slot, reclaims one on h4 where /c sits on its own
// part. That reclaim is of the owner itself, which cancels against the
// return (ruling 9's swap as #410 and #431 read it): `return /c from /b 3`,
// no reclaim. The model found the reclaimed slot's part from where /b sat
// on h4 (its own part), not the part the reclaim took (/c's), and kept
// `return /c from /b 4` and `reclaim /b from /c 1` (decision 418;
// withOwnership seed 520, event 5, shrunk).
func TestRules4SwapCancelsAReclaimOfTheOwnersOwnSlot(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: priority}
  consumers:
    - {path: /b, own: [{group: default, slots: 4}], share: 5}
    - {path: /c, own: [{group: default, slots: 8}], priority: 3, reclaim_grace: 1m}
hosts:
  - {name: h2, group: default, slots: 4}
steps:
  - events: [{type: demand, demands: {/b: 9}}]
    expect:
      allocations: {/b: 4}
  - events: [{type: host_up, host: h4, group: default, slots: 10}]
    expect:
      allocations: {/b: 9}
  - events: [{type: demand, demands: {/c: 23}}]
    expect:
      allocations: {/b: 6, /c: 8}
      decisions:
        - {kind: grant, consumer: /c, host: h4, slots: 5, rule: own.use}
        - {kind: return, consumer: /c, from: /b, host: h2, slots: 3, rule: own.return, deadline: "+0s"}
        - {kind: reclaim, consumer: /b, from: /c, slots: 0}
`)
}

// TestRules4SwapStandInOnTheOwnersPartIsAReturn: under share_ratio
// (reclaim_for_preference false by default) /c owns all 10 slots of h1 and
// lends them (lend_grace 5m); /a/a (priority 2) and /b/a (its parent /b
// priority 2) hold 5 each. /c asks 1: it takes its slot back from the
// lowest-priority borrower seated on its part, /b/a (section 5's return
// order), and /b/a, due 5 (/b wins the tie of the targets by priority),
// reclaims one from /a/a. Ruling 9's swap (#410) leaves /b/a its slot and
// has /c take /a/a's instead; /a/a's slot is on /c's own part too, so /c
// takes its part back from /a/a: a return with /c's lend_grace, not a
// reclaim with /a/a's reclaim_grace (decision 419; withOwnership seed 179,
// event 6, shrunk).
func TestRules4SwapStandInOnTheOwnersPartIsAReturn(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /a}
    - {path: /a/a, priority: 2}
    - {path: /b, priority: 2}
    - {path: /b/a}
    - {path: /c, own: [{host: h1}], lend_grace: 5m}
hosts:
  - {name: h1, group: gpu, slots: 10}
steps:
  - events: [{type: demand, demands: {/b/a: 9}}]
    expect:
      allocations: {/b/a: 9}
  - events: [{type: demand, demands: {/a/a: 7}}]
    expect:
      allocations: {/a/a: 5, /b/a: 5}
  - events: [{type: demand, demands: {/c: 1}}]
    expect:
      allocations: {/a/a: 4, /b/a: 5, /c: 1}
      decisions:
        - {kind: return, consumer: /c, from: /a/a, host: h1, slots: 1, rule: own.return, deadline: "+5m"}
        - {kind: reclaim, consumer: /c, from: /a/a, slots: 0}
        - {kind: return, consumer: /c, from: /b/a, slots: 0}
        - {kind: reclaim, consumer: /b/a, from: /a/a, slots: 0}
`)
}
