package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

// SnapshotFormat is the version of the snapshot encoding that Snapshot
// writes. Restore reads every format down to 1; a new format gets a new
// number and keeps the old readers.
//
//   - 1: plan, hosts, leaves (demand, waiting-since, holdings).
//   - 2: adds rules_since, the sequence from which the pool's rules
//     version holds (the version itself is the plan's). A format-1
//     snapshot restores with rules_since 0.
//   - 3: adds own, the ownership assignment (rules v3). Only a pool that
//     holds an assignment writes format 3; every other pool still writes
//     format 2, byte for byte as before, so no stored snapshot or state
//     hash changes meaning.
const SnapshotFormat = 3

// snapshotFormatWithoutOwnership is the format of a pool without an
// ownership assignment, and the format number its state hash digests.
const snapshotFormatWithoutOwnership = 2

// snapshot holds a pool's inputs and allocations; everything derived (P,
// E, G, T, queues) is recomputed on restore, by the same code as the fold.
type snapshot struct {
	Format  int       `json:"format"`
	Pool    string    `json:"pool"`
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	HasPlan bool      `json:"has_plan"`
	// RulesSince: format 2 and later.
	RulesSince uint64       `json:"rules_since,omitempty"`
	Plan       *events.Plan `json:"plan,omitempty"`
	Hosts      []snapHost   `json:"hosts"`
	Leaves     []snapLeaf   `json:"leaves"`
	// Own: format 3 and later.
	Own []snapOwn `json:"own,omitempty"`
}

// snapOwn is one row of the ownership assignment.
type snapOwn struct {
	Consumer string `json:"consumer"`
	Host     string `json:"host"`
	Slots    int64  `json:"slots"`
}

type snapHost struct {
	Name  string `json:"name"`
	Group string `json:"group"`
	Slots int64  `json:"slots"`
	Up    bool   `json:"up"`
}

type snapLeaf struct {
	Path         string        `json:"path"`
	Demand       int64         `json:"demand"`
	WaitingSince uint64        `json:"waiting_since"`
	Holdings     []snapHolding `json:"holdings,omitempty"`
}

type snapHolding struct {
	Host  string `json:"host"`
	Slots int64  `json:"slots"`
}

// Snapshot encodes the pool's state. The encoding is canonical: equal
// states give equal bytes.
func (p *Pool) Snapshot() []byte {
	s := snapshot{Format: snapshotFormatWithoutOwnership, Pool: p.name, Seq: p.seq, Time: p.now.UTC(), HasPlan: p.hasPlan, RulesSince: p.rulesSince, Hosts: []snapHost{}, Leaves: []snapLeaf{}}
	if p.hasPlan {
		plan := p.plan
		s.Plan = &plan
	}
	for _, h := range p.hosts {
		s.Hosts = append(s.Hosts, snapHost{h.name, h.group, int64(h.slots), h.up})
	}
	for _, id := range p.leavesByPath() {
		n := &p.t.nodes[id]
		l := snapLeaf{Path: n.path, Demand: int64(n.demand), WaitingSince: n.waitingSince}
		for _, h := range n.holdings {
			l.Holdings = append(l.Holdings, snapHolding{p.hosts[h.host].name, int64(h.slots)})
		}
		s.Leaves = append(s.Leaves, l)
	}
	for _, o := range p.own {
		s.Format = SnapshotFormat
		s.Own = append(s.Own, snapOwn{o.consumer, o.host, int64(o.slots)})
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("domain: snapshot encoding cannot fail: %v", err))
	}
	return b
}

// Restore rebuilds a pool from a snapshot, with the options of NewPool: a
// snapshot whose plan names the rules version in development restores only
// WithDevelopmentRules, so a projector without it stops there as it stops
// on such a plan in the log.
func Restore(b []byte, opts ...PoolOption) (*Pool, error) {
	var s snapshot
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	if s.Format < 1 || s.Format > SnapshotFormat {
		return nil, fmt.Errorf("snapshot format %d: this build reads formats 1 to %d", s.Format, SnapshotFormat)
	}
	p := NewPool(s.Pool, opts...)
	p.seq, p.now = s.Seq, s.Time
	for _, o := range s.Own {
		p.own = append(p.own, ownSlot{o.Consumer, o.Host, Slots(o.Slots)})
	}
	for _, h := range s.Hosts {
		p.hostByID[h.Name] = int32(len(p.hosts))
		p.hosts = append(p.hosts, host{name: h.Name, group: h.Group, slots: Slots(h.Slots), up: h.Up})
		if h.Up {
			p.pub.capacity += Slots(h.Slots)
		}
	}
	if !s.HasPlan {
		p.recomputeAll()
		return p, nil
	}
	t, err := buildTree(*s.Plan, p.development)
	if err != nil {
		return nil, fmt.Errorf("snapshot plan: %w", err)
	}
	p.t, p.plan, p.hasPlan = t, *s.Plan, true
	p.useShares(make([]shares, len(t.nodes)))
	p.planDigest = digestPlan(true, p.plan)
	p.setPolicy(*s.Plan)
	p.rulesSince = s.RulesSince
	type wait struct {
		id int32
		ws uint64
	}
	var waiting []wait
	for _, l := range s.Leaves {
		id, ok := t.lookup(l.Path)
		if !ok || !t.nodes[id].leaf {
			return nil, fmt.Errorf("snapshot leaf %s is not a leaf of its plan", l.Path)
		}
		n := &t.nodes[id]
		n.demand = Slots(l.Demand)
		waiting = append(waiting, wait{id, l.WaitingSince})
		for _, h := range l.Holdings {
			hid, ok := p.hostByID[h.Host]
			if !ok {
				return nil, fmt.Errorf("snapshot leaf %s holds slots on unknown host %s", l.Path, h.Host)
			}
			n.holdings = append(n.holdings, holding{hid, Slots(h.Slots)})
			n.alloc += Slots(h.Slots)
			p.hosts[hid].used += Slots(h.Slots)
		}
	}
	sumUp(t)
	p.recomputeAll()
	for _, w := range waiting {
		t.nodes[w.id].waitingSince = w.ws
	}
	p.updateTargets()
	p.begin(Event{Seq: p.seq, Time: p.now})
	return p, nil
}

// Clone returns an independent copy of the pool: it folds every event
// exactly as the pool would, and nothing done to one reaches the other.
//
// It is Restore(p.Snapshot()) without the encoding: the same steps in the
// same order from the pool's own state instead of a decoded snapshot, so
// a clone is what a restored pool is (every derived figure, queue and
// cache computed afresh by the fold's own code). What a snapshot would
// rebuild from the plan (the tree's structure, the plan's digest) is
// copied instead, since it is a function of the plan alone; the plan and
// the structural slices of the tree, which nothing changes once a plan is
// folded (a new plan builds a new tree), are shared.
func (p *Pool) Clone() *Pool {
	c := NewPool(p.name, p.options()...)
	c.seq, c.now = p.seq, p.now.UTC()
	if len(p.own) > 0 {
		c.own = slices.Clone(p.own)
	}
	c.hosts = make([]host, len(p.hosts))
	c.hostByID = maps.Clone(p.hostByID)
	for i, h := range p.hosts {
		c.hosts[i] = host{name: h.name, group: h.group, slots: h.slots, up: h.up}
		if h.up {
			c.pub.capacity += h.slots
		}
	}
	if !p.hasPlan {
		c.recomputeAll()
		return c
	}
	t := p.t.cloneStructure()
	c.t, c.plan, c.hasPlan = t, p.plan, true
	c.useShares(make([]shares, len(t.nodes)))
	c.planDigest = p.planDigest
	c.setPolicy(p.plan)
	c.rulesSince = p.rulesSince
	// The leaves' inputs, as Restore sets them from a snapshot's leaves:
	// the holdings in one backing array, each leaf's part capped so that
	// an append moves it out rather than over its neighbour's.
	total := 0
	for _, id := range p.leavesByPath() {
		total += len(p.t.nodes[id].holdings)
	}
	backing := make([]holding, 0, total)
	for _, id := range p.leavesByPath() {
		from, to := &p.t.nodes[id], &t.nodes[id]
		to.demand = from.demand
		start := len(backing)
		backing = append(backing, from.holdings...)
		if len(from.holdings) > 0 {
			to.holdings = backing[start:len(backing):len(backing)]
		}
		for _, h := range from.holdings {
			to.alloc += h.slots
			c.hosts[h.host].used += h.slots
		}
	}
	sumUp(t)
	c.recomputeAll()
	for _, id := range p.leavesByPath() {
		t.nodes[id].waitingSince = p.t.nodes[id].waitingSince
	}
	c.updateTargets()
	c.begin(Event{Seq: c.seq, Time: c.now})
	return c
}

// cloneStructure copies what buildTree made of the plan, as buildTree
// leaves it: every figure the fold keeps starts at zero.
func (t *tree) cloneStructure() *tree {
	c := &tree{nodes: slices.Clone(t.nodes), leaves: t.leaves, sortedLeaves: t.sortedLeaves, tops: t.tops,
		byPath: t.byPath, hasMax: t.hasMax, hasPins: t.hasPins, maxDepth: t.maxDepth}
	for i := range c.nodes {
		n := &c.nodes[i]
		n.maxCap, n.capChain = 0, 0
		n.demand, n.eff, n.childEff, n.alloc, n.touchedAt = 0, 0, 0, 0, 0
		n.leafState = leafState{}
	}
	return c
}

// sumUp sets every parent's demand and allocation to the sum of its
// children's (ids are in path order, so children come after parents).
func sumUp(t *tree) {
	for id := len(t.nodes) - 1; id > 0; id-- {
		n := &t.nodes[id]
		pa := &t.nodes[n.parent]
		pa.demand += n.demand
		pa.alloc += n.alloc
	}
}
