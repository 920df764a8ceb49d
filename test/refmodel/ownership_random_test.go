package refmodel

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

var ownRuns = flag.Int("own.runs", 120, "random ownership logs folded by TestOwnRandomInvariants")

// TestOwnRandomInvariants folds random share_ratio logs with ownership
// (whole, partial and group entries, preferences, lend and grace periods,
// both values of reclaim_for_preference, preemption on and off, host and plan
// changes) and checks after every event the invariants of
// docs/rules.md#model, the properties of docs/rules.md#ownership-properties
// (checkOwnership: a = the layered targets with preemption, owners hold their
// own layer, nobody holds slots it may not borrow, ownership within hosts and
// parents), that a refused event changes nothing and that the fold is
// deterministic.
func TestOwnRandomInvariants(t *testing.T) {
	runOwnRandom(t, rand.New(rand.NewPCG(7, 11)), false)
}

// TestOwnRandomModes is TestOwnRandomInvariants under rules version 3
// (NewRules3) and every policy: reclaim: priority (enforcement leaf and
// parent), share_ratio with balance true and false, preemption on and
// off. Beyond the checks of the share_ratio logs (the layered targets
// only where they are the end state, share_ratio with balance) it checks
// checkModes: without preemption no reclaim; priority mode uses priority
// rules only; a return's deadline is the lend_grace of its taker or of
// the pool owner it takes back for; under balance: false a leaf ends at
// most at max(its allocation when the rebalance started, T0, T).
func TestOwnRandomModes(t *testing.T) {
	runOwnRandom(t, rand.New(rand.NewPCG(13, 17)), true)
}

// runOwnRandom folds *ownRuns random ownership logs. modes false: the
// share_ratio logs of TestOwnRandomInvariants (rules 1 and 2, New());
// true: rules 3 and every policy (NewRules3). The draws of the first are
// unchanged by the second.
func runOwnRandom(t *testing.T, rng *rand.Rand, modes bool) {
	hostsOf := map[string]string{"g1": "gpu", "g2": "gpu", "g3": "gpu", "c1": "cpu", "c2": "cpu"}
	names := []string{"c1", "c2", "g1", "g2", "g3"}
	paths := []string{"/A", "/B/x", "/B/y", "/C/p/q", "/C/r"}
	grace := func() *events.Duration {
		return []*events.Duration{nil, {Duration: time.Minute}, {Duration: 5 * time.Minute}}[rng.IntN(3)]
	}
	entry := func() OwnEntry {
		e := OwnEntry{}
		switch rng.IntN(3) {
		case 0:
			e.Host = names[rng.IntN(len(names))]
		case 1:
			e.Host, e.Slots = names[rng.IntN(len(names))], i64(1+rng.Int64N(4))
		default:
			e.Group, e.Slots = []string{"gpu", "cpu"}[rng.IntN(2)], i64(1+rng.Int64N(6))
		}
		if rng.IntN(2) == 0 {
			e.Preference = i64(1 + rng.Int64N(10))
		}
		return e
	}
	randPlan := func() *OwnedPlan {
		op := &OwnedPlan{}
		op.Plan.Rules = 1 + rng.IntN(2)
		op.Plan.Policy.Reclaim = events.ReclaimShareRatio
		op.Plan.Policy.Enforcement = []string{"leaf", "parent"}[rng.IntN(2)]
		op.Plan.Policy.Preemption = boolp(rng.IntN(4) > 0)
		op.ReclaimForPreference = boolp(rng.IntN(2) == 0)
		if modes {
			op.Plan.Rules = rulesV3
			if rng.IntN(2) == 0 {
				op.Plan.Policy.Reclaim = events.ReclaimPriority
			} else {
				op.Plan.Policy.Balance = []*bool{nil, boolp(true), boolp(false), boolp(false)}[rng.IntN(4)]
			}
		}
		for _, p := range append([]string{"/B", "/C", "/C/p"}, paths...) {
			c := cons(p, 1+rng.Int64N(4), rng.Int64N(3))
			if rng.IntN(5) == 0 {
				c.Max = &events.Max{Slots: rng.Int64N(14)}
			}
			c.LendGrace, c.ReclaimGrace = grace(), grace()
			op.Plan.Consumers = append(op.Plan.Consumers, c)
			o := Owner{Path: p}
			if rng.IntN(4) == 0 {
				o.Lend = boolp(rng.IntN(2) == 0)
			}
			if rng.IntN(2) == 0 {
				seen := map[string]bool{}
				for k := rng.IntN(3); k >= 0; k-- {
					e := entry()
					if e.Host != "" && seen[e.Host] {
						continue
					}
					seen[e.Host] = true
					o.Own = append(o.Own, e)
				}
			}
			op.Owners = append(op.Owners, o)
		}
		return op
	}
	seen := map[string]int{}
	for run := 0; run < *ownRuns; run++ {
		m := New()
		if modes {
			m = NewRules3()
		}
		var seq uint64
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for seq < 45 {
			var p events.Payload
			switch k := rng.IntN(12); {
			case seq < 5 || k < 2:
				p = randPlan()
			case k < 7:
				p = demand(paths[rng.IntN(len(paths))], rng.IntN(12), paths[rng.IntN(len(paths))], rng.IntN(12))
			case k < 9:
				p = &events.Release{Consumer: paths[rng.IntN(len(paths))], Slots: 1 + rng.Int64N(3)}
			default:
				h := names[rng.IntN(len(names))]
				if hh, ok := m.hosts[h]; ok && hh.up {
					p = &events.HostDown{Host: h}
				} else {
					p = &events.HostUp{Host: h, Group: hostsOf[h], Slots: 1 + rng.Int64N(6)}
				}
			}
			at = at.Add(time.Second)
			before := m.clone()
			ds, err := m.Apply(seq+1, at, p)
			if err != nil {
				if !reflect.DeepEqual(m, before) {
					t.Fatalf("run %d seq %d: refused %T changed the model", run, seq+1, p)
				}
				seen["refused"]++
				continue
			}
			seq++
			again := before.clone()
			f, _ := again.applyAt(seq, at, p)
			if !reflect.DeepEqual(ds, f.out) || !reflect.DeepEqual(again, m) {
				t.Fatalf("run %d seq %d: fold not deterministic", run, seq)
			}
			name := fmt.Sprintf("run %d seq %d %T", run, seq, p)
			checkInvariants(t, name, m)
			if checkOwnership(t, name, m, false) > 0 {
				seen["events off target"]++
			}
			seen["events"]++
			if modes {
				seen[checkModes(t, name, m, at, f)]++
				seen[checkUnassigned(t, name, before, m, seq, at, p, ds)]++
				if m.hasOwnership() {
					seen[fmt.Sprintf("%s balance=%v preemption=%v", m.pol.reclaim, m.pol.balance, m.pol.preemption)]++
				}
			}
			for _, d := range ds {
				seen[d.Kind]++
				if modes {
					seen[m.pol.reclaim+" "+d.Kind]++
					continue // checkModes checked the deadlines
				}
				if d.Kind == "return" && d.Deadline != at.Add(m.nodes[d.Consumer].lendGrace) {
					t.Fatalf("%s: return deadline %v", name, d)
				}
			}
			if t.Failed() {
				t.Fatalf("%s: decisions %s\nbefore:%s\nafter:%s", name, fmtDecisions(ds), dumpModel(before), dumpModel(m))
			}
		}
	}
	for _, k := range []string{"refused", "own", "lend", "return", "reclaim", "grant", "release", "trim"} {
		if seen[k] == 0 {
			t.Errorf("no random event made a %q (seen %v)", k, seen)
		}
	}
	if modes {
		for _, k := range []string{"priority return", "priority reclaim", "priority lend", "share_ratio return",
			"priority balance=true preemption=false", "share_ratio balance=false preemption=true",
			"share_ratio balance=true preemption=false"} {
			if seen[k] == 0 {
				t.Errorf("no random event exercised %q (seen %v)", k, seen)
			}
		}
		// the greedy placement of the layered fold (AMBIGUITIES.md,
		// ownership 20) can leave an owner short here too; rare
		if seen["owner below its own layer"]*100 > seen["events"] {
			t.Errorf("%d of %d events leave an owner below its own layer", seen["owner below its own layer"], seen["events"])
		}
		if seen["balance:false above max(a0, T0, T)"]*100 > seen["events"] {
			t.Errorf("%d of %d events leave a leaf above max(a0, T0, T)", seen["balance:false above max(a0, T0, T)"], seen["events"])
		}
	}
	// The greedy placement can leave a leaf off its layered target where
	// lent-slot eligibility, a shared max and earlier placements conflict
	// (AMBIGUITIES.md, ownership 20); it must stay rare.
	if seen["events off target"]*100 > seen["events"] {
		t.Errorf("%d of %d events end off the layered targets", seen["events off target"], seen["events"])
	}
	t.Logf("decisions by kind: %v", seen)
}

// dumpModel describes the state for a failure message.
func dumpModel(m *Model) string {
	s := ""
	for _, h := range m.hostNames() {
		hh := m.hosts[h]
		at, free := m.attribute(h)
		s += fmt.Sprintf("\n host %s %s slots %d up %v parts %v attributed %v free %v", h, hh.group, hh.slots, hh.up, m.parts(h), at, free)
	}
	for _, p := range m.preorder() {
		n := m.nodes[p]
		s += fmt.Sprintf("\n node %s share %d prio %d own %v lend %v lg %v rg %v owned %v", p, n.share, n.priority, n.own, n.lend, n.lendGrace, n.reclaimGrace, m.own[p])
		if m.isLeaf(p) {
			s += fmt.Sprintf(" d %d a %v", m.demand[p], m.alloc[p])
		}
	}
	if m.hasOwnership() {
		ly := m.layered(m.derive())
		s += fmt.Sprintf("\n T %v own %v src %v groups %v", ly.T, ly.own, ly.src, ly.groups)
	}
	return s
}

// checkModes checks one event of TestOwnRandomModes (the fold f, its
// decisions in f.out) and returns a label for the coverage count.
func checkModes(t *testing.T, name string, m *Model, at time.Time, f *fold) string {
	t.Helper()
	for _, d := range f.out {
		if d.Kind == "reclaim" && !m.pol.preemption {
			t.Fatalf("%s: reclaim without preemption: %+v", name, d)
		}
		if strings.HasPrefix(d.Rule, "share_ratio.") && m.pol.reclaim == events.ReclaimPriority ||
			strings.HasPrefix(d.Rule, "priority.") && m.pol.reclaim == events.ReclaimShareRatio {
			t.Fatalf("%s: rule %s under %s", name, d.Rule, m.pol.reclaim)
		}
		if d.Kind == "return" {
			ok := false
			for _, q := range chain(d.Consumer) {
				ok = ok || d.Deadline == at.Add(m.nodes[q].lendGrace)
			}
			if !ok || d.From == "" || d.Rule != "own.return" {
				t.Fatalf("%s: return %+v", name, d)
			}
		}
	}
	if !m.hasOwnership() {
		return "no ownership"
	}
	d := m.derive()
	ly := m.layered(d)
	for _, l := range m.leaves() {
		// an owner holds its own layer (a return needs no preemption),
		// unless (without preemption) its room under a max is held by
		// others' share slots (AMBIGUITIES.md, ownership 22)
		if m.held(l) < ly.own[l] && (m.pol.preemption || (&fold{m: m, d: d}).headroom(l, "") > 0) {
			return "owner below its own layer"
		}
	}
	if f.t0 != nil {
		for l, a0 := range f.a0 {
			if m.held(l) > max(a0, f.t0[l], ly.T[l]) {
				return "balance:false above max(a0, T0, T)"
			}
		}
	}
	return "modes ok"
}

// checkUnassigned: while no ownership is assigned (before and after the
// event), an ownership plan folds as the same plan without it
// (docs/rules.md#layered-fold: one public layer): under priority the same
// decisions and placement, under share_ratio the same allocations.
func checkUnassigned(t *testing.T, name string, before, after *Model, seq uint64, at time.Time, p events.Payload, ds []Decision) string {
	t.Helper()
	if !before.planned || len(before.own) > 0 || len(after.own) > 0 || !after.hasOwnership() {
		return "assigned or no ownership"
	}
	twin := before.clone()
	nodes := map[string]*node{}
	for k, n := range twin.nodes {
		c := *n
		c.own = nil
		nodes[k] = &c
	}
	twin.nodes = nodes
	if op, ok := p.(*OwnedPlan); ok {
		q := *op
		q.Owners = nil
		p = &q
	}
	f, err := twin.applyAt(seq, at, p)
	if err != nil {
		t.Fatalf("%s: twin without ownership refused: %v", name, err)
	}
	if after.pol.reclaim == events.ReclaimShareRatio {
		// share_ratio's layered pairing (placement.go, unchanged) pairs
		// claimants and victims source by source, then on the totals: the
		// same allocations, possibly from other victims and hosts
		if !reflect.DeepEqual(twin.Allocations(), after.Allocations()) {
			t.Fatalf("%s: unassigned ownership (share_ratio balance=%v) gave %v\nwithout ownership %v", name,
				after.pol.balance, after.Allocations(), twin.Allocations())
		}
		return "unassigned = without ownership (counts)"
	}
	if !reflect.DeepEqual(f.out, ds) || !reflect.DeepEqual(twin.HostAllocations(), after.HostAllocations()) {
		t.Fatalf("%s: unassigned ownership (priority) gave %s\nwithout ownership %s", name, fmtDecisions(ds), fmtDecisions(f.out))
	}
	return "unassigned = without ownership"
}
