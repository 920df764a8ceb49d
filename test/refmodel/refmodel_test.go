package refmodel

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

func i64(v int64) *int64 { return &v }
func boolp(v bool) *bool { return &v }

func cons(path string, share, prio int64) events.Consumer {
	return events.Consumer{Path: path, Share: i64(share), Priority: prio}
}

func plan(reclaim, enforcement string, cs ...events.Consumer) *events.PlanChange {
	return &events.PlanChange{Plan: events.Plan{Policy: events.Policy{Reclaim: reclaim, Enforcement: enforcement}, Consumers: cs}}
}

func demand(kv ...any) *events.Demand {
	d := &events.Demand{Demands: map[string]int64{}}
	for i := 0; i < len(kv); i += 2 {
		d.Demands[kv[i].(string)] = int64(kv[i+1].(int))
	}
	return d
}

type key struct{ kind, consumer, from string }

type step struct {
	name      string
	events    []events.Payload
	alloc     map[string]int64 // any path; parents are sums; unlisted leaves must hold 0
	decisions map[key]int64    // must be among the step's decisions, summed per key
	rejected  int
}

type scenario struct {
	name  string
	plan  *events.PlanChange
	hosts []*events.HostUp
	steps []step
}

// run folds a scenario like `ledger simulate` would and checks every expect.
func run(t *testing.T, sc scenario) {
	t.Helper()
	m := New()
	var seq uint64
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	apply := func(p events.Payload) ([]Decision, error) {
		seq++
		ds, err := m.Apply(seq, at.Add(time.Duration(seq-1)*time.Second), p)
		if err != nil {
			seq-- // a refused event is never appended
		}
		return ds, err
	}
	if _, err := apply(sc.plan); err != nil {
		t.Fatalf("plan: %v", err)
	}
	for _, h := range sc.hosts {
		if _, err := apply(h); err != nil {
			t.Fatalf("host %s: %v", h.Host, err)
		}
	}
	for _, st := range sc.steps {
		sum := map[key]int64{}
		rejected := 0
		for _, e := range st.events {
			ds, err := apply(e)
			if err != nil {
				rejected++
				continue
			}
			for _, d := range ds {
				sum[key{d.Kind, d.Consumer, d.From}] += d.Slots
			}
		}
		if rejected != st.rejected {
			t.Errorf("%s: rejected %d, want %d", st.name, rejected, st.rejected)
		}
		got := m.Allocations()
		for path, want := range st.alloc {
			var a int64
			for l, v := range got {
				if l == path || strings.HasPrefix(l, path+"/") {
					a += v
				}
			}
			if a != want {
				t.Errorf("%s: A(%s) = %d, want %d (all: %v)", st.name, path, a, want, got)
			}
		}
		for l, v := range got {
			if _, listed := st.alloc[l]; !listed && v != 0 && !parentListed(l, st.alloc) {
				t.Errorf("%s: unlisted leaf %s holds %d", st.name, l, v)
			}
		}
		for k, want := range st.decisions {
			if sum[k] != want {
				t.Errorf("%s: decisions %v sum %d, want %d (all: %v)", st.name, k, sum[k], want, sum)
			}
		}
		checkInvariants(t, st.name, m)
	}
}

// parentListed: a leaf below a listed parent whose leaves are not all listed
// is covered by the parent's sum; only fully unlisted leaves must hold 0.
func parentListed(l string, alloc map[string]int64) bool {
	for p := range alloc {
		if strings.HasPrefix(l, p+"/") {
			return true
		}
	}
	return false
}

func checkInvariants(t *testing.T, name string, m *Model) {
	t.Helper()
	var total int64
	for l, a := range m.Allocations() {
		if a < 0 || a > m.demand[l] {
			t.Errorf("%s: %s holds %d, demand %d", name, l, a, m.demand[l])
		}
		total += a
	}
	if total > m.capacity() {
		t.Errorf("%s: sum a %d > C %d", name, total, m.capacity())
	}
	for h := range m.hosts {
		if m.hostFree(h) < 0 {
			t.Errorf("%s: host %s over-allocated", name, h)
		}
	}
	d := m.derive()
	for p := range m.nodes {
		if p != root && m.allocOf(p) > d.maxS[p] {
			t.Errorf("%s: A(%s) above max", name, p)
		}
	}
}

func TestSeeds(t *testing.T) {
	tree := []events.Consumer{{Path: "/X/1"}, {Path: "/X/2"}, {Path: "/Y/1"}, {Path: "/Y/2"}}
	scenarios := []scenario{
		{
			name:  "seed 000 priority reclaim",
			plan:  plan("priority", "leaf", cons("/A", 1, 3), cons("/B", 1, 1), cons("/C", 1, 2)),
			hosts: []*events.HostUp{{Host: "h1", Slots: 12}},
			steps: []step{
				{name: "all ask 4", events: []events.Payload{demand("/A", 4, "/B", 4, "/C", 4)},
					alloc: map[string]int64{"/A": 4, "/B": 4, "/C": 4}},
				{name: "C idle", events: []events.Payload{demand("/A", 7, "/B", 5, "/C", 0)},
					alloc: map[string]int64{"/A": 7, "/B": 5, "/C": 0}},
				{name: "C again", events: []events.Payload{demand("/C", 1)},
					alloc:     map[string]int64{"/A": 7, "/B": 4, "/C": 1},
					decisions: map[key]int64{{"reclaim", "/C", "/B"}: 1}},
			},
		},
		{
			name:  "seed 001 sub-consumers",
			plan:  plan("share_ratio", "", cons("/A", 1, 0), cons("/B", 4, 0), cons("/B/B1", 25, 0), cons("/B/B2", 75, 0)),
			hosts: []*events.HostUp{{Host: "h1", Slots: 60}, {Host: "h2", Slots: 40}},
			steps: []step{
				{name: "A only", events: []events.Payload{demand("/A", 100)}, alloc: map[string]int64{"/A": 100}},
				{name: "B1 500", events: []events.Payload{demand("/B/B1", 500)},
					alloc:     map[string]int64{"/A": 20, "/B": 80, "/B/B1": 80},
					decisions: map[key]int64{{"reclaim", "/B/B1", "/A"}: 80}},
				{name: "A drops", events: []events.Payload{demand("/A", 0)}, alloc: map[string]int64{"/A": 0, "/B/B1": 100}},
				{name: "B2 100", events: []events.Payload{demand("/B/B2", 100)},
					alloc:     map[string]int64{"/B/B1": 25, "/B/B2": 75},
					decisions: map[key]int64{{"reclaim", "/B/B2", "/B/B1"}: 75}},
			},
		},
		{
			name:  "seed 001 three consumers",
			plan:  plan("share_ratio", "", cons("/A", 1, 3), cons("/B", 1, 1), cons("/C", 1, 2)),
			hosts: []*events.HostUp{{Host: "h1", Slots: 18}},
			steps: []step{
				{name: "all 6", events: []events.Payload{demand("/A", 6, "/B", 6, "/C", 6)},
					alloc: map[string]int64{"/A": 6, "/B": 6, "/C": 6}},
				{name: "C idle", events: []events.Payload{demand("/A", 10, "/B", 10, "/C", 0)},
					alloc: map[string]int64{"/A": 9, "/B": 9, "/C": 0}},
				{name: "C asks 2", events: []events.Payload{demand("/C", 2)},
					alloc:     map[string]int64{"/A": 8, "/B": 8, "/C": 2},
					decisions: map[key]int64{{"reclaim", "/C", "/A"}: 1, {"reclaim", "/C", "/B"}: 1}},
			},
		},
		{
			name:  "seed 002 leaf vs parent",
			plan:  plan("share_ratio", "leaf", tree...),
			hosts: []*events.HostUp{{Host: "h1", Slots: 16}},
			steps: []step{
				{name: "leaf level", events: []events.Payload{demand("/X/1", 2, "/X/2", 50, "/Y/1", 50, "/Y/2", 50)},
					alloc: map[string]int64{"/X/1": 2, "/X/2": 5, "/Y/1": 5, "/Y/2": 4}},
				{name: "parent level", events: []events.Payload{plan("share_ratio", "parent", tree...)},
					alloc: map[string]int64{"/X/1": 2, "/X/2": 6, "/Y/1": 4, "/Y/2": 4}},
			},
		},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { run(t, sc) })
	}
}

func TestSeed000DecisionLog(t *testing.T) {
	m := New()
	mustApply(t, m, 1, plan("priority", "leaf", cons("/A", 1, 3), cons("/B", 1, 1), cons("/C", 1, 2)))
	mustApply(t, m, 2, &events.HostUp{Host: "h1", Slots: 12})
	mustApply(t, m, 3, demand("/A", 4, "/B", 4, "/C", 4))
	got := mustApply(t, m, 4, demand("/A", 7, "/B", 5, "/C", 0))
	want := []Decision{
		{Kind: "release", Consumer: "/C", Host: "h1", Slots: 4, Rule: "release.demand_dropped"},
		{Kind: "grant", Consumer: "/A", Host: "h1", Slots: 3, Rule: "priority.borrow"},
		{Kind: "grant", Consumer: "/B", Host: "h1", Slots: 1, Rule: "priority.borrow"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decisions %+v, want %+v", got, want)
	}
	got = mustApply(t, m, 5, demand("/C", 1))
	want = []Decision{{Kind: "reclaim", Consumer: "/C", From: "/B", Host: "h1", Slots: 1, Rule: "priority.reclaim",
		Deadline: time.Unix(5, 0)}} // time + the victim's reclaim_grace 0 (section 6)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decisions %+v, want %+v", got, want)
	}
}

func mustApply(t *testing.T, m *Model, seq uint64, p events.Payload) []Decision {
	t.Helper()
	ds, err := m.Apply(seq, time.Unix(int64(seq), 0), p)
	if err != nil {
		t.Fatalf("event %d: %v", seq, err)
	}
	return ds
}

func TestApportion(t *testing.T) {
	it := func(path string, w, c, prio int64) item { return item{path: path, w: w, cap: c, priority: prio} }
	cases := []struct {
		name  string
		q     int64
		items []item
		want  []int64
	}{
		{"even", 12, []item{it("/a", 1, inf, 0), it("/b", 1, inf, 0), it("/c", 1, inf, 0)}, []int64{4, 4, 4}},
		{"remainder to smaller path", 1, []item{it("/b", 1, inf, 0), it("/a", 1, inf, 0)}, []int64{0, 1}},
		{"remainder to higher priority", 1, []item{it("/a", 1, inf, 0), it("/b", 1, inf, 5)}, []int64{0, 1}},
		{"largest remainder wins over priority", 3, []item{it("/a", 1, inf, 0), it("/b", 3, inf, 9)}, []int64{1, 2}},
		{"largest remainders", 10, []item{it("/a", 1, inf, 0), it("/b", 1, inf, 0), it("/c", 1, inf, 0)}, []int64{4, 3, 3}},
		{"ratio 1:4", 100, []item{it("/A", 1, inf, 0), it("/B", 4, inf, 0)}, []int64{20, 80}},
		{"water-fill", 8, []item{it("/1", 1, 2, 0), it("/2", 1, 50, 0)}, []int64{2, 6}},
		{"cascade of caps", 10, []item{it("/a", 1, 1, 0), it("/b", 1, 3, 0), it("/c", 1, inf, 0)}, []int64{1, 3, 6}},
		{"caps below Q total", 10, []item{it("/a", 1, 2, 0), it("/b", 1, 3, 0)}, []int64{2, 3}},
		{"zero Q", 0, []item{it("/a", 1, 5, 0), it("/b", 2, inf, 0)}, []int64{0, 0}},
		{"single huge cap", 7, []item{it("/a", 3, 1<<40, 0)}, []int64{7}},
		{"zero cap", 5, []item{it("/a", 1, 0, 0), it("/b", 1, inf, 0)}, []int64{0, 5}},
		{"no items", 5, nil, []int64{}},
		{"big numbers", 1 << 40, []item{it("/a", 1<<21, inf, 0), it("/b", 1<<21-1, inf, 0), it("/c", 1, inf, 0)},
			[]int64{1 << 39, (1<<39 - 1<<18), 1 << 18}},
	}
	for _, c := range cases {
		got := apportion(c.q, c.items)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestValidationLeavesStateUnchanged(t *testing.T) {
	base := func() *Model {
		m := New()
		mustApply(t, m, 1, plan("priority", "leaf", cons("/A", 1, 0), cons("/B/x", 1, 0)))
		mustApply(t, m, 2, &events.HostUp{Host: "h1", Slots: 10})
		mustApply(t, m, 3, &events.HostUp{Host: "h2", Slots: 4})
		mustApply(t, m, 4, &events.HostDown{Host: "h2"})
		mustApply(t, m, 5, demand("/A", 3, "/B/x", 2))
		return m
	}
	bad := func(mut func(*events.Consumer)) *events.PlanChange {
		c := cons("/A", 1, 0)
		mut(&c)
		return plan("", "", c)
	}
	cases := []struct {
		name string
		p    events.Payload
		want error
	}{
		{"unknown consumer", demand("/nope", 1), ErrUnknownConsumer},
		{"demand on parent", demand("/B", 1), ErrNotLeaf},
		{"negative demand", demand("/A", -1), ErrNegativeSlots},
		{"demand overflow", demand("/A", 1<<40+1), ErrOverflow},
		{"empty demand", &events.Demand{}, ErrEmptyDemand},
		{"one bad entry refuses all", demand("/A", 9, "/nope", 1), ErrUnknownConsumer},
		{"release too much", &events.Release{Consumer: "/A", Slots: 4}, ErrReleaseTooMuch},
		{"release negative", &events.Release{Consumer: "/A", Slots: -1}, ErrNegativeSlots},
		{"release zero", &events.Release{Consumer: "/A", Slots: 0}, ErrNonPositive},
		{"release unknown", &events.Release{Consumer: "/Z", Slots: 1}, ErrUnknownConsumer},
		{"release parent", &events.Release{Consumer: "/B", Slots: 1}, ErrNotLeaf},
		{"host down unknown", &events.HostDown{Host: "h9"}, ErrUnknownHost},
		{"host down twice", &events.HostDown{Host: "h2"}, ErrHostDown},
		{"host up twice", &events.HostUp{Host: "h1", Slots: 3}, ErrHostUp},
		{"host up zero", &events.HostUp{Host: "h3", Slots: 0}, ErrNonPositive},
		{"host up negative", &events.HostUp{Host: "h3", Slots: -2}, ErrNegativeSlots},
		{"host up overflow", &events.HostUp{Host: "h3", Slots: 1 << 40}, ErrOverflow},
		{"host up empty name", &events.HostUp{Slots: 1}, ErrBadHost},
		{"bad path", plan("", "", cons("/a/../b", 1, 0)), ErrMalformedPlan},
		{"trailing slash", plan("", "", cons("/a/", 1, 0)), ErrMalformedPlan},
		{"relative path", plan("", "", cons("a", 1, 0)), ErrMalformedPlan},
		{"root listed", plan("", "", cons("/", 1, 0)), ErrMalformedPlan},
		{"whitespace", plan("", "", cons("/a b", 1, 0)), ErrMalformedPlan},
		{"duplicate path", plan("", "", cons("/A", 1, 0), cons("/A", 2, 0)), ErrMalformedPlan},
		{"share 0", plan("", "", cons("/A", 0, 0)), ErrMalformedPlan},
		{"share overflow", plan("", "", cons("/A", 1<<22+1, 0)), ErrOverflow},
		{"sibling shares overflow", plan("", "", cons("/A", 1<<22, 0), cons("/B", 1, 0)), ErrOverflow},
		{"percent 0", bad(func(c *events.Consumer) { c.Max = &events.Max{Percent: 0, IsPercent: true} }), ErrMalformedPlan},
		{"percent 150", bad(func(c *events.Consumer) { c.Max = &events.Max{Percent: 150, IsPercent: true} }), ErrMalformedPlan},
		{"negative max", bad(func(c *events.Consumer) { c.Max = &events.Max{Slots: -1} }), ErrMalformedPlan},
		{"max overflow", bad(func(c *events.Consumer) { c.Max = &events.Max{Slots: 1<<40 + 1} }), ErrOverflow},
		{"borrow_limit overflow", bad(func(c *events.Consumer) { c.BorrowLimit = i64(1<<40 + 1) }), ErrOverflow},
		{"bad policy", &events.PlanChange{Plan: events.Plan{Policy: events.Policy{Reclaim: "fifo"}}}, ErrMalformedPlan},
		{"nil payload", (*events.Demand)(nil), ErrBadPayload},
	}
	for _, c := range cases {
		m := base()
		before := m.clone()
		ds, err := m.Apply(6, time.Unix(6, 0), c.p)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
		if ds != nil {
			t.Errorf("%s: decisions %v on a refused event", c.name, ds)
		}
		if !reflect.DeepEqual(m, before) {
			t.Errorf("%s: state changed", c.name)
		}
	}
	// before any plan
	m := New()
	if _, err := m.Apply(1, time.Unix(1, 0), demand("/A", 1)); !errors.Is(err, ErrNoPlan) {
		t.Errorf("demand before plan: %v", err)
	}
	if _, err := m.Apply(1, time.Unix(1, 0), &events.Release{Consumer: "/A", Slots: 1}); !errors.Is(err, ErrNoPlan) {
		t.Errorf("release before plan: %v", err)
	}
	if !reflect.DeepEqual(m, New()) {
		t.Errorf("state changed before plan")
	}
	mustApply(t, m, 1, &events.HostUp{Host: "h1", Slots: 2}) // host events are accepted before a plan
	mustApply(t, m, 2, &events.HostDown{Host: "h1"})
	mustApply(t, m, 3, &events.HostUp{Host: "h1", Group: "gpu", Slots: 5}) // a down host may come back resized
	if m.hosts["h1"].slots != 5 || m.hosts["h1"].group != "gpu" {
		t.Errorf("host came back as %+v", *m.hosts["h1"])
	}
}

func TestHostsPlanAndMax(t *testing.T) {
	m := New()
	mustApply(t, m, 1, plan("priority", "leaf", cons("/A", 1, 0), cons("/B", 1, 0)))
	mustApply(t, m, 2, &events.HostUp{Host: "h1", Slots: 6})
	mustApply(t, m, 3, &events.HostUp{Host: "h2", Slots: 4})
	mustApply(t, m, 4, demand("/A", 5, "/B", 5))
	if got := m.HostAllocations(); !reflect.DeepEqual(got, map[string]map[string]int64{"/A": {"h1": 5}, "/B": {"h1": 1, "h2": 4}}) {
		t.Fatalf("placement %v", got)
	}
	ds := mustApply(t, m, 5, &events.HostDown{Host: "h2"})
	want := []Decision{ // B is trimmed below its new share 3 and reclaims from A
		{Kind: "trim", Consumer: "/B", Host: "h2", Slots: 4, Rule: "trim.host_down"},
		{Kind: "reclaim", Consumer: "/B", From: "/A", Host: "h1", Slots: 2, Rule: "priority.reclaim", Deadline: time.Unix(5, 0)},
	}
	if !reflect.DeepEqual(ds, want) {
		t.Fatalf("host down: %+v", ds)
	}
	if got := m.Allocations(); got["/A"] != 3 || got["/B"] != 3 {
		t.Fatalf("after host down %v", got)
	}
	// plan change: /B removed, /A capped at 30% of C = 1
	capped := cons("/A", 1, 0)
	capped.Max = &events.Max{Percent: 30, IsPercent: true}
	ds = mustApply(t, m, 6, plan("priority", "leaf", capped, cons("/C", 1, 0)))
	want = []Decision{
		{Kind: "release", Consumer: "/B", Host: "h1", Slots: 3, Rule: "release.consumer_removed"},
		{Kind: "release", Consumer: "/A", Host: "h1", Slots: 2, Rule: "release.max_lowered"},
	}
	if !reflect.DeepEqual(ds, want) {
		t.Fatalf("plan change: %+v", ds)
	}
	if got := m.Allocations(); !reflect.DeepEqual(got, map[string]int64{"/A": 1, "/C": 0}) {
		t.Fatalf("after plan %v", got)
	}
	ds = mustApply(t, m, 7, &events.Release{Consumer: "/A", Slots: 1})
	if len(ds) != 2 || ds[0].Rule != "release.finished" || ds[1].Rule != "priority.entitled" || ds[1].Slots != 1 {
		t.Fatalf("release: %+v", ds)
	}
	if m.demand["/A"] != 4 || m.held("/A") != 1 {
		t.Fatalf("release: demand %d held %d", m.demand["/A"], m.held("/A"))
	}
}

func TestPreemptionOffAndParentMax(t *testing.T) {
	// preemption off: C's idle share stays with A until A releases
	m := New()
	p := plan("share_ratio", "", cons("/A", 1, 0), cons("/C", 1, 0))
	p.Plan.Policy.Preemption = boolp(false)
	mustApply(t, m, 1, p)
	mustApply(t, m, 2, &events.HostUp{Host: "h1", Slots: 10})
	mustApply(t, m, 3, demand("/A", 10))
	if ds := mustApply(t, m, 4, demand("/C", 5)); len(ds) != 0 {
		t.Fatalf("preemption off made %+v", ds)
	}
	ds := mustApply(t, m, 5, &events.Release{Consumer: "/A", Slots: 3})
	if got := m.Allocations(); got["/A"] != 7 || got["/C"] != 3 || len(ds) != 2 || ds[1].Rule != "share_ratio.grant" {
		t.Fatalf("after release %v %+v", got, ds)
	}
	// parent max lowered: release.max from the lowest priority leaf
	m = New()
	mustApply(t, m, 1, plan("priority", "leaf", cons("/P/a", 1, 1), cons("/P/b", 1, 0)))
	mustApply(t, m, 2, &events.HostUp{Host: "h1", Slots: 8})
	mustApply(t, m, 3, demand("/P/a", 4, "/P/b", 4))
	capped := cons("/P", 1, 0)
	capped.Max = &events.Max{Slots: 5}
	ds = mustApply(t, m, 4, plan("priority", "leaf", capped, cons("/P/a", 1, 1), cons("/P/b", 1, 0)))
	want := []Decision{{Kind: "release", Consumer: "/P/b", Host: "h1", Slots: 3, Rule: "release.max"}}
	if !reflect.DeepEqual(ds, want) {
		t.Fatalf("parent max: %+v", ds)
	}
}

// TestRandomInvariants folds random events, under rules versions 1 and 2
// and every policy (balance: false included), and checks the invariants of
// docs/rules.md#model, plus a = T after every event in share_ratio mode with
// preemption and balancing, and checkBalanceFalse / checkVersions.
func TestRandomInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	paths := []string{"/A", "/B/x", "/B/y", "/C/p/q", "/C/r"}
	randPlan := func(valid bool) *events.PlanChange {
		pc := &events.PlanChange{}
		pc.Plan.Rules = rng.IntN(3) // 0 (not named: version 1), 1, 2
		pc.Plan.Policy.Reclaim = []string{"priority", "share_ratio"}[rng.IntN(2)]
		pc.Plan.Policy.Enforcement = []string{"leaf", "parent"}[rng.IntN(2)]
		pc.Plan.Policy.Preemption = boolp(rng.IntN(4) > 0)
		if pc.Plan.Policy.Reclaim == events.ReclaimShareRatio {
			pc.Plan.Policy.Balance = []*bool{nil, boolp(true), boolp(false), boolp(false)}[rng.IntN(4)]
		}
		if !valid && rng.IntN(8) == 0 { // refused: unknown version, or balance under priority
			if rng.IntN(2) == 0 {
				pc.Plan.Rules = 3
			} else {
				pc.Plan.Policy.Reclaim, pc.Plan.Policy.Balance = events.ReclaimPriority, boolp(rng.IntN(2) == 0)
			}
		}
		for _, p := range append(paths, "/B", "/C") {
			if rng.IntN(5) == 0 && p != "/B" && p != "/C" {
				continue // a consumer comes and goes
			}
			c := cons(p, 1+rng.Int64N(4), rng.Int64N(3))
			switch rng.IntN(4) {
			case 0:
				c.Max = &events.Max{Slots: rng.Int64N(12)}
			case 1:
				c.Max = &events.Max{Percent: 1 + rng.Int64N(100), IsPercent: true}
			}
			if rng.IntN(3) == 0 {
				c.BorrowLimit = i64(rng.Int64N(4))
			}
			pc.Plan.Consumers = append(pc.Plan.Consumers, c)
		}
		return pc
	}
	seen := map[string]int{}
	for run := 0; run < 400; run++ {
		m := New()
		mustApply(t, m, 1, randPlan(true))
		mustApply(t, m, 2, &events.HostUp{Host: "h1", Slots: 8})
		mustApply(t, m, 3, &events.HostUp{Host: "h2", Slots: 5})
		for seq := uint64(4); seq < 40; seq++ {
			var p events.Payload
			switch k := rng.IntN(10); {
			case k < 5:
				p = demand(paths[rng.IntN(len(paths))], rng.IntN(15), paths[rng.IntN(len(paths))], rng.IntN(15))
			case k < 7:
				p = &events.Release{Consumer: paths[rng.IntN(len(paths))], Slots: 1 + rng.Int64N(3)}
			case k < 8:
				p = randPlan(false)
			default:
				h := []string{"h1", "h2", "h3"}[rng.IntN(3)]
				if hh, ok := m.hosts[h]; ok && hh.up {
					p = &events.HostDown{Host: h}
				} else {
					p = &events.HostUp{Host: h, Slots: 1 + rng.Int64N(9)}
				}
			}
			before := m.clone()
			ds, err := m.Apply(seq, time.Unix(int64(seq), 0), p)
			if err != nil {
				if !reflect.DeepEqual(m, before) {
					t.Fatalf("run %d seq %d: refused event changed state", run, seq)
				}
				seen["refused"]++
				continue
			}
			again := before.clone()
			f, _ := again.applyAt(seq, time.Unix(int64(seq), 0), p) // the internal fold, to see the balance:false phases
			if !reflect.DeepEqual(ds, f.out) || !reflect.DeepEqual(again, m) {
				t.Fatalf("run %d seq %d: fold not deterministic", run, seq)
			}
			name := fmt.Sprintf("run %d seq %d %T", run, seq, p)
			checkInvariants(t, name, m)
			seen[fmt.Sprintf("v%d %s balance=%v", m.pol.rules, m.pol.reclaim, m.pol.balance)]++
			if m.pol.reclaim == events.ReclaimShareRatio && m.pol.preemption && m.pol.balance {
				tg := m.Targets()
				for l, a := range m.Allocations() {
					if a != tg[l] {
						t.Fatalf("%s: %s holds %d, target %d", name, l, a, tg[l])
					}
				}
			}
			if m.pol.reclaim == events.ReclaimShareRatio && !m.pol.balance {
				seen[checkBalanceFalse(t, name, before, m, seq, p, f)]++
			}
			seen[checkVersions(t, name, before, m, seq, p, ds)]++
			if t.Failed() {
				t.FailNow()
			}
		}
	}
	for _, k := range []string{"refused", "v1 share_ratio balance=false", "v2 share_ratio balance=false",
		"v2 priority balance=true", "balance:false differs from balanced", "versions differ on host_down"} {
		if seen[k] == 0 {
			t.Errorf("no random event exercised %q (seen %v)", k, seen)
		}
	}
	t.Logf("events by case: %v", seen)
}

// checkBalanceFalse checks one share_ratio event folded with balance:false
// (the fold f, on the state before). It returns a label for the coverage count.
func checkBalanceFalse(t *testing.T, name string, before, after *Model, seq uint64, p events.Payload, f *fold) string {
	t.Helper()
	flipped := before.clone()
	flipped.pol.balance = true
	if pc, ok := p.(*events.PlanChange); ok {
		q := *pc
		q.Plan.Policy.Balance = nil
		p = &q
	}
	fb, err := flipped.applyAt(seq, time.Unix(int64(seq), 0), p) // the time Apply was given: reclaims carry deadlines
	if err != nil {
		t.Fatalf("%s: balanced twin refused: %v", name, err)
	}
	same := reflect.DeepEqual(fb.out, f.out) && reflect.DeepEqual(flipped.Allocations(), after.Allocations())
	if !after.pol.preemption {
		// without reclaim, balance changes nothing
		if !same {
			t.Fatalf("%s: preemption off, balance:false gave %+v, balanced %+v", name, f.out, fb.out)
		}
		return "balance:false without preemption"
	}
	d := f.d
	e0 := f.reclaimDemands0()
	capped := false
	for l, a0 := range f.a0 {
		if e0[l] != d.E[l] {
			capped = true
		}
		a4, a, tt := f.afterReclaim[l], after.held(l), d.T[l]
		// reclaim phase: every leaf ends at or above T0 (claimants reach it,
		// victims stop there) and none is lifted above max(a0, T0)
		if a4 < f.t0[l] || a4 > max(a0, f.t0[l]) {
			t.Fatalf("%s: %s a0 %d -> %d after reclaim, T0 %d", name, l, a0, a4, f.t0[l])
		}
		// leftover phase only grants, up to T
		if a < a4 || a > max(a4, tt) {
			t.Fatalf("%s: %s %d after reclaim -> %d, T %d", name, l, a4, a, tt)
		}
		// no idle slot while a leaf below T could take it
		if a < tt && after.freeTotal() > 0 && (&fold{m: after, d: d}).headroom(l, "") > 0 {
			t.Fatalf("%s: %s holds %d < T %d with %d free slots", name, l, a, tt, after.freeTotal())
		}
	}
	for _, dec := range f.out {
		// reclaim never lifts a claimant above its planned share
		if dec.Kind == "reclaim" && f.afterReclaim[dec.Consumer] > d.P[dec.Consumer] {
			t.Fatalf("%s: %s reclaimed up to %d > P %d", name, dec.Consumer, f.afterReclaim[dec.Consumer], d.P[dec.Consumer])
		}
	}
	if !capped { // E' = E everywhere: T0 = T, so balancing has nothing to hold back
		if !same {
			t.Fatalf("%s: T0 = T, yet balance:false gave %+v, balanced %+v", name, f.out, fb.out)
		}
		return "balance:false with T0 = T"
	}
	if !same {
		return "balance:false differs from balanced"
	}
	return "balance:false capped, same result"
}

// reclaimDemands0 is reclaimDemands on the allocations a0 recorded when the
// rebalance started (the fold's model has moved on since).
func (f *fold) reclaimDemands0() map[string]int64 {
	e := map[string]int64{}
	for l, a0 := range f.a0 {
		e[l] = min(f.d.E[l], max(f.d.P[l], a0))
	}
	return e
}

// checkVersions compares the event with its twin under the other rules
// version: only a host loss may differ, and under version 2 no release is
// taken from a host that is down.
func checkVersions(t *testing.T, name string, before, after *Model, seq uint64, p events.Payload, ds []Decision) string {
	t.Helper()
	for _, d := range ds {
		if d.Kind == "release" && after.pol.rules == rulesV2 && !after.hosts[d.Host].up {
			t.Fatalf("%s: version 2 released on down host %s: %+v", name, d.Host, d)
		}
	}
	if _, ok := p.(*events.PlanChange); ok || !before.planned {
		return "plan or no plan"
	}
	twin := before.clone()
	twin.pol.rules = rulesV1 + rulesV2 - before.pol.rules
	f, err := twin.applyAt(seq, time.Unix(int64(seq), 0), p)
	if err != nil {
		t.Fatalf("%s: twin under the other version refused: %v", name, err)
	}
	same := reflect.DeepEqual(f.out, ds) && reflect.DeepEqual(twin.HostAllocations(), after.HostAllocations())
	if _, down := p.(*events.HostDown); !down {
		if !same {
			t.Fatalf("%s: versions differ on a %T: %+v vs %+v", name, p, ds, f.out)
		}
		return "versions agree"
	}
	if !same {
		return "versions differ on host_down"
	}
	return "versions agree on host_down"
}
