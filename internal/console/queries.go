package console

// What the console reads of the projection, through projections/query,
// put in the console's shapes.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/projections/query"
)

// planDoc is the part of a plan event the console shows.
type planDoc struct {
	Rules     *int   `json:"rules"`
	Policy    Policy `json:"policy"`
	Consumers []struct {
		Path     string          `json:"path"`
		Share    *int64          `json:"share"`
		Priority int64           `json:"priority"`
		Max      json.RawMessage `json:"max"`
	} `json:"consumers"`
}

func decodePlan(raw []byte) (*planDoc, error) {
	if raw == nil {
		return nil, nil
	}
	var p planDoc
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("stored plan: %w", err)
	}
	return &p, nil
}

func readSummaries(ctx context.Context, q query.Querier, pools ...string) ([]PoolSummary, []*planDoc, error) {
	rows, err := query.PoolSummaries(ctx, q, pools...)
	if err != nil {
		return nil, nil, err
	}
	out := make([]PoolSummary, 0, len(rows))
	plans := make([]*planDoc, 0, len(rows))
	for _, r := range rows {
		s := PoolSummary{Pool: r.Pool, Seq: r.Seq, FirstSeq: r.FirstSeq, Time: r.Time, LastType: r.LastType,
			Capacity: r.Capacity, HostsUp: r.HostsUp, HostsDown: r.HostsDown, Consumers: r.Consumers, Leaves: r.Leaves,
			Allocated: r.Allocated, Demand: r.Demand}
		if r.Rules != 0 {
			v := r.Rules
			s.RulesVersion, s.RulesSince = &v, r.RulesSince
		}
		p, err := decodePlan(r.Plan)
		if err != nil {
			return nil, nil, fmt.Errorf("pool %s: %w", s.Pool, err)
		}
		out = append(out, s)
		plans = append(plans, p)
	}
	return out, plans, nil
}

// errNoPool: the projection knows nothing of the pool.
var errNoPool = errors.New("no such pool in the projection")

// readPool reads a pool's state now (call it inside one snapshot).
func readPool(ctx context.Context, q query.Querier, pool string) (*PoolResponse, error) {
	sums, plans, err := readSummaries(ctx, q, pool)
	if err != nil {
		return nil, err
	}
	if len(sums) == 0 {
		return nil, errNoPool
	}
	res := &PoolResponse{PoolSummary: sums[0], Consumers: []Consumer{}, Hosts: []Host{}}
	if plans[0] != nil {
		res.Policy = plans[0].Policy
	}
	consumers, err := query.PlanConsumers(ctx, q, pool)
	if err != nil {
		return nil, err
	}
	for _, pc := range consumers {
		share, prio := pc.Share, pc.Priority
		res.Consumers = append(res.Consumers, Consumer{Path: pc.Path, Parent: pc.Parent, Leaf: pc.Leaf, Share: &share, Priority: &prio,
			Max: pc.Max, Demand: pc.Demand, Allocated: pc.Allocated, Effective: pc.Effective, Planned: pc.Planned,
			Target: pc.Target, Borrowed: pc.Borrowed, WaitingSince: pc.WaitingSince})
	}
	hosts, err := query.Hosts(ctx, q, pool)
	if err != nil {
		return nil, err
	}
	for _, h := range hosts {
		res.Hosts = append(res.Hosts, Host{Name: h.Name, Group: h.Group, Slots: h.Slots, Up: h.Up, Allocated: h.Allocated, Holders: []Holder{}})
	}
	holders, err := query.HoldersByHost(ctx, q, pool)
	if err != nil {
		return nil, err
	}
	attachHolders(holders, res.Hosts)
	owners, err := query.OwnersByHost(ctx, q, pool)
	if err != nil {
		return nil, err
	}
	attachOwners(owners, res.Hosts)
	return res, nil
}

// attachOwners adds ownership rows, ordered by host, to hosts ordered by
// name.
func attachOwners(owners []query.Owned, hosts []Host) {
	for _, o := range owners {
		if i, ok := slices.BinarySearchFunc(hosts, o.Host, func(x Host, n string) int { return strings.Compare(x.Name, n) }); ok {
			hosts[i].Owners = append(hosts[i].Owners, Holder{Consumer: o.Consumer, Slots: o.Slots})
		}
	}
}

// attachHolders adds holdings, ordered by host, to hosts ordered by name.
func attachHolders(holders []query.HostAllocation, hosts []Host) {
	for _, a := range holders {
		if i, ok := slices.BinarySearchFunc(hosts, a.Host, func(x Host, n string) int { return strings.Compare(x.Name, n) }); ok {
			hosts[i].Holders = append(hosts[i].Holders, Holder{Consumer: a.Consumer, Slots: a.Slots})
		}
	}
}

// resolveSeq is the pool's last event at or before seq (or, with a
// non-zero at, at or before that time); 0 when there is none.
func resolveSeq(ctx context.Context, q query.Querier, pool string, seq uint64, at time.Time) (uint64, error) {
	if !at.IsZero() {
		return query.LastSeqAtTime(ctx, q, pool, at)
	}
	return query.LastSeqAtOrBefore(ctx, q, pool, seq)
}

// readEventAt starts the answer of an as-of: the pool's event at seq and
// its neighbours, from the projection's copy of the log. The state comes
// from the engine (stateOf).
func readEventAt(ctx context.Context, q query.Querier, pool string, seq uint64) (*AsOfResponse, error) {
	res := &AsOfResponse{Pool: pool, Seq: seq, Consumers: []Consumer{}, Hosts: []Host{}}
	b, err := query.EventsAround(ctx, q, pool, seq)
	if err != nil {
		return nil, err
	}
	if b.Last == 0 {
		return nil, errNoPool
	}
	res.First, res.Last, res.Prev, res.Next = b.First, b.Last, b.Prev, b.Next
	if seq == 0 {
		return res, nil
	}
	k := query.Key{Pool: pool, Seq: seq}
	evs, err := query.EventsAt(ctx, q, []query.Key{k})
	if err != nil {
		return nil, err
	}
	e, ok := evs[k]
	if !ok {
		return nil, fmt.Errorf("event %d: not in the projection", seq)
	}
	ev := Event{Seq: seq, Type: e.Type, Time: e.Time, Producer: e.Producer, Data: json.RawMessage(e.Data)}
	if e.Refused != nil {
		ev.Refused = *e.Refused
	}
	res.Event = &ev
	return res, nil
}

// stateOf fills an as-of answer from the engine's state of the pool at
// that point (Config.Fork): the same views the projector writes, so the
// past reads exactly like the present did (every grant, lend, return,
// reclaim and release counted by the engine itself, not re-derived).
func stateOf(p *domain.Pool, res *AsOfResponse) {
	if plan, ok := p.Plan(); ok {
		pol := plan.Policy
		res.Policy = Policy{Reclaim: pol.Reclaim, Enforcement: pol.Enforcement, Preemption: pol.Preemption}
		v := int(domain.RulesOf(plan))
		res.RulesVersion = &v
	}
	for _, v := range p.Consumers() {
		share, prio, eff, planned, target, borrowed := v.Share, v.Priority, v.Effective, v.Planned, v.Target, v.Borrowed
		c := Consumer{Path: v.Path, Parent: v.Parent, Leaf: v.Leaf, Share: &share, Priority: &prio, Demand: v.Demand,
			Allocated: v.Allocated, Effective: &eff, Planned: &planned, Target: &target, Borrowed: &borrowed}
		if v.Max != "" {
			m := v.Max
			c.Max = &m
		}
		if v.WaitingSince != 0 {
			ws := int64(v.WaitingSince)
			c.WaitingSince = &ws
		}
		res.Consumers = append(res.Consumers, c)
	}
	for _, h := range p.Hosts() {
		res.Hosts = append(res.Hosts, Host{Name: h.Name, Group: h.Group, Slots: h.Slots, Up: h.Up, Allocated: h.Allocated, Holders: []Holder{}})
		if h.Up {
			res.Capacity += h.Slots
		}
	}
	var holders []query.HostAllocation
	for _, a := range p.Allocations() {
		holders = append(holders, query.HostAllocation{Host: a.Host, Consumer: a.Consumer, Slots: a.Slots})
	}
	slices.SortFunc(holders, func(a, b query.HostAllocation) int { // as the projection lists them
		return cmp.Or(strings.Compare(a.Host, b.Host), cmp.Compare(b.Slots, a.Slots), strings.Compare(a.Consumer, b.Consumer))
	})
	attachHolders(holders, res.Hosts)
	var owners []query.Owned
	for _, o := range p.Ownership() {
		owners = append(owners, query.Owned{Host: o.Host, Consumer: o.Consumer, Slots: o.Slots})
	}
	slices.SortFunc(owners, func(a, b query.Owned) int {
		return cmp.Or(strings.Compare(a.Host, b.Host), cmp.Compare(b.Slots, a.Slots), strings.Compare(a.Consumer, b.Consumer))
	})
	attachOwners(owners, res.Hosts)
}

type timelineFilter struct {
	consumer, kind, rule string
	beforeSeq            uint64 // 0: from the newest; at most query.MaxSeq
	beforeOrdinal        int
	limit                int
}

func readTimeline(ctx context.Context, q query.Querier, pool string, f timelineFilter) ([]TimelineEntry, error) {
	rows, err := query.Timeline(ctx, q, pool, query.TimelineFilter{Consumer: f.consumer, Kind: f.kind, Rule: f.rule,
		BeforeSeq: f.beforeSeq, BeforeOrdinal: f.beforeOrdinal, Limit: f.limit})
	if err != nil {
		return nil, err
	}
	out := make([]TimelineEntry, len(rows))
	for i, r := range rows {
		out[i] = TimelineEntry{EventSeq: r.EventSeq, Ordinal: r.Ordinal, Time: r.Time, EventType: r.EventType, Kind: r.Kind,
			Consumer: r.Consumer, FromConsumer: r.FromConsumer, Host: r.Host, Slots: r.Slots, Rule: r.Rule, Deadline: r.Deadline}
	}
	return out, nil
}

// readCheckpoints is every pool's projected sequence.
func readCheckpoints(ctx context.Context, q query.Querier) (map[string]uint64, error) {
	return query.AllProjectedSeqs(ctx, q)
}
