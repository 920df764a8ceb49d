package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	p.pub.sh = make([]shares, len(t.nodes))
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

// Clone returns an independent copy of the pool.
func (p *Pool) Clone() *Pool {
	c, err := Restore(p.Snapshot(), p.options()...)
	if err != nil {
		panic(fmt.Sprintf("domain: a snapshot of a live pool must restore: %v", err))
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
