package refmodel

import "testing"

// TestRules4ReclaimNettedOnTheHost: under priority (rules 4) a leaf
// reclaimed from in its private pool and given as many slots in the public
// pool on the same host keeps its slots where they run: its allocation on
// the host does not change, so no decision names it (section 7: "every
// change of an allocation is a decision row", allocations per consumer and
// host; docs/rules.md section 17, step 3.1, #99), and the claimant is
// granted the free slot (decision #363; withOwnership seed 217, event 4,
// shrunk).
func TestRules4ReclaimNettedOnTheHost(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: priority, enforcement: parent}
  consumers:
    - {path: /a, own: [{host: h1, slots: 4}]}
    - {path: /a/a, share: 4}
    - {path: /a/b}
hosts:
  - {name: h1, slots: 5}
steps:
  # pool /a (S 4): G /a/a 3, /a/b 1; /a/b takes 1 entitled and 1 borrowed.
  - events: [{type: demand, demands: {/a/b: 2}}]
    expect:
      allocations: {/a/b: 2}
  # /a/a is entitled to 3 in pool /a: 2 free, 1 reclaimed from /a/b (2 >
  # G 1), which the public pool gives its public slot on h1: /a/b's count
  # on h1 stays 2, so /a/a is granted 3 and /a/b is not named.
  - events: [{type: demand, demands: {/a/a: 3}}]
    expect:
      allocations: {/a/a: 3, /a/b: 2}
      placed: {/a/a: {h1: 3}, /a/b: {h1: 2}}
      decisions:
        - {kind: grant, consumer: /a/a, host: h1, slots: 3, rule: priority.entitled}
        - {kind: reclaim, consumer: /a/a, from: /a/b, slots: 0}
        - {kind: grant, consumer: /a/b, slots: 0}
`)
}

// TestRules4NoIdleMove: under priority (rules 4) a leaf holding public
// slots whose share now lies in its branch's private pool (a host of the
// parent's came up) is not moved there when the public slot it would
// leave stays free: such a move helps nobody and stops running work
// (ruling 7, seed 004's "minimize the impact to existing workload";
// decisions #347 and #364; withOwnership seed 185, event 3, shrunk). The
// private slot stays idle, lent up to the public pool.
func TestRules4NoIdleMove(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: priority}
  consumers:
    - {path: /b, own: [{host: h8}]}
    - {path: /b/b}
    - {path: /b/b/b}
hosts:
  - {name: h2, slots: 1}
steps:
  - events: [{type: demand, demands: {/b/b/b: 1}}]
    expect:
      allocations: {/b/b/b: 1}
      placed: {/b/b/b: {h2: 1}}
  - events: [{type: host_up, host: h8, slots: 1}]
    expect:
      allocations: {/b/b/b: 1}
      placed: {/b/b/b: {h2: 1}}
      decisions:
        - {kind: release, consumer: /b/b/b, slots: 0}
        - {kind: grant, consumer: /b/b/b, slots: 0}
`)
}

// TestRules4OwnersTakeBeforeExcess: two owners each sitting on the other's
// part (a plan swapped their hosts) take their parts back by returns, each
// from the other (ruling 11: an owner's gain is paired with the borrowers
// seated on its part at the start of the rebalance, and the return names
// the lender the borrower's lend named); the owners' excess is given back
// only after every owner's take (ruling 5's "after its returns"), so
// neither is recorded as a move and an own.use (decision #365).
func TestRules4OwnersTakeBeforeExcess(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /a}
    - {path: /b}
hosts:
  - {name: h1, slots: 1}
  - {name: h2, slots: 1}
steps:
  - events: [{type: demand, demands: {/a: 1}}]
    expect:
      allocations: {/a: 1}
      placed: {/a: {h1: 1}}
  - events: [{type: demand, demands: {/b: 1}}]
    expect:
      allocations: {/a: 1, /b: 1}
      placed: {/a: {h1: 1}, /b: {h2: 1}}
  - events:
      - type: plan
        plan:
          rules: 4
          policy: {reclaim: share_ratio}
          consumers:
            - {path: /a, own: [{host: h2}]}
            - {path: /b, own: [{host: h1}]}
    expect:
      allocations: {/a: 1, /b: 1}
      placed: {/a: {h2: 1}, /b: {h1: 1}}
      decisions:
        - {kind: return, consumer: /a, from: /b, slots: 1, rule: own.return, deadline: "+0s"}
        - {kind: return, consumer: /b, from: /a, slots: 1, rule: own.return, deadline: "+0s"}
        - {kind: release, consumer: /a, slots: 0}
        - {kind: grant, consumer: /b, slots: 0}
`)
}

// TestRules4OwnerMovesOntoItsOwnSlotUnderAMax: an owner whose capped
// parent holds its max on the owner's public slot still takes its own free
// slot (its own-layer use u) and gives the public slot back, its work
// moving onto its own slot (ruling 5: "If that takes it ... an ancestor
// above its max, it gives back the excess at once, in the release order
// ... rule release.moved, its work moving onto its own slots"), under every
// policy, without preemption too (ruling 7 keeps an owner's excess release
// apart from the moves). Decision #366, amending #244 (withOwnership seed
// 813, event 4, shrunk).
func TestRules4OwnerMovesOntoItsOwnSlotUnderAMax(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: priority, preemption: false}
  consumers:
    - {path: /a, max: 1}
    - {path: /a/a}
hosts:
  - {name: h2, slots: 2}
steps:
  - events: [{type: demand, demands: {/a/a: 1}}]
    expect:
      allocations: {/a/a: 1}
      placed: {/a/a: {h2: 1}}
  - events:
      - type: plan
        plan:
          rules: 4
          policy: {reclaim: priority, preemption: false}
          consumers:
            - {path: /a, max: 1, own: [{host: h1}]}
            - {path: /a/a, own: [{host: h1, slots: 1}]}
      - {type: host_up, host: h1, slots: 1}
    expect:
      allocations: {/a/a: 1}
      placed: {/a/a: {h1: 1}}
      decisions:
        - {kind: grant, consumer: /a/a, host: h1, slots: 1, rule: own.use}
        - {kind: release, consumer: /a/a, host: h2, slots: 1, rule: release.moved, deadline: "+0s"}
`)
}

// TestRules4IneligibleReleasedBeforeTheOwnersExcess: a plan makes the
// slot an owner holds on another's part one it may no longer hold (the
// part's owner does not lend) and gives it an own slot elsewhere: the owner
// takes its own slot, and the slot it may not hold is released with the
// lender's grace (ruling 10: release.lend_revoked, "The lending out grace
// period is enforced and may override the grace period of borrowers"),
// not given back as its excess moving onto its own slots (release.moved
// with its own reclaim_grace). Decision #367 (gen.GenerateOwned seed 371,
// event 4, shrunk).
func TestRules4IneligibleReleasedBeforeTheOwnersExcess(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /a, reclaim_grace: 5m}
    - {path: /c}
hosts:
  - {name: h5, slots: 1}
steps:
  - events: [{type: demand, demands: {/a: 1}}]
    expect:
      allocations: {/a: 1}
      placed: {/a: {h5: 1}}
  - events:
      - {type: host_up, host: h4, slots: 1}
      - type: plan
        plan:
          rules: 4
          policy: {reclaim: share_ratio}
          consumers:
            - {path: /a, reclaim_grace: 5m, own: [{host: h4}]}
            - {path: /c, lend: false, lend_grace: 30s, own: [{host: h5}]}
    expect:
      allocations: {/a: 1}
      placed: {/a: {h4: 1}}
      decisions:
        - {kind: grant, consumer: /a, host: h4, slots: 1, rule: own.use}
        - {kind: release, consumer: /a, host: h5, slots: 1, rule: release.lend_revoked, deadline: "+30s"}
        - {kind: release, consumer: /a, slots: 0, rule: release.moved}
`)
}

// TestRules4ReclaimInsideAMaxAcrossParts: under share_ratio with balance,
// where a parent's max binds, the owner ranked first under it is given its
// own slot by a reclaim from the sibling above its target, though it may
// not hold the sibling's part (lend false): the sibling gives up its slot
// and the claimant takes its free own slot on the same host (section 1: a
// reclaim within the branch leaves the parent's total as it is; section 5:
// the end state is the layered targets, and the own layer takes leaves by
// rank where a max binds). Decision #368 (gen.GenerateOwned seed 703,
// event 17, shrunk).
func TestRules4ReclaimInsideAMaxAcrossParts(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio, enforcement: parent}
  consumers:
    - {path: /c, max: 1, own: [{host: h2}]}
    - {path: /c/a, lend: false, own: [{host: h2, slots: 1}]}
    - {path: /c/b, priority: 1, own: [{host: h2, slots: 2}]}
hosts:
  - {name: h2, slots: 3}
steps:
  - events: [{type: demand, demands: {/c/a: 1}}]
    expect:
      allocations: {/c/a: 1}
  - events: [{type: demand, demands: {/c/b: 1}}]
    expect:
      allocations: {/c/b: 1}
      placed: {/c/b: {h2: 1}}
      decisions:
        - {kind: reclaim, consumer: /c/b, from: /c/a, host: h2, slots: 1, rule: share_ratio.reclaim, deadline: "+0s"}
`)
}

// TestRules4ReclaimNettedAcrossHosts: under priority (rules 4) a leaf
// reclaimed from in its private pool that reclaims as much from a third
// leaf in the public pool on another host in the same rebalance is not
// reclaimed from: the claimant takes the third leaf's slot instead, and the
// leaf keeps where it runs (the lead's decision on reading (c),
// docs/decisions.md #385, #363 across hosts; withOwnership seed 240, event
// 6, shrunk; AMBIGUITIES.md round 4).
func TestRules4ReclaimNettedAcrossHosts(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: priority, enforcement: parent}
  consumers:
    - {path: /a, own: [{group: default, slots: 6}]}
    - {path: /a/a, share: 5}
    - {path: /a/b, priority: 1}
    - {path: /a/c, share: 3}
hosts:
  - {name: h1, group: gpu, slots: 2}
  - {name: h2, slots: 7}
steps:
  - events: [{type: demand, demands: {/a/a: 4, /a/c: 4}}]
    expect:
      allocations: {/a/a: 4, /a/c: 4}
      placed: {/a/a: {h2: 4}, /a/c: {h1: 2, h2: 2}}
  # pool /a (S 6): G 3, 1, 2; /a/b's entitled slot is /a/a's fourth (4 >
  # G 3); in the public pool /a/a reclaims as much from /a/c (2 > G 1) on
  # h1. /a/a's reclaim on h2 and its gain on h1 net: /a/b takes /a/c's h1
  # slot, /a/a keeps its 4 on h2.
  - events: [{type: demand, demands: {/a/b: 16, /a/c: 7}}]
    expect:
      allocations: {/a/a: 4, /a/b: 2, /a/c: 3}
      placed: {/a/a: {h2: 4}, /a/b: {h1: 1, h2: 1}, /a/c: {h1: 1, h2: 2}}
      decisions:
        - {kind: grant, consumer: /a/b, host: h2, slots: 1, rule: priority.entitled}
        - {kind: reclaim, consumer: /a/b, from: /a/c, host: h1, slots: 1, rule: priority.reclaim, deadline: "+0s"}
        - {kind: reclaim, consumer: /a/b, from: /a/a, slots: 0}
        - {kind: reclaim, consumer: /a/a, slots: 0}
`)
}

// TestRules4ReclaimNettedAgainstAGrantAcrossHosts: under priority (rules
// 4) a leaf reclaimed from in its branch's private pool and granted as
// many public slots on another host in the same rebalance is not
// reclaimed from: the claimant is granted the public slots instead, and
// the leaf keeps its private slots (the lead's decision on reading (c),
// docs/decisions.md #385; withOwnership seed 642, event 7: `grant /a/a/b
// 3` and `reclaim /a/a/a from /a/a/b 3` became `grant /a/a/a 3`;
// AMBIGUITIES.md round 5).
func TestRules4ReclaimNettedAgainstAGrantAcrossHosts(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: priority, enforcement: leaf, reclaim_for_preference: true}
  consumers:
    - {path: /a, share: 2, priority: 2, lend_grace: 5m, own: [{group: gpu, slots: 7}]}
    - {path: /a/a, priority: 2, own: [{group: gpu, slots: 1, preference: 3}]}
    - {path: /a/a/a, share: 4, priority: 1, reclaim_grace: 1m}
    - {path: /a/a/b, share: 3, priority: 2, lend_grace: 5m}
hosts:
  - {name: h1, group: gpu, slots: 11}
  - {name: h2, slots: 8}
steps:
  - events: [{type: demand, demands: {/a/a/a: 1, /a/a/b: 8}}]
  # pool /a/a's division takes 3 of /a/a/b's slots on h1 for /a/a/a while
  # the public pool grants /a/a/b 3 on h2: /a/a/a is granted those 3
  # public slots instead and /a/a/b is not named.
  - events: [{type: demand, demands: {/a/a/a: 17}}]
    expect:
      allocations: {/a/a/a: 11, /a/a/b: 8}
      placed: {/a/a/a: {h1: 5, h2: 6}, /a/a/b: {h1: 6, h2: 2}}
      decisions:
        - {kind: grant, consumer: /a/a/a, host: h1, slots: 4, rule: priority.entitled}
        - {kind: grant, consumer: /a/a/a, host: h2, slots: 6, rule: priority.entitled}
        - {kind: reclaim, consumer: /a/a/a, from: /a/a/b, slots: 0}
        - {kind: grant, consumer: /a/a/b, slots: 0}
`)
}
