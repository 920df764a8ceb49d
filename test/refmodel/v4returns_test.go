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
