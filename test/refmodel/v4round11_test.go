package refmodel

import "testing"

// Round 11 of the differential's adjudication (test/refmodel/AMBIGUITIES.md,
// "Round 11"): each test is a shrunk log whose first difference the spec,
// worked by hand, or a decision where it is silent, decided against the
// model.

// TestRules4ShareRatioHolderSitsWhereItsDivisionPutsIt: under share_ratio
// with preemption and balance, h1 (5 slots) holds /b's 1 owned slot, /c's
// 2 and 2 public ones; h2 has 4 and h3 9 public slots. /c/a's
// reclaim_grace 5m makes the class /b and /c lend across the root (grace
// 0) a restrictive one, so the seating puts a borrower on it before the
// public part (#218, #332). /a asks 7: h3's 4 and the lent 3 of h1 (/b's
// and /c's slots). /c/a then asks 1: /c's private pool gives it 1 (section
// 5's layered fold), the public pool /a 5 public slots and the 2 lent ones
// left (/b's and /c's other slot). /a sat on all 3 lent slots as the
// rebalance started, one beyond its division, and on 4 public, one short:
// with h1's 2 public slots free, it sits on one of them and /c's slot is
// free for /c/a, a grant on h1, its ancestor's private host (section 5: "a
// grant is placed in the tier it comes from"); nothing moves, since which
// part a slot is in is derived from how many slots each leaf holds
// (ruling 8's seating). The model made /c/a's take-back a return from /a,
// compensated /a with the host with most free public slots, h3, and
// swapped the two (ruling 9): /c/a on a public slot of h3 (decision 499;
// withOwnership seed 895, event 5, shrunk).
func TestRules4ShareRatioHolderSitsWhereItsDivisionPutsIt(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /a}
    - {path: /b, own: [{host: h1, slots: 1}]}
    - {path: /c, own: [{host: h1, slots: 2}]}
    - {path: /c/a, reclaim_grace: 5m}
hosts:
  - {name: h1, group: g1, slots: 5}
  - {name: h2, group: g1, slots: 4}
  - {name: h3, group: g1, slots: 9}
steps:
  - events: [{type: demand, demands: {/a: 7}}]
    expect:
      allocations: {/a: 7}
      decisions:
        - {kind: grant, consumer: /a, host: h3, slots: 4, rule: share_ratio.grant}
        - {kind: lend, consumer: /a, from: /b, host: h1, slots: 1, rule: share_ratio.grant}
        - {kind: lend, consumer: /a, from: /c, host: h1, slots: 2, rule: share_ratio.grant}
  - events: [{type: demand, demands: {/c/a: 1}}]
    expect:
      allocations: {/a: 7, /c/a: 1}
      decisions:
        - {kind: grant, consumer: /c/a, host: h1, slots: 1, rule: share_ratio.grant}
`)
}

// TestRules4ShareRatioDuesAreSwappedOnlyWhereRoomIsShort: under
// share_ratio with preemption and balance /a (max 14) owns all of h1's 9
// slots; h2 (9) and h3 (2) are public. /a/a (share 4, max 8) asks 12, /a/b
// (share 5) 6. /a's pool divides its 9 slots 4 to /a/a, 5 to /a/b; the
// public pool gives /a/a 4 more and /a/b 1 (within /a's 14). As the third
// step ends /a/a holds 6 of h1 and 2 of h2, /a/b 3 of h1 and 3 of h2. /a/a
// then finishes 3: the release takes the public slots first (h2's 2),
// then h1's 1, and /a/a, asking as much as before, is given 3 again: it
// holds 5 of /a's slots and no public one, so it is due 3 public ones
// ("a grant is placed in the tier it comes from", section 5), and the
// public hosts have 8 free: h2, the most free, 3. /a/b, at its target,
// keeps its 2 public slots beyond its public due where it sits (#329);
// its due of /a's slots is left unused, nobody has to move. The model
// swapped /a/b's dues with /a/a's (#340) though the public slots left
// room enough: `grant /a/a h1 1`, `grant /a/a h2 2` (decision 500;
// withOwnership seed 205, event 12, shrunk).
func TestRules4ShareRatioDuesAreSwappedOnlyWhereRoomIsShort(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /a, max: 14, own: [{host: h1}]}
    - {path: /a/a, share: 4, max: 8}
    - {path: /a/b, share: 5}
hosts:
  - {name: h1, group: g1, slots: 9}
  - {name: h2, group: g1, slots: 9}
  - {name: h3, group: g1, slots: 2}
steps:
  - events: [{type: demand, demands: {/a/a: 12}}]
    expect:
      allocations: {/a/a: 8}
  - events: [{type: demand, demands: {/a/b: 10}}]
    expect:
      allocations: {/a/a: 6, /a/b: 8}
  - events: [{type: demand, demands: {/a/b: 6}}]
    expect:
      allocations: {/a/a: 8, /a/b: 6}
      decisions:
        - {kind: release, consumer: /a/b, host: h2, slots: 2, rule: release.demand_dropped}
        - {kind: grant, consumer: /a/a, host: h2, slots: 2, rule: share_ratio.grant}
  - events: [{type: release, consumer: /a/a, slots: 3}]
    expect:
      allocations: {/a/a: 8, /a/b: 6}
      decisions:
        - {kind: release, consumer: /a/a, host: h1, slots: 1, rule: release.finished}
        - {kind: release, consumer: /a/a, host: h2, slots: 2, rule: release.finished}
        - {kind: grant, consumer: /a/a, host: h2, slots: 3, rule: share_ratio.grant}
`)
}
