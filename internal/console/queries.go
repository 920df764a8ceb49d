package console

// What the console reads of the projection, through projections/query,
// put in the console's shapes.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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

// rulesVersion is the version a stored plan names; a plan written before
// versions existed means version 1 (events.Plan).
func (p *planDoc) rulesVersion() *int {
	if p == nil {
		return nil
	}
	if p.Rules == nil || *p.Rules == 0 {
		one := 1
		return &one
	}
	return p.Rules
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

// readAsOf reads the pool just after event seq from the history: the plan
// of the last plan event, allocations_as_of for every consumer, demand
// from the demand and release events, hosts from host events and the
// slots each consumer held on each host by adding up the decisions.
func readAsOf(ctx context.Context, q query.Querier, pool string, seq uint64) (*AsOfResponse, error) {
	res := &AsOfResponse{Pool: pool, Seq: seq, Consumers: []Consumer{}, Hosts: []Host{}}
	b, err := query.EventsAround(ctx, q, pool, seq)
	if err != nil {
		return nil, err
	}
	if b.Last == 0 {
		return nil, errNoPool
	}
	res.First, res.Last, res.Prev, res.Next = b.First, b.Last, b.Prev, b.Next
	if seq > 0 {
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
	}
	if err := readTreeAsOf(ctx, q, res); err != nil {
		return nil, err
	}
	if err := readHostsAsOf(ctx, q, res); err != nil {
		return nil, err
	}
	return res, nil
}

func readTreeAsOf(ctx context.Context, q query.Querier, res *AsOfResponse) error {
	raw, err := query.PlanAsOf(ctx, q, res.Pool, res.Seq)
	if err != nil {
		return err
	}
	plan, err := decodePlan(raw)
	if err != nil {
		return err
	}
	held, err := query.AllocationsAsOf(ctx, q, res.Pool, res.Seq)
	if err != nil {
		return err
	}
	alloc := map[string]int64{}
	for _, c := range held {
		alloc[c.Consumer] = c.Slots
	}
	demand, err := readDemandAsOf(ctx, q, res.Pool, res.Seq)
	if err != nil {
		return err
	}
	if plan != nil {
		res.Policy = plan.Policy
		res.RulesVersion = plan.rulesVersion()
		res.Consumers = treeOf(plan, alloc, demand)
	}
	return nil
}

// readDemandAsOf is each leaf's demand just after seq: its last demand
// event less what it released since, unless a later plan dropped the leaf
// (or made it a parent), which drops its demand (decisions.md 16).
func readDemandAsOf(ctx context.Context, q query.Querier, pool string, seq uint64) (map[string]int64, error) {
	pes, err := query.PlansUpTo(ctx, q, pool, seq)
	if err != nil {
		return nil, err
	}
	type plan struct {
		seq    uint64
		leaves map[string]bool
	}
	plans := make([]plan, 0, len(pes))
	for _, pe := range pes {
		var cs []struct {
			Path string `json:"path"`
		}
		if err := json.Unmarshal(pe.Consumers, &cs); err != nil {
			return nil, fmt.Errorf("plan %d: %w", pe.Seq, err)
		}
		p := plan{seq: pe.Seq, leaves: map[string]bool{}}
		for _, c := range cs {
			p.leaves[c.Path] = true
		}
		for _, c := range cs {
			for a := parentOf(c.Path); a != "/"; a = parentOf(a) {
				p.leaves[a] = false
			}
		}
		plans = append(plans, p)
	}
	demands, err := query.DemandsAsOf(ctx, q, pool, seq)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, d := range demands {
		dropped := false
		for _, p := range plans {
			if p.seq > d.Seq && !p.leaves[d.Consumer] {
				dropped = true
				break
			}
		}
		if !dropped {
			out[d.Consumer] = d.Demand
		}
	}
	return out, nil
}

// treeOf lists the plan's consumers (parents implied by paths included),
// in path order, with their allocation and demand; a parent's demand is
// the sum of its leaves'.
func treeOf(plan *planDoc, alloc, demand map[string]int64) []Consumer {
	byPath := map[string]*Consumer{}
	var order []string
	add := func(path string) *Consumer {
		if c, ok := byPath[path]; ok {
			return c
		}
		c := &Consumer{Path: path, Parent: parentOf(path), Leaf: true}
		byPath[path] = c
		order = append(order, path)
		return c
	}
	for _, pc := range plan.Consumers {
		c := add(pc.Path)
		share, prio := int64(1), pc.Priority
		if pc.Share != nil {
			share = *pc.Share
		}
		c.Share, c.Priority = &share, &prio
		if len(pc.Max) > 0 && string(pc.Max) != "null" {
			m := strings.Trim(string(pc.Max), `"`)
			c.Max = &m
		}
		for p := parentOf(pc.Path); p != "/"; p = parentOf(p) {
			add(p)
		}
	}
	for _, path := range order {
		if p := byPath[path].Parent; p != "/" {
			byPath[p].Leaf = false
		}
	}
	slices.Sort(order)
	out := make([]Consumer, 0, len(order))
	for _, path := range order {
		c := byPath[path]
		c.Allocated = alloc[path]
		if c.Leaf {
			c.Demand = demand[path]
			for p := c.Parent; p != "/"; p = parentOf(p) {
				byPath[p].Demand += c.Demand
			}
		}
	}
	for _, path := range order {
		out = append(out, *byPath[path])
	}
	return out
}

func parentOf(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/"
	}
	return path[:i]
}

// readHostsAsOf: each host's last host event at or before the sequence,
// and the slots each leaf held on it.
func readHostsAsOf(ctx context.Context, q query.Querier, res *AsOfResponse) error {
	hosts, err := query.HostsAsOf(ctx, q, res.Pool, res.Seq)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		res.Hosts = append(res.Hosts, Host{Name: h.Name, Group: h.Group, Slots: h.Slots, Up: h.Up, Holders: []Holder{}})
		if h.Up {
			res.Capacity += h.Slots
		}
	}
	holders, err := query.HoldersAsOf(ctx, q, res.Pool, res.Seq)
	if err != nil {
		return err
	}
	attachHolders(holders, res.Hosts)
	owners, err := query.OwnersAsOf(ctx, q, res.Pool, res.Seq)
	if err != nil {
		return err
	}
	attachOwners(owners, res.Hosts)
	for i := range res.Hosts {
		for _, h := range res.Hosts[i].Holders {
			res.Hosts[i].Allocated += h.Slots
		}
	}
	return nil
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
