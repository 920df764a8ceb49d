package domain

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cluster-ledger/ledger/events"
)

// ConsumerView is the reportable state of one consumer after an event.
// For a parent, Demand and Allocated are sums over its leaves.
type ConsumerView struct {
	Path         string `json:"path"`
	Parent       string `json:"parent"`
	Leaf         bool   `json:"leaf"`
	Share        int64  `json:"share"`
	Priority     int64  `json:"priority"`
	Max          string `json:"max,omitempty"`
	MaxSlots     *int64 `json:"max_slots,omitempty"` // max resolved to slots
	Demand       int64  `json:"demand"`
	Effective    int64  `json:"effective"`
	Planned      int64  `json:"planned"`
	Target       int64  `json:"target"`
	Allocated    int64  `json:"allocated"`
	Borrowed     int64  `json:"borrowed"`
	WaitingSince uint64 `json:"waiting_since,omitempty"`

	// Ownership (rules v3), zero in a pool whose plan names none.
	// Owned is the slots assigned to the consumer; OwnUsed those of them
	// its own subtree holds; LentOut those held outside its subtree.
	Owned   int64 `json:"owned,omitempty"`
	OwnUsed int64 `json:"own_used,omitempty"`
	LentOut int64 `json:"lent_out,omitempty"`
	// Sources says where a leaf's slots come from, one row per pool and
	// lender (see Source); nil without ownership.
	Sources []Source `json:"sources,omitempty"`
}

// Source is a number of slots a leaf holds from one layer: its own
// (Pool "own"), a private pool (Pool = the parent whose pool it is), or
// the public pool (Pool "/"). Lender names the owner of slots lent into
// that pool (a consumer outside the leaf's branch), empty for the pool's
// own slots.
type Source struct {
	Pool   string `json:"pool"`
	Lender string `json:"lender,omitempty"`
	Slots  int64  `json:"slots"`
}

// SourceOwn is the Pool of a leaf's own slots.
const SourceOwn = "own"

// OwnedSlots is one row of the ownership assignment: consumer owns slots
// of host.
type OwnedSlots struct {
	Consumer string `json:"consumer"`
	Host     string `json:"host"`
	Slots    int64  `json:"slots"`
}

// HostView is one host and how many of its slots are allocated.
type HostView struct {
	Name      string `json:"name"`
	Group     string `json:"group"`
	Slots     int64  `json:"slots"`
	Up        bool   `json:"up"`
	Allocated int64  `json:"allocated"`
}

// Allocation is how many slots a leaf holds on a host.
type Allocation struct {
	Consumer string `json:"consumer"`
	Host     string `json:"host"`
	Slots    int64  `json:"slots"`
}

// Policy returns the pool's effective policy.
func (p *Pool) Policy() Policy { return p.policy }

// Consumers returns every consumer in path order (the root excluded).
func (p *Pool) Consumers() []ConsumerView {
	out := make([]ConsumerView, 0, len(p.t.nodes)-1)
	of := p.ownFigures()
	for id := 1; id < len(p.t.nodes); id++ {
		out = append(out, p.view(int32(id), of.of(int32(id))))
	}
	return out
}

// Consumer returns one consumer's view. Its ownership figures come from
// the sittings of the hosts it holds or owns slots on only, so it costs
// what that consumer touches, not the pool's size.
func (p *Pool) Consumer(path string) (ConsumerView, bool) {
	id, ok := p.t.lookup(path)
	if !ok || id == 0 {
		return ConsumerView{}, false
	}
	return p.view(id, p.ownFiguresOf(id)), true
}

func (p *Pool) view(id int32, of *ownView) ConsumerView {
	n, s := &p.t.nodes[id], p.sh(id)
	v := ConsumerView{
		Path: n.path, Parent: p.t.nodes[n.parent].path, Leaf: n.leaf, Share: n.share, Priority: n.priority,
		Demand: int64(n.demand), Effective: int64(n.eff), Planned: int64(p.planned(id)), Target: int64(s.target),
		Allocated: int64(n.alloc), Borrowed: int64(maxSlots(0, n.alloc-p.planned(id))),
	}
	if n.max != nil {
		v.Max = n.max.String()
		limit := int64(n.maxCap)
		v.MaxSlots = &limit
	}
	if n.leaf && n.eff > n.alloc {
		v.WaitingSince = n.waitingSince
	}
	if of != nil {
		v.Owned, v.OwnUsed, v.LentOut = int64(of.owned), int64(of.used), int64(of.lent)
		if n.leaf {
			v.Sources = of.sources
			if v.Sources == nil {
				v.Sources = []Source{}
			}
		}
	}
	return v
}

// Ownership returns the ownership assignment, by consumer path then host
// name; nil in a pool without ownership.
func (p *Pool) Ownership() []OwnedSlots {
	var out []OwnedSlots
	for _, o := range p.own {
		out = append(out, OwnedSlots{Consumer: o.consumer, Host: o.host, Slots: int64(o.slots)})
	}
	return out
}

// Hosts returns every host, up or down, in name order.
func (p *Pool) Hosts() []HostView {
	out := make([]HostView, 0, len(p.hosts))
	for _, h := range p.hosts {
		out = append(out, HostView{Name: h.name, Group: h.group, Slots: int64(h.slots), Up: h.up, Allocated: int64(h.used)})
	}
	slices.SortFunc(out, func(a, b HostView) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Allocations returns every non-zero holding, by consumer path then host name.
func (p *Pool) Allocations() []Allocation {
	var out []Allocation
	for _, id := range p.leavesByPath() {
		n := &p.t.nodes[id]
		for _, h := range n.holdings {
			out = append(out, Allocation{Consumer: n.path, Host: p.hosts[h.host].name, Slots: int64(h.slots)})
		}
	}
	slices.SortStableFunc(out, func(a, b Allocation) int {
		if c := strings.Compare(a.Consumer, b.Consumer); c != 0 {
			return c
		}
		return strings.Compare(a.Host, b.Host)
	})
	return out
}

// Held returns how many slots leaf consumer holds on host (0 when either
// is unknown).
func (p *Pool) Held(consumer, host string) int64 {
	id, ok := p.t.lookup(consumer)
	hid, hok := p.hostByID[host]
	if !ok || !hok {
		return 0
	}
	return int64(p.held(id, hid))
}

// RulesSince is the sequence of the plan from which the pool's rules
// version holds (0 before the first plan, and for a pool restored from a
// format-1 snapshot, which did not record it).
func (p *Pool) RulesSince() uint64 { return p.rulesSince }

// Plan returns a copy of the plan in force, as the pool was given it (ok
// is false before the first plan). The copy is the caller's: changing it
// changes nothing in the pool.
func (p *Pool) Plan() (plan events.Plan, ok bool) {
	if !p.hasPlan {
		return events.Plan{}, false
	}
	b, err := json.Marshal(p.plan)
	if err == nil {
		err = json.Unmarshal(b, &plan)
	}
	if err != nil {
		panic(fmt.Sprintf("domain: a plan the engine accepted must round-trip: %v", err))
	}
	return plan, true
}
