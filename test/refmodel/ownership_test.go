package refmodel

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

// TestSpecOwnLendReturn runs the specification's own worked example
// (docs/rules.md#ownership-example), copied verbatim into testdata.
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

// TestOwnGroupRankAndHostDown: group ownership assigned by rank with the
// three steps, a host taken whole while the need allows, the remainder
// partially; a host loss re-assigns and trims a lower-ranked owner.
func TestOwnGroupRankAndHostDown(t *testing.T) {
	runYAML(t, `
plan:
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /hi, priority: 2, own: [{group: gpu, slots: 6}]}
    - {path: /lo, priority: 1, own: [{group: gpu, slots: 4}]}
hosts:
  # g1 up: hi (rank 1) takes g1 whole (need 6 >= 4); lo finds nothing.
  # g2 up: hi step 1 takes back g1's 4, step 2 the remaining 2 of g2
  #   partially; lo step 2 takes g2's other 2.
  # g3 up: hi keeps g1 4 + g2 2 (step 1); lo keeps g2 2 (step 1) and
  #   takes 2 of g3 (step 2).
  - {name: g1, group: gpu, slots: 4}
  - {name: g2, group: gpu, slots: 4}
  - {name: g3, group: gpu, slots: 4}
  - {name: c1, slots: 2}
steps:
  # lo asks 3: own layer min(3, 4) = 3, placed on its owned hosts (same
  # preference) by name: g2 2, then g3 1. Workload now g2 2, g3 1.
  - events: [{type: demand, demands: {/lo: 3}}]
    expect:
      allocations: {/lo: 3}
      owned: {/hi: {g1: 4, g2: 2}, /lo: {g2: 2, g3: 2}}
      placed: {/lo: {g2: 2, g3: 1}}
      decisions:
        - {kind: grant, consumer: /lo, host: g2, rule: own.use, slots: 2}
        - {kind: grant, consumer: /lo, host: g3, rule: own.use, slots: 1}
  # g1 down. hi: step 1 keeps g2's 2 (g1 is gone), need 4; step 2 (slots
  # no sibling holds): g2 has 2 left but lo held them, g3 has 4 - 2 (lo's)
  # = 2: take g3 2, need 2; step 3 (lo's slots, least workload first):
  # g3 (workload 1) before g2 (2): take g3's last 2. hi = g2 2, g3 4.
  # lo: step 1 keeps g2 2 (its g3 slots are gone), nothing else is left in
  # the group: lo is trimmed to g2 2 (own.trim, a higher-ranked sibling
  # took g3). Allocations do not move: lo's own layer is min(3, 2) = 2 and
  # hi is idle and lends its 6, so lo keeps its third slot (now on hi's
  # slots of g3) from the public pool: c1's 2 + 6 lent, lo wants 1 more.
  - events: [{type: host_down, host: g1}]
    expect:
      allocations: {/lo: 3}
      owned: {/hi: {g2: 2, g3: 4}, /lo: {g2: 2}}
      placed: {/lo: {g2: 2, g3: 1}}
      decisions:
        - {kind: own, consumer: /hi, host: g1, rule: own.trim, slots: 4}
        - {kind: own, consumer: /hi, host: g3, rule: own.assign, slots: 4}
        - {kind: own, consumer: /lo, host: g3, rule: own.trim, slots: 2}
  # g1 back: hi step 1 keeps g3 4 and g2 2 (most held first); lo keeps
  # g2 2 (step 1) and takes 2 of g1 (step 2, nobody held them).
  # lo's own layer is min(3, 4) = 3 but it holds only 2 of its own (its
  # third slot sits on hi's g3) while its g1 slots are free: it moves onto
  # its own, giving back the slot on g3 (release.own_moved) for one of g1.
  - events: [{type: host_up, host: g1, group: gpu, slots: 4}]
    expect:
      allocations: {/lo: 3}
      owned: {/hi: {g2: 2, g3: 4}, /lo: {g2: 2, g1: 2}}
      placed: {/lo: {g2: 2, g1: 1}}
      decisions:
        - {kind: own, consumer: /lo, host: g1, rule: own.assign, slots: 2}
        - {kind: release, consumer: /lo, host: g3, rule: release.own_moved, slots: 1}
        - {kind: grant, consumer: /lo, host: g1, rule: own.use, slots: 1}
  # hi asks 6: own layer 6, all free on its hosts (same preference, by
  # name): g2 2, g3 4.
  - events: [{type: demand, demands: {/hi: 6}}]
    expect:
      allocations: {/hi: 6, /lo: 3}
      placed: {/hi: {g2: 2, g3: 4}, /lo: {g2: 2, g1: 1}}
      decisions:
        - {kind: grant, consumer: /hi, rule: own.use, slots: 6}
`)
}

// TestOwnPrivatePoolAndLending: a parent's private pool serves its
// children first; a leaf lends to its siblings through the parent's pool;
// what the pool does not use is lent upward to the public pool; an owner
// uses idle slots before taking lent ones back.
func TestOwnPrivatePoolAndLending(t *testing.T) {
	runYAML(t, `
plan:
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /P, own: [{host: p1}, {host: p2}]}
    - {path: /P/a, own: [{host: p1, slots: 2}]}
    - {path: /P/b}
    - {path: /Q}
hosts:
  # /P owns p1 and p2 (8); /P/a owns 2 of p1 (from P's); private(P) = 6
  # (p1's other 2, p2's 4); the public pool is q1.
  - {name: p1, slots: 4}
  - {name: p2, slots: 4}
  - {name: q1, slots: 4}
steps:
  # b 8, Q 8, a idle. Own layer: nothing. pool(P) = private 6 + a's 2 lent
  # (grace 0: every leaf may borrow them, so one class with P's own
  # slots): b takes 8. The pool has nothing left to lend. Public 4 to Q.
  # Placement, b: P's private hosts (most free: p2 4, then p1 2), then
  # a's lent slots on p1 (kind lend, from /P/a). Q: q1.
  - events: [{type: demand, demands: {/P/b: 8, /Q: 8}}]
    expect:
      allocations: {/P/b: 8, /Q: 4}
      placed: {/P/b: {p1: 4, p2: 4}, /Q: {q1: 4}}
      owned: {/P: {p1: 4, p2: 4}, /P/a: {p1: 2}}
      decisions:
        - {kind: grant, consumer: /P/b, host: p2, slots: 4}
        - {kind: grant, consumer: /P/b, host: p1, slots: 2}
        - {kind: lend, consumer: /P/b, from: /P/a, host: p1, slots: 2}
  # b drops to 2: pool(P) 8 gives b 2 and lends 6 upward (P lends, grace
  # 0) to the public pool: 4 + 6 for Q, who wants 8: Q 8.
  # b releases 6: the slots lent by a first (p1 2), then P's private
  # slots, host holding most of b's slots then name (p1 4 = p2 4: p1 2,
  # then p2 2). Q grows by 4 on the lent slots, most free then name: p1
  # (P's 2, a's 2 — a's lent through P, recorded from their owner /P/a).
  - events: [{type: demand, demands: {/P/b: 2}}]
    expect:
      allocations: {/P/b: 2, /Q: 8}
      placed: {/P/b: {p2: 2}, /Q: {q1: 4, p1: 4}}
      decisions:
        - {kind: release, consumer: /P/b, host: p1, slots: 4}
        - {kind: release, consumer: /P/b, host: p2, slots: 2}
        - {kind: lend, consumer: /Q, from: /P, host: p1, slots: 2}
        - {kind: lend, consumer: /Q, from: /P/a, host: p1, slots: 2}
  # a asks 2: own layer 2; pool(P) private 6 gives b 2, lends 4; Q 4 + 4.
  # a's own slots on p1 are all used by Q, but 2 slots of p2 are idle:
  # with reclaim_for_preference false a uses them (P's private tier), and
  # takes nothing back.
  - events: [{type: demand, demands: {/P/a: 2}}]
    expect:
      allocations: {/P/a: 2, /P/b: 2, /Q: 8}
      placed: {/P/a: {p2: 2}}
      decisions:
        - {kind: grant, consumer: /P/a, host: p2, rule: own.use, slots: 2}
        - {kind: return, consumer: /P/a, from: /Q, slots: 0}
`)
}

// TestOwnLendFalse: unused owned slots of a consumer with lend: false stay
// idle, for a leaf and for a parent's private pool.
func TestOwnLendFalse(t *testing.T) {
	runYAML(t, `
plan:
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /A, own: [{host: h1}], lend: false}
    - {path: /P, own: [{host: h3}], lend: false}
    - {path: /P/x}
    - {path: /B}
hosts:
  - {name: h1, slots: 4}
  - {name: h2, slots: 2}
  - {name: h3, slots: 4}
steps:
  # A idle, lends nothing: h1's 4 stay idle. pool(P) = h3's 4: x takes 1,
  # the other 3 are not lent (P's lend is false). Public: h2's 2 to B.
  - events: [{type: demand, demands: {/B: 10, /P/x: 1}}]
    expect:
      allocations: {/B: 2, /P/x: 1}
      placed: {/B: {h2: 2}, /P/x: {h3: 1}}
  # A asks 3: its own 3 (free on h1).
  - events: [{type: demand, demands: {/A: 3}}]
    expect:
      allocations: {/A: 3, /B: 2, /P/x: 1}
      decisions:
        - {kind: grant, consumer: /A, host: h1, rule: own.use, slots: 3}
  # A lends again: a plan change to lend: true (ownership unchanged: no
  # own decision). A's unused 1 goes to the public pool: B 2 + 1.
  - events:
      - type: plan
        plan:
          policy: {reclaim: share_ratio}
          consumers:
            - {path: /A, own: [{host: h1}]}
            - {path: /P, own: [{host: h3}], lend: false}
            - {path: /P/x}
            - {path: /B}
    expect:
      allocations: {/A: 3, /B: 3, /P/x: 1}
      decisions:
        - {kind: lend, consumer: /B, from: /A, host: h1, slots: 1}
        - {kind: own, consumer: /A, slots: 0}
`)
}

// TestOwnPreference runs one event under both values of
// reclaim_for_preference: the flag changes which slots move, never how
// many each consumer holds.
func TestOwnPreference(t *testing.T) {
	const tmpl = `
plan:
  policy: {reclaim: share_ratio, reclaim_for_preference: FLAG}
  consumers:
    - {path: /A, own: [{host: slow, preference: 2}, {host: fast, preference: 9}]}
    - {path: /B}
hosts:
  - {name: fast, slots: 2}
  - {name: slow, slots: 2}
  - {name: pub, slots: 2}
steps:
  # A idle lends its 4: public 2 + 4 lent, B asks 5: B 5. Placement:
  # public first (pub 2), then the lent hosts, most free then name: fast 2,
  # slow 1. One slot of slow stays free.
  - events: [{type: demand, demands: {/B: 5}}]
    expect:
      allocations: {/B: 5}
      placed: {/B: {pub: 2, fast: 2, slow: 1}}
  # A asks 2: own layer 2, it lends 2: public 2 + 2 for B: B 4.
STEP2
`
	// false: A uses the idle slot of its less preferred host slow first,
	// then takes 1 back on fast (its most preferred) from B: B 5 - 1 = 4.
	runYAML(t, strings.NewReplacer("FLAG", "false", "STEP2", `
  - events: [{type: demand, demands: {/A: 2}}]
    expect:
      allocations: {/A: 2, /B: 4}
      placed: {/A: {slow: 1, fast: 1}, /B: {pub: 2, fast: 1, slow: 1}}
      decisions:
        - {kind: grant, consumer: /A, host: slow, rule: own.use, slots: 1}
        - {kind: return, consumer: /A, from: /B, host: fast, slots: 1}`).Replace(tmpl))
	// true: A takes its most preferred slots back (fast 2) although slow
	// has an idle slot; B, at 3 < 4, is granted that slot (lent by A).
	runYAML(t, strings.NewReplacer("FLAG", "true", "STEP2", `
  - events: [{type: demand, demands: {/A: 2}}]
    expect:
      allocations: {/A: 2, /B: 4}
      placed: {/A: {fast: 2}, /B: {pub: 2, slow: 2}}
      decisions:
        - {kind: return, consumer: /A, from: /B, host: fast, slots: 2}
        - {kind: lend, consumer: /B, from: /A, host: slow, slots: 1}`).Replace(tmpl))
}

// TestOwnPlanDrop: a plan that no longer gives ownership drops it (own.drop)
// and the pool folds as one public layer again.
func TestOwnPlanDrop(t *testing.T) {
	m := runYAML(t, `
plan:
  policy: {reclaim: share_ratio, enforcement: parent}
  consumers:
    - {path: /A, share: 3, own: [{host: h1}]}
    - {path: /B, share: 1, own: [{host: h2}]}
hosts:
  - {name: h1, slots: 4}
  - {name: h2, slots: 4}
  - {name: h3, slots: 4}
steps:
  # As the spec's example: A 7 (h1 4 own, h3 3), B 5 (h2 4 own, h3 1).
  - events: [{type: demand, demands: {/A: 12, /B: 8}}]
    expect:
      allocations: {/A: 7, /B: 5}
      placed: {/A: {h1: 4, h3: 3}, /B: {h2: 4, h3: 1}}
  # B's ownership is dropped (own.drop h2 4; A's is unchanged). No
  # ownership is left for B; A still owns h1: own layer A 4; public 8
  # (h2, h3), A wants 8 more, B 8, 3:1 water-filled: 6, 2. A 10, B 2.
  # A reclaims 3 from B, on the hosts A would use first: its own h1 (B is
  # not there), then the public hosts by name: h2 has 4 of B's: 3 there.
  - events:
      - type: plan
        plan:
          policy: {reclaim: share_ratio, enforcement: parent}
          consumers:
            - {path: /A, share: 3, own: [{host: h1}]}
            - {path: /B, share: 1}
    expect:
      allocations: {/A: 10, /B: 2}
      owned: {/A: {h1: 4}, /B: {}}
      decisions:
        - {kind: own, consumer: /B, host: h2, rule: own.drop, slots: 4}
        - {kind: reclaim, consumer: /A, from: /B, host: h2, slots: 3}
  # All ownership removed: A's dropped too; one public layer (sections
  # 1-4): apportion(12, 3:1, caps 12, 8) = 9, 3. B reclaims 1 from A.
  - events:
      - type: plan
        plan:
          policy: {reclaim: share_ratio, enforcement: parent}
          consumers:
            - {path: /A, share: 3}
            - {path: /B, share: 1}
    expect:
      allocations: {/A: 9, /B: 3}
      owned: {/A: {}}
      decisions:
        - {kind: own, consumer: /A, host: h1, rule: own.drop, slots: 4}
        - {kind: reclaim, consumer: /B, from: /A, slots: 1}
`)
	if m.hasOwnership() || len(m.own) != 0 {
		t.Errorf("ownership left after a plan without it: %v", m.own)
	}
}

// TestOwnValidation: every malformed ownership the spec lists refuses the
// plan and changes nothing; well-formed edge cases are accepted.
func TestOwnValidation(t *testing.T) {
	base := func() *Model {
		m := New()
		mustApply(t, m, 1, &OwnedPlan{Plan: plan("share_ratio", "", cons("/A", 1, 0)).Plan,
			Owners: []Owner{{Path: "/A", Own: []OwnEntry{{Host: "h1"}}}}})
		mustApply(t, m, 2, &events.HostUp{Host: "h1", Slots: 4})
		mustApply(t, m, 3, demand("/A", 3))
		return m
	}
	// op builds a share_ratio plan of /P, /P/x, /P/y with the given own lists.
	op := func(p, x, y []OwnEntry) *OwnedPlan {
		o := &OwnedPlan{Plan: plan("share_ratio", "", cons("/P", 1, 0), cons("/P/x", 1, 0), cons("/P/y", 1, 0)).Plan}
		for _, w := range []struct {
			path string
			own  []OwnEntry
		}{{"/P", p}, {"/P/x", x}, {"/P/y", y}} {
			if w.own != nil {
				o.Owners = append(o.Owners, Owner{Path: w.path, Own: w.own})
			}
		}
		return o
	}
	h := func(name string) OwnEntry { return OwnEntry{Host: name} }
	hs := func(name string, n int64) OwnEntry { return OwnEntry{Host: name, Slots: i64(n)} }
	g := func(name string, n int64) OwnEntry { return OwnEntry{Group: name, Slots: i64(n)} }
	withPref := func(e OwnEntry, p int64) OwnEntry { e.Preference = i64(p); return e }
	bad := []struct {
		name string
		p    events.Payload
		want error
	}{
		{"host and group", op([]OwnEntry{{Host: "h1", Group: "g", Slots: i64(1)}}, nil, nil), ErrMalformedPlan},
		{"neither host nor group", op([]OwnEntry{{Slots: i64(1)}}, nil, nil), ErrMalformedPlan},
		{"unknown key", op([]OwnEntry{{Host: "h1", Unknown: []string{"rack"}}}, nil, nil), ErrMalformedPlan},
		{"slots 0", op([]OwnEntry{hs("h1", 0)}, nil, nil), ErrMalformedPlan},
		{"slots negative", op([]OwnEntry{g("gpu", -2)}, nil, nil), ErrMalformedPlan},
		{"group without slots", op([]OwnEntry{{Group: "gpu"}}, nil, nil), ErrMalformedPlan},
		{"slots overflow", op([]OwnEntry{g("gpu", 1<<40+1)}, nil, nil), ErrOverflow},
		{"preference 0", op([]OwnEntry{withPref(h("h1"), 0)}, nil, nil), ErrMalformedPlan},
		{"preference 11", op([]OwnEntry{withPref(h("h1"), 11)}, nil, nil), ErrMalformedPlan},
		{"same host twice", op([]OwnEntry{h("h1"), hs("h1", 2)}, nil, nil), ErrMalformedPlan},
		{"child owns, parent none", op(nil, []OwnEntry{h("h1")}, nil), ErrMalformedPlan},
		{"children over parent's host slots", op([]OwnEntry{hs("h1", 4)}, []OwnEntry{hs("h1", 3)}, []OwnEntry{hs("h1", 2)}), ErrMalformedPlan},
		{"child whole host, parent part", op([]OwnEntry{hs("h1", 4)}, []OwnEntry{h("h1")}, nil), ErrMalformedPlan},
		{"two children whole host", op([]OwnEntry{h("h1")}, []OwnEntry{h("h1")}, []OwnEntry{h("h1")}), ErrMalformedPlan},
		{"whole and part of parent's whole host", op([]OwnEntry{h("h1")}, []OwnEntry{h("h1")}, []OwnEntry{hs("h1", 1)}), ErrMalformedPlan},
		{"children over parent's group", op([]OwnEntry{g("gpu", 4), g("gpu", 2)}, []OwnEntry{g("gpu", 5)}, []OwnEntry{g("gpu", 2)}), ErrMalformedPlan},
		{"owner not in plan", &OwnedPlan{Plan: plan("share_ratio", "", cons("/A", 1, 0)).Plan,
			Owners: []Owner{{Path: "/Z", Own: []OwnEntry{h("h1")}}}}, ErrMalformedPlan},
		{"owner twice", &OwnedPlan{Plan: plan("share_ratio", "", cons("/A", 1, 0)).Plan,
			Owners: []Owner{{Path: "/A", Own: []OwnEntry{h("h1")}}, {Path: "/A"}}}, ErrMalformedPlan},
		{"ownership under priority", &OwnedPlan{Plan: plan("priority", "", cons("/A", 1, 0)).Plan,
			Owners: []Owner{{Path: "/A", Own: []OwnEntry{h("h1")}}}}, ErrNotModelled},
		{"ownership with balance false", &OwnedPlan{Plan: planV(0, "share_ratio", "", boolp(false), cons("/A", 1, 0)).Plan,
			Owners: []Owner{{Path: "/A", Own: []OwnEntry{h("h1")}}}}, ErrNotModelled},
	}
	for _, c := range bad {
		m := base()
		before := m.clone()
		ds, err := m.Apply(4, time.Unix(4, 0), c.p)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
		if ds != nil || !reflect.DeepEqual(m, before) {
			t.Errorf("%s: refused plan changed the model (%v)", c.name, ds)
		}
	}
	good := []struct {
		name string
		p    *OwnedPlan
	}{
		// the parent's whole host has room for any count: left to assignment
		{"parts of parent's whole host", op([]OwnEntry{h("h1")}, []OwnEntry{hs("h1", 3)}, []OwnEntry{hs("h1", 3)})},
		{"children up to parent's slots", op([]OwnEntry{hs("h1", 4)}, []OwnEntry{hs("h1", 3)}, []OwnEntry{hs("h1", 1)})},
		// a child's host under the parent's group, a group the parent does
		// not name: left to assignment (they stay short if not given)
		{"child host under parent group", op([]OwnEntry{g("gpu", 2)}, []OwnEntry{h("g9")}, nil)},
		{"child group the parent does not name", op([]OwnEntry{h("h1")}, []OwnEntry{g("gpu", 2)}, nil)},
		{"same group twice", op([]OwnEntry{g("gpu", 1), g("gpu", 2)}, nil, nil)},
		{"host not up", op([]OwnEntry{h("nowhere")}, nil, nil)},
		{"preference 1 and 10", op([]OwnEntry{withPref(h("h1"), 1), withPref(g("gpu", 1), 10)}, nil, nil)},
		{"lend false without own", &OwnedPlan{Plan: plan("priority", "", cons("/A", 1, 0)).Plan,
			Owners: []Owner{{Path: "/A", Lend: boolp(false)}}}},
	}
	for _, c := range good {
		m := base()
		if _, err := m.Apply(4, time.Unix(4, 0), c.p); err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
		}
	}
}

// TestOwnReturnWithoutPreemption: a return is not a reclaim, it happens
// with preemption: false too; the borrower is not made whole by reclaim.
func TestOwnReturnWithoutPreemption(t *testing.T) {
	runYAML(t, `
plan:
  policy: {reclaim: share_ratio, preemption: false}
  consumers:
    - {path: /A, own: [{host: h1}], lend_grace: 30s}
    - {path: /B}
hosts:
  - {name: h1, slots: 4}
  - {name: h2, slots: 4}
steps:
  # A idle lends h1: B takes all 8 (public h2 first, then h1 lent by A).
  - events: [{type: demand, demands: {/B: 8}}]
    expect:
      allocations: {/B: 8}
      decisions:
        - {kind: grant, consumer: /B, host: h2, slots: 4}
        - {kind: lend, consumer: /B, from: /A, host: h1, slots: 4}
  # seq 5 at 00:00:04: A asks 3: own layer 3, A lends 1, B's target 5.
  # No slot is free: A takes 3 back (return, deadline 00:00:04 + 30s)
  # although preemption is off.
  - events: [{type: demand, demands: {/A: 3}}]
    expect:
      allocations: {/A: 3, /B: 5}
      decisions:
        - {kind: return, consumer: /A, from: /B, host: h1, deadline: "2026-01-01T00:00:34Z", slots: 3}
  # A asks 4, B drops to 2 in the same event: B releases 3 (the slot lent
  # by A first, then public h2 slots), A takes its last own slot, free.
  # Only a grant, no reclaim, fills the rest: B's target is 2.
  - events: [{type: demand, demands: {/A: 4, /B: 2}}]
    expect:
      allocations: {/A: 4, /B: 2}
      placed: {/A: {h1: 4}, /B: {h2: 2}}
      decisions:
        - {kind: release, consumer: /B, host: h1, slots: 1}
        - {kind: release, consumer: /B, host: h2, slots: 2}
        - {kind: grant, consumer: /A, host: h1, rule: own.use, slots: 1}
`)
}

// TestOwnChildHostUnderParentGroup: a child's host entry under its
// parent's group entry is left to assignment: the child stays short while
// the parent was not given that host.
func TestOwnChildHostUnderParentGroup(t *testing.T) {
	runYAML(t, `
plan:
  policy: {reclaim: share_ratio}
  consumers:
    - {path: /P, own: [{group: gpu, slots: 4}]}
    - {path: /P/a, own: [{host: g2}]}
    - {path: /P/b}
hosts:
  # g1 up: P takes 4 of the group: g1, whole. a names g2: not up.
  # g2 up: P keeps g1 (step 1); a's g2 is not among P's slots: short.
  - {name: g1, group: gpu, slots: 4}
  - {name: g2, group: gpu, slots: 4}
steps:
  - events: [{type: demand, demands: {/P/a: 2}}]
    # a owns nothing: it draws on P's private pool (g1), 2 slots.
    expect:
      allocations: {/P/a: 2}
      owned: {/P: {g1: 4}, /P/a: {}}
      placed: {/P/a: {g1: 2}}
  # g1 down: a's 2 slots are lost. P step 1 finds nothing, step 2 takes g2
  # (least workload, whole); a's host entry now finds g2 in P's slots and
  # takes all of it. a's own layer is min(2, 4) = 2: granted on g2.
  - events: [{type: host_down, host: g1}]
    expect:
      allocations: {/P/a: 2}
      owned: {/P: {g2: 4}, /P/a: {g2: 4}}
      placed: {/P/a: {g2: 2}}
      decisions:
        - {kind: trim, consumer: /P/a, host: g1, slots: 2}
        - {kind: own, consumer: /P, host: g1, rule: own.trim, slots: 4}
        - {kind: own, consumer: /P, host: g2, rule: own.assign, slots: 4}
        - {kind: own, consumer: /P/a, host: g2, rule: own.assign, slots: 4}
        - {kind: grant, consumer: /P/a, host: g2, rule: own.use, slots: 2}
`)
}
