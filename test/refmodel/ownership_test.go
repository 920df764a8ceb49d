package refmodel

import "testing"

// TestSpecOwnLendReturn runs the spec's own worked example
// (shared/spec/scenarios-ownership/own-lend-return.yaml, copied verbatim
// into testdata).
func TestSpecOwnLendReturn(t *testing.T) {
	runYAML(t, loadFile(t, "testdata/own-lend-return.yaml"))
}

// TestOwnPartialHost: part of a host, lending of unused owned slots to the
// public pool, and return.
func TestOwnPartialHost(t *testing.T) {
	runYAML(t, `
name: partial host
plan:
  policy: {reclaim: share_ratio, enforcement: parent}
  consumers:
    - {path: /A, own: [{host: h1, slots: 3}]}
    - {path: /B}
hosts:
  - {name: h1, slots: 6}   # seq 2: /A is assigned 3 slots of h1
  - {name: h2, slots: 2}
steps:
  # seq 4, C = 8. Own layer: A min(8, 3) = 3. Public: 8 - 3 = 5 (h1's
  # other 3, h2's 2), A wants 5 more, B 8: apportion(5, 1:1, caps 5, 8) =
  # 2, 2 + the leftover slot to the smaller path: A 3, B 2. A = 6, B = 2.
  # Placement: A's own 3 on h1 first; then by deficit per share A (3)
  # before B (2); A's public tier: h1 (3 free) before h2 (2); B: h2.
  - events: [{type: demand, demands: {/A: 8, /B: 8}}]
    expect:
      allocations: {/A: 6, /B: 2}
      placed: {/A: {h1: 6}, /B: {h2: 2}}
      owned: {/A: {h1: 3}, /B: {}}
      decisions:
        - {kind: grant, consumer: /A, host: h1, rule: own.use, slots: 3}
        - {kind: grant, consumer: /A, host: h1, rule: share_ratio.grant, slots: 3}
        - {kind: grant, consumer: /B, host: h2, slots: 2}
  # seq 5, A asks 2: own layer min(2, 3) = 2, A lends 1 to the public
  # pool; public 5 + 1 = 6, all to B (A wants no more): A 2, B 6.
  # A releases 4: public slots first (3 on h1), then its own (1).
  # B grows by 4: public first (h1's 3 public slots), then 1 of A's lent
  # slots on h1 (kind lend, from /A).
  - events: [{type: demand, demands: {/A: 2}}]
    expect:
      allocations: {/A: 2, /B: 6}
      placed: {/A: {h1: 2}, /B: {h1: 4, h2: 2}}
      decisions:
        - {kind: release, consumer: /A, host: h1, rule: release.demand_dropped, slots: 4}
        - {kind: grant, consumer: /B, host: h1, slots: 3}
        - {kind: lend, consumer: /B, from: /A, host: h1, slots: 1}
  # seq 6, A asks 3: own layer 3, public 5 all to B: A 3, B 5. No slot is
  # free, so A takes its lent slot back from B on h1: return, deadline =
  # time (seq 6: 00:00:05) + A's lend_grace 0.
  - events: [{type: demand, demands: {/A: 3}}]
    expect:
      allocations: {/A: 3, /B: 5}
      decisions:
        - {kind: return, consumer: /A, from: /B, host: h1, rule: own.return, deadline: "2026-01-01T00:00:05Z", slots: 1}
`)
}

// TestOwnLendGraceClasses: a borrower may use lent slots only if its
// reclaim_grace is at most the lender's lend_grace; the return carries the
// lender's grace as deadline.
func TestOwnLendGraceClasses(t *testing.T) {
	runYAML(t, `
plan:
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /ml, own: [{host: g1}], lend_grace: 5m}
    - {path: /web, reclaim_grace: 1m}
    - {path: /batch, reclaim_grace: 10m}
hosts:
  - {name: g1, slots: 8}
  - {name: c1, slots: 2}
steps:
  # seq 4 (00:00:03). /ml idle lends g1's 8 with grace 5m to the public
  # pool. Public pool: c1's 2 (nobody lent them) and 8 lent (5m). The lent
  # class goes first, only to leaves with reclaim_grace <= 5m: /ml (no
  # demand) and /web: web 8. Then the 2 unrestricted among all: batch 2.
  # Placement from the source: web on g1 (lend from /ml), batch on c1.
  - events: [{type: demand, demands: {/web: 8, /batch: 8}}]
    expect:
      allocations: {/web: 8, /batch: 2}
      placed: {/web: {g1: 8}, /batch: {c1: 2}}
      decisions:
        - {kind: lend, consumer: /web, from: /ml, host: g1, slots: 8}
        - {kind: grant, consumer: /batch, host: c1, slots: 2}
  # seq 5 (00:00:04). /ml asks 6: own layer 6, it lends 2 (5m). Public
  # pool: the lent class first, among /ml (no more demand) and /web: web 2;
  # then c1's 2 unrestricted among all with demand left, web (6) and batch
  # (8), 1:1: 1 and 1. So web 3, batch 1: a class is divided on its own,
  # a leaf eligible for more classes can end above its sibling.
  # Owners first: nothing is free, ml takes 6 back from web on g1 (the only
  # borrower there), deadline 00:00:04 + ml's lend_grace 5m. Then web (2 <
  # 3) reclaims 1 from batch (2 > 1) on c1, the only host with batch.
  - events: [{type: demand, demands: {/ml: 6}}]
    expect:
      allocations: {/ml: 6, /web: 3, /batch: 1}
      placed: {/ml: {g1: 6}, /web: {g1: 2, c1: 1}, /batch: {c1: 1}}
      decisions:
        - {kind: return, consumer: /ml, from: /web, host: g1, deadline: "2026-01-01T00:05:04Z", slots: 6}
        - {kind: reclaim, consumer: /web, from: /batch, host: c1, slots: 1}
`)
}
