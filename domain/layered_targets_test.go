package domain

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
)

// layeredCase builds a tree from a plan, sets each leaf's E from demand,
// and computes the layered targets from per-consumer owned totals (the
// assignment's output), with lend defaulting to true.
type layeredCase struct {
	plan    events.Plan
	demand  map[string]Slots
	owned   map[string]Slots
	public  Slots
	noLend  map[string]bool
	parents bool // enforcement: parent
}

func (c layeredCase) run(t *testing.T) (*tree, layeredTargets) {
	t.Helper()
	tr, err := buildTreeUnchecked(c.plan)
	if err != nil {
		t.Fatal(err)
	}
	n := len(tr.nodes)
	own := ownTotals{owned: make([]Slots, n), private: make([]Slots, n), public: c.public}
	for path, k := range c.owned {
		id, ok := tr.lookup(path)
		if !ok {
			t.Fatalf("owned: no consumer %s", path)
		}
		own.owned[id] = k
	}
	for id := 1; id < n; id++ {
		own.private[id] = own.owned[id]
		for _, ch := range tr.nodes[id].children {
			own.private[id] -= own.owned[ch]
		}
	}
	for id := range tr.nodes {
		tr.nodes[id].maxCap = Unlimited
		if m := tr.nodes[id].max; m != nil && !m.IsPercent {
			tr.nodes[id].maxCap = Slots(m.Slots)
		}
	}
	for id := n - 1; id >= 0; id-- {
		nd := &tr.nodes[id]
		if nd.leaf {
			nd.eff = minSlots(c.demand[nd.path], nd.maxCap)
			continue
		}
		var sum Slots
		for _, ch := range nd.children {
			sum += tr.nodes[ch].eff
		}
		nd.eff = minSlots(nd.maxCap, sum)
	}
	lend := func(id int32) bool { return !c.noLend[tr.nodes[id].path] }
	return tr, computeLayeredTargets(tr, layeredInput{parentEnf: c.parents, policy: shareRatioDemand, own: own, lend: lend})
}

// shareRatioDemand is share_ratio with reclaim and balance.
var shareRatioDemand = divisionPolicy{shareRatio: true, preempt: true, balance: true}

// buildTreeUnchecked builds a tree without the ownership gate, which
// refuses ownership under every released version.
func buildTreeUnchecked(plan events.Plan) (*tree, error) {
	plan.Rules = int(RulesV3)
	return buildTree(plan, false)
}

func fmtLayered(tr *tree, lt layeredTargets) string {
	var b strings.Builder
	for _, l := range tr.sortedLeaves {
		fmt.Fprintf(&b, "%s=%d(own %d", tr.nodes[l].path, lt.target[l], lt.ownUse[l])
		for _, tk := range lt.takes {
			if tk.leaf != l {
				continue
			}
			pool := "public"
			if tk.pool != 0 {
				pool = tr.nodes[tk.pool].path
			}
			from := ""
			if tk.lender != noNode {
				from = " lent by " + tr.nodes[tk.lender].path
			}
			fmt.Fprintf(&b, ", %d from %s%s", tk.slots, pool, from)
		}
		b.WriteString(") ")
	}
	idle := Slots(0)
	for _, s := range lt.idle {
		idle += s.slots
	}
	fmt.Fprintf(&b, "idle %d", idle)
	return b.String()
}

func grace(d time.Duration) *events.Duration { return &events.Duration{Duration: d} }

// TestLayeredTargets works small pools by hand from
// docs/rules.md#layered-fold and #layer-division.
func TestLayeredTargets(t *testing.T) {
	two := twoOwners()
	tree3 := events.Plan{Consumers: []events.Consumer{
		{Path: "/D"}, {Path: "/D/x", LendGrace: grace(10 * time.Minute)}, {Path: "/D/y"},
		{Path: "/E"}, {Path: "/E/z", ReclaimGrace: grace(5 * time.Minute)}, {Path: "/E/w"},
	}}
	for _, tc := range []struct {
		name string
		c    layeredCase
		want string
	}{
		{
			// The spec's worked example (scenarios-ownership/own-lend-return):
			// A owns h1 (4), B owns h2 (4), h3 (4) is public.
			name: "spec example, B idle lends to A",
			c:    layeredCase{plan: two, parents: true, demand: map[string]Slots{"/A": 12}, owned: map[string]Slots{"/A": 4, "/B": 4}, public: 4},
			want: "/A=12(own 4, 4 from public, 4 from public lent by /B) /B=0(own 0) idle 0",
		},
		{
			name: "spec example, B takes its own back",
			c:    layeredCase{plan: two, parents: true, demand: map[string]Slots{"/A": 12, "/B": 4}, owned: map[string]Slots{"/A": 4, "/B": 4}, public: 4},
			want: "/A=8(own 4, 4 from public) /B=4(own 4) idle 0",
		},
		{
			name: "spec example, the public pool split 3:1",
			c:    layeredCase{plan: two, parents: true, demand: map[string]Slots{"/A": 12, "/B": 8}, owned: map[string]Slots{"/A": 4, "/B": 4}, public: 4},
			want: "/A=7(own 4, 3 from public) /B=5(own 4, 1 from public) idle 0",
		},
		{
			name: "lend: false keeps idle owned slots out of the pools",
			c: layeredCase{plan: two, parents: true, demand: map[string]Slots{"/A": 12}, owned: map[string]Slots{"/A": 4, "/B": 4}, public: 4,
				noLend: map[string]bool{"/B": true}},
			want: "/A=8(own 4, 4 from public) /B=0(own 0) idle 4",
		},
		{
			// D owns 6: x owns 2 (lend_grace 10m), 4 are D's private pool.
			// y's demand 9 takes D's private 4 first, then x's idle 2 (lent
			// into D's pool with x's 10m, which y's reclaim_grace 0 may
			// use), then 2 of the public pool.
			name: "private pool: a sibling's idle own slots first, inside the branch",
			c: layeredCase{plan: tree3, parents: true, demand: map[string]Slots{"/D/y": 9},
				owned: map[string]Slots{"/D": 6, "/D/x": 2}, public: 2},
			want: "/D/x=0(own 0) /D/y=8(own 0, 4 from /D, 2 from /D lent by /D/x, 2 from public) /E/w=0(own 0) /E/z=0(own 0) idle 0",
		},
		{
			// x lends 2 with grace 10m; D's pool has no taker, so they go up
			// to the public pool with grace min(10m, D's lend_grace 0) = 0:
			// z (reclaim_grace 5m) may not use them, w may.
			name: "grace: slots lent up through a parent carry the smallest lend_grace",
			c: layeredCase{plan: tree3, parents: true, demand: map[string]Slots{"/E/z": 9, "/E/w": 1},
				owned: map[string]Slots{"/D": 2, "/D/x": 2}, public: 4},
			want: "/D/x=0(own 0) /D/y=0(own 0) /E/w=1(own 0, 1 from public lent by /D/x) /E/z=4(own 0, 4 from public) idle 1",
		},
		{
			name: "no ownership: one public layer",
			c:    layeredCase{plan: tree3, parents: false, demand: map[string]Slots{"/D/x": 5, "/E/z": 5, "/E/w": 1}, public: 8},
			want: "/D/x=5(own 0, 5 from public) /D/y=0(own 0) /E/w=1(own 0, 1 from public) /E/z=2(own 0, 2 from public) idle 0",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, lt := tc.c.run(t)
			if got := fmtLayered(tr, lt); got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestLayeredTargetsWithoutOwnership: with no owner the layers are one
// public pool, and the targets must be the engine's share_ratio targets T
// exactly, on every event of random logs, under both enforcements.
func TestLayeredTargetsWithoutOwnership(t *testing.T) {
	runs := 300
	if testing.Short() {
		runs = 50
	}
	checked := 0
	for seed := range uint64(runs) {
		sc := gen.Generate(gen.NewRand(seed+7000), 40)
		pool := NewPool("layered")
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i, ev := range sc.Events {
			at = at.Add(time.Second)
			if _, err := pool.Apply(Event{Seq: uint64(i + 1), Time: at, Payload: ev}); err != nil {
				pool.Skip(uint64(i+1), at)
				continue
			}
			if !pool.hasPlan || !pool.mode.shareRatio || pool.mode.guaranteesOnly() {
				continue
			}
			n := len(pool.t.nodes)
			own := ownTotals{owned: make([]Slots, n), private: make([]Slots, n), public: pool.pub.capacity}
			lt := computeLayeredTargets(pool.t, layeredInput{parentEnf: pool.mode.parent, policy: shareRatioDemand, own: own, lend: func(int32) bool { return true }})
			for _, l := range pool.t.leaves {
				if got, want := lt.target[l], pool.sh(l).target; got != want {
					t.Fatalf("seed %d event %d: %s layered target %d, engine's T %d", seed, i, pool.t.nodes[l].path, got, want)
				}
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no share_ratio state was compared")
	}
	t.Logf("%d states compared", checked)
}

func ptr[T any](v T) *T { return &v }

// TestLayeredTargetsProperties checks the layered targets on random trees,
// demands and ownership totals: every slot is used once or idle, no leaf
// gets more than its E nor any consumer more than its max, lent slots go
// only to leaves whose reclaim_grace their lender allows, and no slot of
// the public pool is idle while a leaf with unmet demand and room could
// use it. The computation is deterministic: the same input, twice, gives
// the same outcome.
func TestLayeredTargetsProperties(t *testing.T) {
	runs := 2000
	if testing.Short() {
		runs = 200
	}
	var lentTakes, ownUses, idle int
	for seed := range uint64(runs) {
		r := gen.NewRand(seed + 91000)
		c, tr, lt := randomLayered(t, r)
		if msg := checkLayered(tr, c, lt); msg != "" {
			t.Fatalf("seed %d: %s\n%s", seed, msg, fmtLayered(tr, lt))
		}
		for _, tk := range lt.takes {
			if tk.lender != noNode {
				lentTakes++
			}
		}
		for _, u := range lt.ownUse {
			if u > 0 {
				ownUses++
			}
		}
		idle += len(lt.idle)
		_, lt2 := c.c.run(t)
		if fmtLayered(tr, lt) != fmtLayered(tr, lt2) {
			t.Fatalf("seed %d: two runs differ", seed)
		}
	}
	// The draw must reach what it is meant to check.
	if lentTakes < runs/10 || ownUses < runs/10 || idle < runs/10 {
		t.Fatalf("too few cases: %d lent takes, %d own uses, %d idle classes in %d runs", lentTakes, ownUses, idle, runs)
	}
	t.Logf("%d runs: %d lent takes, %d own uses, %d idle classes", runs, lentTakes, ownUses, idle)
}

type randomCase struct {
	c     layeredCase
	total Slots // public plus what top-level consumers own
}

// randomLayered draws a plan from the scenario generator, graces and lend
// flags, demands, and owned totals that nest: the children of a consumer
// own at most what it owns.
func randomLayered(t *testing.T, r *gen.Rand) (randomCase, *tree, layeredTargets) {
	sc := gen.Generate(r, 1)
	plan := sc.Events[0].(*events.PlanChange).Plan
	graces := []time.Duration{0, time.Minute, 5 * time.Minute}
	for i := range plan.Consumers {
		plan.Consumers[i].LendGrace = grace(graces[r.Intn(3)])
		plan.Consumers[i].ReclaimGrace = grace(graces[r.Intn(3)])
		plan.Consumers[i].Max = nil
		if r.Intn(4) == 0 {
			plan.Consumers[i].Max = &events.Max{Slots: int64(r.Intn(12))}
		}
	}
	tr, err := buildTreeUnchecked(plan)
	if err != nil {
		t.Fatal(err)
	}
	c := layeredCase{plan: plan, parents: r.Intn(2) == 0, demand: map[string]Slots{}, owned: map[string]Slots{},
		noLend: map[string]bool{}, public: Slots(r.Intn(10))}
	total := c.public
	var own func(id int32, budget Slots)
	own = func(id int32, budget Slots) {
		for _, ch := range tr.nodes[id].children {
			k := Slots(0)
			if budget > 0 && r.Intn(2) == 0 {
				k = Slots(r.Intn(int(budget) + 1))
			}
			if id == 0 {
				k = Slots(r.Intn(8))
				total += k
			} else {
				budget -= k
			}
			c.owned[tr.nodes[ch].path] = k
			own(ch, k)
		}
	}
	own(0, 0)
	for id := 1; id < len(tr.nodes); id++ {
		n := &tr.nodes[id]
		c.noLend[n.path] = r.Intn(5) == 0
		if n.leaf && r.Intn(3) > 0 {
			c.demand[n.path] = Slots(r.Intn(15))
		}
	}
	rc := randomCase{c: c, total: total}
	tr2, lt := c.run(t)
	return rc, tr2, lt
}

func checkLayered(tr *tree, rc randomCase, lt layeredTargets) string {
	used := Slots(0)
	for _, l := range tr.leaves {
		used += lt.target[l]
		if lt.target[l] > tr.nodes[l].eff {
			return fmt.Sprintf("%s target %d above E %d", tr.nodes[l].path, lt.target[l], tr.nodes[l].eff)
		}
	}
	for id := range tr.nodes {
		if n := &tr.nodes[id]; !n.leaf && id > 0 && lt.target[id] > n.maxCap {
			return fmt.Sprintf("%s target %d above max %d", n.path, lt.target[id], n.maxCap)
		}
	}
	idle := Slots(0)
	publicIdle := false
	for _, s := range lt.idle {
		idle += s.slots
		publicIdle = publicIdle || (s.lender == noNode && s.slots > 0)
	}
	if used+idle != rc.total {
		return fmt.Sprintf("%d used + %d idle != %d slots", used, idle, rc.total)
	}
	for _, tk := range lt.takes {
		if tk.lender == noNode {
			continue
		}
		if lg, rg := tr.nodes[tk.lender].lendGrace, tr.nodes[tk.leaf].reclaimGrace; rg > lg {
			return fmt.Sprintf("%s (reclaim_grace %v) uses %d slots lent by %s (lend_grace %v)", tr.nodes[tk.leaf].path, rg, tk.slots, tr.nodes[tk.lender].path, lg)
		}
	}
	if publicIdle {
		for _, l := range tr.leaves {
			if lt.target[l] < tr.nodes[l].eff && layeredRoom(tr, lt, l) > 0 {
				return fmt.Sprintf("public slots idle while %s has %d of E %d and room", tr.nodes[l].path, lt.target[l], tr.nodes[l].eff)
			}
		}
	}
	return ""
}

// layeredRoom is what a leaf could still be given under its ancestors'
// max, given every consumer's target.
func layeredRoom(tr *tree, lt layeredTargets, l int32) Slots {
	room := Unlimited
	for a := tr.nodes[l].parent; a > 0; a = tr.nodes[a].parent {
		if m := tr.nodes[a].maxCap; m != Unlimited {
			room = minSlots(room, m-lt.target[a])
		}
	}
	return room
}

// twoOwners is the plan of the spec's worked example: A share 3, B share
// 1 with a lend_grace of 5 minutes.
func twoOwners() events.Plan {
	return events.Plan{Consumers: []events.Consumer{{Path: "/A", Share: ptr[int64](3)}, {Path: "/B", Share: ptr[int64](1), LendGrace: grace(5 * time.Minute)}}}
}
