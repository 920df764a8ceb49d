package refmodel

import "testing"

// TestRules4PoolReturnsOnlyFromItsPart: under priority (rules 4) a leaf
// of a private pool X takes X's private slots back by a return only from
// a leaf outside X's subtree seated on X's part (rulings 8 and 11), never
// from a leaf that sits on another part of the host: here its uncle /b/b,
// on /b's own private part, inside /b's subtree, while /b's max leaves
// /b/a/a one slot (withOwnership seed 242, event 3, shrunk).
func TestRules4PoolReturnsOnlyFromItsPart(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: priority, preemption: false}
  consumers:
    - {path: /b, max: 2, own: [{host: h1}]}
    - {path: /b/a, own: [{host: h1, slots: 3}]}
    - {path: /b/a/a}
    - {path: /b/b}
hosts:
  - {name: h1, slots: 4}
steps:
  # /b's private part of h1 is 1 slot, /b/a's 3 (lent up into /b's pool,
  # grace 0): /b/b is given /b's own slot first.
  - events: [{type: demand, demands: {/b/b: 1}}]
    expect:
      allocations: {/b/b: 1}
      decisions:
        - {kind: grant, consumer: /b/b, host: h1, slots: 1, rule: priority.entitled}
  # /b/a/a: E = min(5, max 2) = 2; pool /b/a has 3 free slots but /b's max
  # leaves room for 1: grant 1. /b/b sits on /b's part, not /b/a's, and is
  # inside /b's subtree: no return (and no reclaim without preemption).
  - events: [{type: demand, demands: {/b/a/a: 5}}]
    expect:
      allocations: {/b/a/a: 1, /b/b: 1}
      decisions:
        - {kind: grant, consumer: /b/a/a, host: h1, slots: 1, rule: priority.entitled}
        - {kind: return, consumer: /b/a/a, from: /b/b, slots: 0}
`)
}

// TestRules4SwapUnderPriority: ruling 9's swap (reclaim_for_preference
// false) holds under priority too: the spec's r09 as a priority pool. /O's
// return of 4 from /B is matched with /B's compensation, 2 entitled and 2
// borrowed public slots of h2 (G = 2 of the public pool's 4), so /B keeps
// h1 and /O is granted h2 (own.use); at the next event the return and the
// compensation cancel again (a reclaim of /B from /O itself): no decision.
func TestRules4SwapUnderPriority(t *testing.T) {
	runYAML(t, `
plan:
  rules: 4
  policy: {reclaim: priority, enforcement: leaf}
  consumers:
    - {path: /B, share: 1}
    - {path: /O, share: 1, own: [{host: h1}]}
hosts:
  - {name: h1, slots: 4}
steps:
  - events: [{type: demand, demands: {/B: 4}}]
    expect:
      allocations: {/B: 4}
      decisions:
        - {kind: lend, consumer: /B, from: /O, host: h1, slots: 4}
  - events: [{type: host_up, host: h2, slots: 4}]
    expect:
      allocations: {/B: 4}
  - events: [{type: demand, demands: {/O: 4}}]
    expect:
      allocations: {/B: 4, /O: 4}
      placed: {/B: {h1: 4}, /O: {h2: 4}}
      decisions:
        - {kind: grant, consumer: /O, host: h2, rule: own.use, slots: 4}
        - {kind: return, consumer: /O, from: /B, slots: 0}
        - {kind: grant, consumer: /B, slots: 0}
  - events: [{type: demand, demands: {/B: 4}}]
    expect:
      allocations: {/B: 4, /O: 4}
      placed: {/B: {h1: 4}, /O: {h2: 4}}
      decisions:
        - {kind: return, consumer: /O, from: /B, slots: 0}
        - {kind: reclaim, consumer: /B, from: /O, slots: 0}
        - {kind: grant, consumer: /O, slots: 0}
`)
}
