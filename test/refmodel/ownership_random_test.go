package refmodel

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

var ownRuns = flag.Int("own.runs", 120, "random ownership logs folded by TestOwnRandomInvariants")

// TestOwnRandomInvariants folds random share_ratio logs with ownership
// (whole, partial and group entries, preferences, lend and grace
// periods, both values of reclaim_for_preference, preemption on and off,
// host and plan changes) and checks after every event section 1's
// invariants, section 5's properties (checkOwnership: a = the layered
// targets with preemption, owners hold their own layer, nobody holds
// slots it may not borrow, ownership within hosts and parents), that a
// refused event changes nothing and that the fold is deterministic.
func TestOwnRandomInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
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
			for _, d := range ds {
				seen[d.Kind]++
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
