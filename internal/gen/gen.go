package gen

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

// Source supplies choices: a number in [0, n).
type Source interface{ Intn(n int) int }

// Rand is a Source backed by a seeded PCG generator.
type Rand struct{ r *rand.Rand }

// NewRand returns a Source seeded with seed.
func NewRand(seed uint64) *Rand { return &Rand{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))} }

// Intn returns a number in [0, n).
func (r *Rand) Intn(n int) int { return r.r.IntN(n) }

// Bytes is a Source that reads the fuzzer's input; it answers 0 once the
// input is used up, so every input is a valid, finite scenario.
type Bytes struct {
	b []byte
	i int
}

// NewBytes returns a Source over b.
func NewBytes(b []byte) *Bytes { return &Bytes{b: b} }

// Intn returns a number in [0, n).
func (s *Bytes) Intn(n int) int {
	if s.i >= len(s.b) || n <= 1 {
		return 0
	}
	v := int(s.b[s.i])
	s.i++
	if n > 256 && s.i < len(s.b) {
		v = v<<8 | int(s.b[s.i])
		s.i++
	}
	return v % n
}

// Scenario is a generated plan, hosts and events, in order.
type Scenario struct {
	Leaves []string
	Parent []string
	Events []events.Payload
}

// Generate makes a scenario of about n events after the plan and hosts.
func Generate(src Source, n int) Scenario {
	return (&generator{src: src}).scenario(1, n)
}

type generator struct {
	src     Source
	leaves  []string
	parents []string
	hosts   []string
	tree    []events.Consumer
	owned   bool // draw ownership (GenerateOwned)
	yarn    bool // draw rules 4's fields (GenerateYARN)
}

// GenerateOwned is Generate with ownership (docs/rules.md#ownership): plans
// name rules version 3 and draw own entries (whole hosts, parts of hosts,
// slots of a group, preferences), lend, lend_grace, reclaim_grace and
// reclaim_for_preference; hosts come in two groups. Generate's own draws are
// untouched, so its seeds keep their scenarios.
func GenerateOwned(src Source, n int) Scenario {
	return (&generator{src: src, owned: true}).scenario(2, n)
}

// GenerateYARN is Generate with rules version 4's plan fields (yarn.go):
// plans name rules 4 and draw priority_bands, preemptable (true or false,
// inherited) and zero shares, mostly where version 4 allows them, now and
// then where it refuses them. Generate's own draws are untouched.
func GenerateYARN(src Source, n int) Scenario {
	return (&generator{src: src, yarn: true}).scenario(1, n)
}

// scenario draws a plan, minHosts to minHosts+3 hosts, then n events.
func (g *generator) scenario(minHosts, n int) Scenario {
	plan := g.plan()
	sc := Scenario{Leaves: g.leaves, Parent: g.parents}
	sc.Events = append(sc.Events, &events.PlanChange{Plan: plan})
	for i := 0; i < minHosts+g.src.Intn(4); i++ {
		sc.Events = append(sc.Events, g.hostUp())
	}
	for i := 0; i < n; i++ {
		sc.Events = append(sc.Events, g.event())
	}
	return sc
}

func (g *generator) pick(xs []string) string { return xs[g.src.Intn(len(xs))] }

func (g *generator) plan() events.Plan {
	g.leaves, g.parents, g.tree = nil, nil, nil
	g.subtree("", 1+g.src.Intn(3))
	return g.withYARN(g.withOwnership(events.Plan{Policy: g.policy(), Consumers: g.tree}))
}

// withOwnership draws ownership into a plan when the generator is owned.
// Entries mostly respect the ownership validation (docs/rules.md#ownership:
// a child owns a part of what its parent owns); now and then they do not,
// and the plan is refused.
func (g *generator) withOwnership(p events.Plan) events.Plan {
	if !g.owned {
		return p
	}
	p.Rules = 3
	if g.src.Intn(4) == 0 {
		yes := true
		p.Policy.ReclaimForPreference = &yes
	}
	graces := []time.Duration{0, time.Minute, 5 * time.Minute}
	byPath := map[string]int{}
	for i := range p.Consumers {
		c := &p.Consumers[i]
		byPath[c.Path] = i
		if g.src.Intn(3) == 0 {
			c.LendGrace = &events.Duration{Duration: graces[g.src.Intn(3)]}
		}
		if g.src.Intn(3) == 0 {
			c.ReclaimGrace = &events.Duration{Duration: graces[g.src.Intn(3)]}
		}
		if g.src.Intn(6) == 0 {
			no := false
			c.Lend = &no
		}
		parent := c.Path[:strings.LastIndex(c.Path, "/")]
		if parent == "" {
			if g.src.Intn(2) == 0 {
				c.Own = g.ownEntries(nil)
			}
			continue
		}
		if pi, ok := byPath[parent]; ok && len(p.Consumers[pi].Own) > 0 && g.src.Intn(2) == 0 {
			c.Own = g.ownEntries(p.Consumers[pi].Own)
		}
	}
	return p
}

// ownEntries draws one or two entries: anything for a top-level consumer,
// a part of one of its parent's entries for a child.
func (g *generator) ownEntries(parent []events.OwnEntry) []events.OwnEntry {
	var out []events.OwnEntry
	for i := 0; i < 1+g.src.Intn(2); i++ {
		e := events.OwnEntry{}
		if g.src.Intn(3) == 0 {
			pref := int64(1 + g.src.Intn(10))
			e.Preference = &pref
		}
		slots := int64(1 + g.src.Intn(4))
		switch {
		case parent != nil:
			pe := parent[g.src.Intn(len(parent))]
			e.Host, e.Group = pe.Host, pe.Group
			if pe.Slots != nil {
				slots = max(1, *pe.Slots/2)
			}
			e.Slots = &slots
		case g.src.Intn(3) == 0:
			e.Group, e.Slots = fmt.Sprintf("g%d", 1+g.src.Intn(2)), &slots
		default:
			e.Host = fmt.Sprintf("h%d", 1+g.src.Intn(5))
			if g.src.Intn(2) == 0 {
				e.Slots = &slots
			}
		}
		if slices.ContainsFunc(out, func(o events.OwnEntry) bool { return o.Host != "" && o.Host == e.Host }) {
			continue
		}
		out = append(out, e)
	}
	return out
}

func (g *generator) policy() events.Policy {
	p := events.Policy{Reclaim: events.ReclaimPriority, Enforcement: events.EnforcementLeaf}
	if g.src.Intn(2) == 1 {
		p.Reclaim = events.ReclaimShareRatio
		if g.src.Intn(3) == 0 {
			off := false
			p.Balance = &off
		}
	}
	if g.src.Intn(2) == 1 {
		p.Enforcement = events.EnforcementParent
	}
	if g.src.Intn(4) == 0 {
		off := false
		p.Preemption = &off
	}
	return p
}

// subtree adds 1..4 children under prefix; depth levels remain.
func (g *generator) subtree(prefix string, depth int) {
	names := []string{"a", "b", "c", "d"}
	for i := 0; i < 1+g.src.Intn(4); i++ {
		path := prefix + "/" + names[i]
		g.tree = append(g.tree, g.consumer(path))
		if depth > 1 && g.src.Intn(3) > 0 {
			g.parents = append(g.parents, path)
			g.subtree(path, depth-1)
			continue
		}
		g.leaves = append(g.leaves, path)
	}
}

func (g *generator) consumer(path string) events.Consumer {
	share := int64(1 + g.src.Intn(5))
	c := events.Consumer{Path: path, Share: &share, Priority: int64(g.src.Intn(4))}
	switch g.src.Intn(6) {
	case 0:
		c.Max = &events.Max{Slots: int64(g.src.Intn(20))}
	case 1:
		c.Max = &events.Max{Percent: int64(10 + g.src.Intn(91)), IsPercent: true}
	}
	if g.src.Intn(5) == 0 {
		bl := int64(g.src.Intn(6))
		c.BorrowLimit = &bl
	}
	return c
}

func (g *generator) hostUp() *events.HostUp {
	name := fmt.Sprintf("h%d", len(g.hosts)+1)
	if len(g.hosts) > 0 && g.src.Intn(3) == 0 {
		name = g.pick(g.hosts) // may be up already (refused) or coming back
	} else {
		g.hosts = append(g.hosts, name)
	}
	up := &events.HostUp{Host: name, Slots: int64(1 + g.src.Intn(12))}
	if g.owned {
		var k int
		fmt.Sscanf(name, "h%d", &k)
		up.Group = fmt.Sprintf("g%d", 1+k%2)
	}
	return up
}

func (g *generator) event() events.Payload {
	switch r := g.src.Intn(20); {
	case r < 11:
		return g.demand()
	case r < 14:
		return &events.Release{Consumer: g.pick(g.leaves), Slots: int64(1 + g.src.Intn(5))}
	case r < 16:
		return g.hostUp()
	case r < 17:
		return &events.HostDown{Host: g.pick(g.hosts)}
	case r < 18:
		return g.replan()
	default:
		return g.invalid()
	}
}

func (g *generator) demand() *events.Demand {
	d := &events.Demand{Demands: map[string]int64{}}
	for i := 0; i < 1+g.src.Intn(3); i++ {
		d.Demands[g.pick(g.leaves)] = int64(g.src.Intn(25))
	}
	return d
}

// replan keeps the tree's shape half the time (changing policy and
// attributes), and otherwise draws a new tree.
func (g *generator) replan() *events.PlanChange {
	if g.src.Intn(2) == 0 {
		cs := make([]events.Consumer, len(g.tree))
		for i, c := range g.tree {
			cs[i] = g.consumer(c.Path)
		}
		g.tree = cs
		return &events.PlanChange{Plan: g.withYARN(g.withOwnership(events.Plan{Policy: g.policy(), Consumers: cs}))}
	}
	return &events.PlanChange{Plan: g.plan()}
}

func (g *generator) invalid() events.Payload {
	switch g.src.Intn(5) {
	case 0:
		return &events.Demand{Demands: map[string]int64{"/nope": 1}}
	case 1:
		if len(g.parents) > 0 {
			return &events.Demand{Demands: map[string]int64{g.pick(g.parents): 1}}
		}
		return &events.Demand{Demands: map[string]int64{g.pick(g.leaves): -1}}
	case 2:
		return &events.Release{Consumer: g.pick(g.leaves), Slots: 1000}
	case 3:
		return &events.HostDown{Host: "ghost"}
	default:
		zero := int64(0)
		return &events.PlanChange{Plan: events.Plan{Consumers: []events.Consumer{{Path: "/x", Share: &zero}}}}
	}
}

// UnderRules returns the scenario with every plan naming rules version v
// (0 leaves plans as generated: no version, which a stored log reads as 1).
func (sc Scenario) UnderRules(v int) Scenario {
	out := sc
	out.Events = make([]events.Payload, len(sc.Events))
	for i, p := range sc.Events {
		if pc, ok := p.(*events.PlanChange); ok {
			stamped := *pc
			stamped.Plan.Rules = v
			p = &stamped
		}
		out.Events[i] = p
	}
	return out
}
