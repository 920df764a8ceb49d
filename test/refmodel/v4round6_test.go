package refmodel

import (
	"fmt"
	"strings"
	"testing"
)

// Round 6 of the differential's adjudication (test/refmodel/AMBIGUITIES.md,
// "Round 6"): each test is a shrunk log whose first difference the spec,
// worked by hand, decided against the model.

// TestRules4OwnerReclaimsItsUseInsideAMax: under priority with
// preemption, /a (max 2) owns h1's 3 slots, 2 of them for /a/b; /a/a holds
// /a's private slot. /a/b asks 2: it takes its free own slot, /a is then
// at its max, and /a/a (on /a's private part, not /a/b's) gives up its
// slot by a reclaim, so /a/b holds min(E, owned) = 2 (section 5's
// property; decision #387; withOwnership seed 184, event 26, shrunk).
// Without preemption nothing is reclaimed and /a/b holds 1.
func TestRules4OwnerReclaimsItsUseInsideAMax(t *testing.T) {
	const plan = `
plan:
  rules: 4
  policy: {reclaim: priority, preemption: %s}
  consumers:
    - {path: /a, max: 2, own: [{host: h1}]}
    - {path: /a/a, reclaim_grace: 1m}
    - {path: /a/b, own: [{host: h1, slots: 2}]}
hosts:
  - {name: h1, slots: 3}
steps:
  - events: [{type: demand, demands: {/a/a: 1}}]
    expect:
      allocations: {/a/a: 1}
  - events: [{type: demand, demands: {/a/b: 2}}]
    expect:
`
	runYAML(t, fmt.Sprintf(plan, "true")+`
      allocations: {/a/a: 0, /a/b: 2}
      placed: {/a/b: {h1: 2}}
      decisions:
        - {kind: grant, consumer: /a/b, host: h1, slots: 1, rule: own.use}
        - {kind: reclaim, consumer: /a/b, from: /a/a, host: h1, slots: 1, rule: priority.reclaim, deadline: "+1m"}
`)
	runYAML(t, fmt.Sprintf(plan, "false")+`
      allocations: {/a/a: 1, /a/b: 1}
      decisions:
        - {kind: grant, consumer: /a/b, host: h1, slots: 1, rule: own.use}
        - {kind: reclaim, consumer: /a/b, from: /a/a, slots: 0}
`)
}

// TestRules4GroupEntryDoesNotComeBackToItsHostEntrysSlots: /b/c's group
// entry (g2, 1, listed first) holds h1's slot and its host entry h3's 2
// slots; a g1 host coming up changes nothing of g2. Step 1 of the
// assignment ("the slots the consumer was assigned before ..., the host
// where it held most first") counts on h3 only what /b/c held beyond its
// host entry's claim (ruling 6: a group entry never takes a host entry's
// slots, "and ownership can drift by one slot per event" otherwise), so
// the group entry stays on h1 (decision #388; gen.GenerateOwned seed 936,
// event 4, shrunk).
func TestRules4GroupEntryDoesNotComeBackToItsHostEntrysSlots(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /b, own: [{host: h3}, {group: g2, slots: 2}]}
    - {path: /b/c, own: [{group: g2, slots: 1}, {host: h3, slots: 2}]}
hosts:
  - {name: h1, group: g2, slots: 1}
  - {name: h3, group: g2, slots: 4}
steps:
  - events: [{type: host_up, host: h4, group: g1, slots: 1}]
    expect:
      owned: {/b/c: {h1: 1, h3: 2}}
      decisions:
        - {kind: own, consumer: /b/c, slots: 0}
`)
}

// TestRules4BranchTakesEveryFreePrivateSlotBeforeAReturn: /b owns h1's 8
// slots and 1 of h3's; /c/b borrows one of /b's h1 slots. /b/a asks 8:
// pool /b has 7 free slots on h1 and 1 on h3, so /b/a takes all 8
// (priority.entitled) and /c/b keeps its slot; the model took h1's 7, then
// a return from /c/b on h1 swapped with /c/b's compensation, a lend of
// /b's h3 slot as priority.borrow (decision #389: the pool's free slots on
// every host before a return; section 4, ruling 5, #379; gen.GenerateOwned
// seed 461, event 10, shrunk).
func TestRules4BranchTakesEveryFreePrivateSlotBeforeAReturn(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: priority, enforcement: parent}
  consumers:
    - {path: /b, own: [{group: g2, slots: 1}, {host: h1, preference: 4}]}
    - {path: /b/a}
    - {path: /c}
    - {path: /c/b}
hosts:
  - {name: h1, group: g2, slots: 8}
  - {name: h3, group: g2, slots: 6}
steps:
  - events: [{type: demand, demands: {/c/b: 6}}]
    expect:
      owned: {/b: {h1: 8, h3: 1}}
      placed: {/c/b: {h1: 1, h3: 5}}
  - events: [{type: demand, demands: {/b/a: 8}}]
    expect:
      allocations: {/b/a: 8, /c/b: 6}
      placed: {/b/a: {h1: 7, h3: 1}, /c/b: {h1: 1, h3: 5}}
      decisions:
        - {kind: grant, consumer: /b/a, slots: 8, rule: priority.entitled}
        - {kind: return, consumer: /b/a, from: /c/b, slots: 0}
        - {kind: lend, consumer: /b/a, slots: 0}
`)
}

// TestRules4ReleaseSeatsAgainAfterEachHost: /b/b holds h2's two slots (one
// of /b/a's part, lent into /b's pool, and one public) and h1's two public
// slots, and releases 3. It gives back the lent slot on h2 first; seated
// again (the seating is derived from what it holds per host, ruling 8),
// its other h2 slot sits on /b/a's part, lent again, so it goes next, then
// one of h1's (docs/rules.md section 17, "Releases by tier": "the seating
// is worked out again before the next host"; decision #390;
// gen.GenerateOwned seed 240, event 20, shrunk).
func TestRules4ReleaseSeatsAgainAfterEachHost(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: share_ratio, balance: false}
  consumers:
    - {path: /a}
    - {path: /b, own: [{group: g1, slots: 1}]}
    - {path: /b/a, reclaim_grace: 1m, own: [{group: g1, slots: 1}]}
    - {path: /b/b}
hosts:
  - {name: h1, group: g2, slots: 2}
  - {name: h2, group: g1, slots: 2}
steps:
  - events: [{type: demand, demands: {/b/b: 4}}]
    expect:
      allocations: {/b/b: 4}
      placed: {/b/b: {h1: 2, h2: 2}}
  - events: [{type: release, consumer: /b/b, slots: 3}]
    expect:
      allocations: {/b/b: 1}
      placed: {/b/b: {h1: 1}}
      decisions:
        - {kind: release, consumer: /b/b, host: h2, slots: 2, rule: release.finished}
        - {kind: release, consumer: /b/b, host: h1, slots: 1, rule: release.finished}
`)
}

// TestRules4ReclaimNettedAgainstAReclaimOnTheSameHost: /a owns 2 of h2's 7
// slots; /a/c holds 3 (2 of /a's), /b/c 3 public. /a/a asks 2: pool /a
// reclaims one of /a/c's slots for it, and the public pool grants /a/a the
// free slot and has /a/c reclaim one from /b/c, all on h2. /a/c's
// allocation on h2 does not change, so it is not named: /a/a reclaims
// from /b/c (#385's netting on the victim's own host, decision #391;
// gen.GenerateOwned seed 58, event 15, shrunk).
func TestRules4ReclaimNettedAgainstAReclaimOnTheSameHost(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: priority, enforcement: parent}
  consumers:
    - {path: /a, own: [{host: h2, slots: 2}]}
    - {path: /a/a}
    - {path: /a/c}
    - {path: /b}
    - {path: /b/c, reclaim_grace: 1m}
hosts:
  - {name: h2, group: g1, slots: 7}
steps:
  - events: [{type: demand, demands: {/a/c: 3}}]
    expect:
      allocations: {/a/c: 3}
  - events: [{type: demand, demands: {/b/c: 3}}]
    expect:
      allocations: {/a/c: 3, /b/c: 3}
  - events: [{type: demand, demands: {/a/a: 2}}]
    expect:
      allocations: {/a/a: 2, /a/c: 3, /b/c: 2}
      decisions:
        - {kind: grant, consumer: /a/a, slots: 1, rule: priority.entitled}
        - {kind: reclaim, consumer: /a/a, from: /b/c, slots: 1, rule: priority.reclaim, deadline: "+1m"}
        - {kind: reclaim, consumer: /a/a, from: /a/c, slots: 0}
        - {kind: reclaim, consumer: /a/c, from: /b/c, slots: 0}
`)
}

// TestRules4PoolMaxReducedOnlyByEarlierLayers: /a/a (max 1) runs on a
// public slot of h1 when /a comes to own h2's 2 slots; /a/b asks 2. Pool
// /a's division runs "with ... every max reduced by what they [the earlier
// layers] gave" (ruling 1): /a/a's max is not reduced by its public slot,
// so the pool gives /a/a its G of 1 and /a/b its G of 1, and /a/b's second
// slot is its G in the public pool (h1), not a borrow of the pool's last
// slot; /a/a's move onto h2 is cut, its h1 slot staying free otherwise
// (#364). Decision #392 (gen.GenerateOwned seed 407, event 11, shrunk).
func TestRules4PoolMaxReducedOnlyByEarlierLayers(t *testing.T) {
	const plan = `
  rules: 4
  policy: {reclaim: priority, enforcement: parent}
  consumers:
    - {path: /a%s}
    - {path: /a/a, max: 1}
    - {path: /a/b}
`
	runYAML(t, `
plan:`+fmt.Sprintf(plan, "")+`
hosts:
  - {name: h1, group: g2, slots: 3}
  - {name: h2, group: g1, slots: 2}
steps:
  - events: [{type: demand, demands: {/a/a: 1}}]
    expect:
      placed: {/a/a: {h1: 1}}
  - events:
      - type: plan
        plan:`+strings.ReplaceAll(fmt.Sprintf(plan, ", own: [{host: h2}]"), "\n  ", "\n          ")+`
    expect:
      allocations: {/a/a: 1}
  - events: [{type: demand, demands: {/a/b: 2}}]
    expect:
      allocations: {/a/a: 1, /a/b: 2}
      placed: {/a/a: {h1: 1}, /a/b: {h1: 1, h2: 1}}
      decisions:
        - {kind: grant, consumer: /a/b, slots: 2, rule: priority.entitled}
        - {kind: grant, consumer: /a/b, slots: 0, rule: priority.borrow}
        - {kind: release, consumer: /a/a, slots: 0}
`)
}
