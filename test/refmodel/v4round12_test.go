package refmodel

import "testing"

// Round 12 of the differential's adjudication (test/refmodel/AMBIGUITIES.md,
// "Round 12"): each test is a shrunk log whose first difference the spec,
// worked by hand, or a decision where it is silent, decided against the
// model.

// TestRules4ReleaseGivesBackAHostsTierWhole: under share_ratio /a owns 1
// slot of h1, /b 2 of h1, /c all of h2 (4); h1's fourth slot is public.
// /d asks 8 and holds all of them: on h1 the public slot and the 3 lent by
// /a and /b, on h2 the 4 lent by /c. /d's demand drops to 3, so it releases
// 5, "the slots lent by others first, then public, ...; within a tier, the
// host holding most of its slots, then name" (section 5, "Placement with
// ownership"). Lent by others is one tier, whoever lent: h1 and h2 both
// hold 4 of /d's slots, so h1 by name, and /d gives back its 3 lent slots
// there; measured again (#234: "as it goes", after the hosts before), h2
// is the only host with lent slots left: 2 more. The model took the tier
// part by part, measured again after /a's one slot, and moved on to h2
// with its 4 (`release /d h1 1`, `release /d h2 4`; decision 510;
// gen.GenerateOwned seed 294, event 36, shrunk).
func TestRules4ReleaseGivesBackAHostsTierWhole(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /a, own: [{host: h1, slots: 1}]}
    - {path: /b, own: [{host: h1, slots: 2}]}
    - {path: /c, own: [{host: h2}]}
    - {path: /d}
hosts:
  - {name: h1, group: g1, slots: 4}
  - {name: h2, group: g1, slots: 4}
steps:
  - events: [{type: demand, demands: {/d: 8}}]
    expect:
      allocations: {/d: 8}
  - events: [{type: demand, demands: {/d: 3}}]
    expect:
      allocations: {/d: 3}
      decisions:
        - {kind: release, consumer: /d, host: h1, slots: 3, rule: release.demand_dropped}
        - {kind: release, consumer: /d, host: h2, slots: 2, rule: release.demand_dropped}
`)
}

// TestRules4PriorityReleaseSeatsByRuling8AsWritten: under priority with
// preemption /a owns 2 of h2's 4 slots and /a/b 1 of them; h3 (9) is
// public. /a/a asks 5: /a's pool gives it /a's private slot and the slot
// /a/b lends into it (h2), the public pool 3 more on h3, the host with
// most free slots. /a/a's demand drops to 4, so it releases 1, lent by
// others first (section 5). Which part of h2 its 2 slots are in is ruling
// 8's seating, which decision #383 takes as written for the keepers'
// seating under priority with preemption: pass 2 seats /a/a in /a's pool,
// "first X's private part ..., then the parts lent into X's pool", /a/b's
// part, before the public part (pass 3). So one of its h2 slots is lent
// by /a/b, and it goes first: `release /a/a h2 1`. The model seated a part
// lent in a class every leaf of the pool may use after the public part
// (#218's order under share_ratio), read /a/a's second h2 slot as public,
// and released on h3, the host holding most of its public slots (decision
// 511; gen.GenerateOwned seed 828, event 43, shrunk).
func TestRules4PriorityReleaseSeatsByRuling8AsWritten(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: priority}
  consumers:
    - {path: /a, own: [{host: h2, slots: 2}]}
    - {path: /a/a}
    - {path: /a/b, own: [{host: h2, slots: 1}]}
hosts:
  - {name: h2, group: g1, slots: 4}
  - {name: h3, group: g1, slots: 9}
steps:
  - events: [{type: demand, demands: {/a/a: 5}}]
    expect:
      allocations: {/a/a: 5}
      decisions:
        - {kind: grant, consumer: /a/a, host: h2, slots: 1, rule: priority.entitled}
        - {kind: lend, consumer: /a/a, from: /a/b, host: h2, slots: 1, rule: priority.borrow}
        - {kind: grant, consumer: /a/a, host: h3, slots: 3, rule: priority.entitled}
  - events: [{type: demand, demands: {/a/a: 4}}]
    expect:
      allocations: {/a/a: 4}
      decisions:
        - {kind: release, consumer: /a/a, host: h2, slots: 1, rule: release.demand_dropped}
`)
}

// TestRules4PriorityWithoutPreemptionReleaseSeatsRestrictiveFirst: under
// priority without preemption /a (no demand) owns 1 of h1's 4 slots; h3
// (11) is public; /c's reclaim_grace 1m makes /a's lent class (grace 0)
// one that some leaf of the public pool may not use. /b (share 4) asks 15
// and holds all of them: on h1 3 public slots and /a's lent one. It then
// finishes 5. Decision #218 seats a part lent in a restrictive class
// before the pool's own part, everywhere, and #383 keeps that for the
// keepers' seating under priority without preemption ("restrictiveFirst
// only under share_ratio or without preemption"; docs/rules.md section 16:
// the seating says "which tier a release takes from"). So /b sits first on
// /a's part of h1, which lent by others goes first; seated again after
// each host (#390), its slots left on h1 fill /a's part again, so h1 gives
// back all 4 before h3 gives 1. The model seated a release under priority
// by ruling 8's order (the public part first): `release /b h1 1`, then
// h3 4, the host holding most of its public slots (decision 512;
// withOwnership seed 668, event 23, shrunk).
func TestRules4PriorityWithoutPreemptionReleaseSeatsRestrictiveFirst(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: priority, preemption: false}
  consumers:
    - {path: /a, own: [{host: h1, slots: 1}]}
    - {path: /b, share: 4}
    - {path: /c, reclaim_grace: 1m}
hosts:
  - {name: h1, group: g1, slots: 4}
  - {name: h3, group: g1, slots: 11}
steps:
  - events: [{type: demand, demands: {/b: 15}}]
    expect:
      allocations: {/b: 15}
  - events: [{type: release, consumer: /b, slots: 5}]
    expect:
      allocations: {/b: 10}
      decisions:
        - {kind: release, consumer: /b, host: h1, slots: 4, rule: release.finished}
        - {kind: release, consumer: /b, host: h3, slots: 1, rule: release.finished}
`)
}
