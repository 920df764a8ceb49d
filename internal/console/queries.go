package console

// The console's SQL over the projection. It lives in this one file so that
// it can move to projections/query with the rest of the API's read SQL.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// querier is what the queries need: a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// summarySQL is one row per projected pool; $1 = ” for every pool. The
// rules version is the one named by the pool's last applied plan.
const summarySQL = `
SELECT c.pool, c.last_seq, coalesce((SELECT min(seq) FROM events WHERE pool = c.pool), 0), e.time, e.type,
       coalesce(h.cap, 0), coalesce(h.up, 0), coalesce(h.down, 0),
       coalesce(cs.n, 0), coalesce(cs.leaves, 0), coalesce(cs.alloc, 0), coalesce(cs.demand, 0),
       pl.data, nullif(c.rules, 0), c.rules_since
FROM checkpoints c
LEFT JOIN events e ON e.pool = c.pool AND e.seq = c.last_seq
LEFT JOIN LATERAL (
    SELECT sum(slots) FILTER (WHERE up) AS cap, count(*) FILTER (WHERE up) AS up,
           count(*) FILTER (WHERE NOT up) AS down
    FROM hosts WHERE pool = c.pool) h ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS n, count(*) FILTER (WHERE leaf) AS leaves,
           sum(allocated) FILTER (WHERE leaf) AS alloc, sum(demand) FILTER (WHERE leaf) AS demand
    FROM consumer_state WHERE pool = c.pool) cs ON true
LEFT JOIN LATERAL (
    SELECT data->'plan' AS data FROM events
    WHERE pool = c.pool AND type = 'plan' AND refused IS NULL
    ORDER BY seq DESC LIMIT 1) pl ON true
WHERE $1 = '' OR c.pool = $1
ORDER BY c.pool`

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

func readSummaries(ctx context.Context, q querier, pool string) ([]PoolSummary, []*planDoc, error) {
	rows, err := q.Query(ctx, summarySQL, pool)
	if err != nil {
		return nil, nil, fmt.Errorf("pools: %w", err)
	}
	defer rows.Close()
	var out []PoolSummary
	var plans []*planDoc
	for rows.Next() {
		var s PoolSummary
		var lastType *string
		var plan []byte
		var since int64
		if err := rows.Scan(&s.Pool, &s.Seq, &s.FirstSeq, &s.Time, &lastType, &s.Capacity, &s.HostsUp, &s.HostsDown,
			&s.Consumers, &s.Leaves, &s.Allocated, &s.Demand, &plan, &s.RulesVersion, &since); err != nil {
			return nil, nil, fmt.Errorf("pools: %w", err)
		}
		if lastType != nil {
			s.LastType = *lastType
		}
		p, err := decodePlan(plan)
		if err != nil {
			return nil, nil, fmt.Errorf("pool %s: %w", s.Pool, err)
		}
		if s.RulesVersion != nil {
			s.RulesSince = uint64(since)
		}
		out = append(out, s)
		plans = append(plans, p)
	}
	return out, plans, rows.Err()
}

// errNoPool: the projection knows nothing of the pool.
var errNoPool = errors.New("no such pool in the projection")

// readPool reads a pool's state now (call it inside one snapshot).
func readPool(ctx context.Context, q querier, pool string) (*PoolResponse, error) {
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
	rows, _ := q.Query(ctx, `
		SELECT c.path, c.parent, c.leaf, c.share, c.priority, c.max,
		       coalesce(s.demand, 0), coalesce(s.allocated, 0), s.effective, s.planned, s.target, s.borrowed, s.waiting_since
		FROM consumers c LEFT JOIN consumer_state s ON s.pool = c.pool AND s.consumer = c.path
		WHERE c.pool = $1 ORDER BY c.path`, pool)
	res.Consumers, err = pgx.AppendRows(res.Consumers, rows, func(row pgx.CollectableRow) (Consumer, error) {
		var c Consumer
		var share, prio int64
		err := row.Scan(&c.Path, &c.Parent, &c.Leaf, &share, &prio, &c.Max, &c.Demand, &c.Allocated,
			&c.Effective, &c.Planned, &c.Target, &c.Borrowed, &c.WaitingSince)
		c.Share, c.Priority = &share, &prio
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("consumers: %w", err)
	}
	rows, _ = q.Query(ctx, `SELECT name, grp, slots, up, allocated FROM hosts WHERE pool = $1 ORDER BY name`, pool)
	res.Hosts, err = pgx.AppendRows(res.Hosts, rows, func(row pgx.CollectableRow) (Host, error) {
		h := Host{Holders: []Holder{}}
		err := row.Scan(&h.Name, &h.Group, &h.Slots, &h.Up, &h.Allocated)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("hosts: %w", err)
	}
	rows, _ = q.Query(ctx, `SELECT host, consumer, slots FROM allocations WHERE pool = $1 AND slots > 0 ORDER BY host, slots DESC, consumer`, pool)
	if err := attachHolders(rows, res.Hosts); err != nil {
		return nil, fmt.Errorf("allocations: %w", err)
	}
	return res, nil
}

// attachHolders adds (host, consumer, slots) rows, ordered by host, to
// hosts ordered by name.
func attachHolders(rows pgx.Rows, hosts []Host) error {
	defer rows.Close()
	for rows.Next() {
		var host string
		var h Holder
		if err := rows.Scan(&host, &h.Consumer, &h.Slots); err != nil {
			return err
		}
		if i, ok := slices.BinarySearchFunc(hosts, host, func(x Host, n string) int { return strings.Compare(x.Name, n) }); ok {
			hosts[i].Holders = append(hosts[i].Holders, h)
		}
	}
	return rows.Err()
}

// resolveSeq is the pool's last event at or before seq (or, with a
// non-zero at, at or before that time); 0 when there is none.
func resolveSeq(ctx context.Context, q querier, pool string, seq uint64, at time.Time) (uint64, error) {
	var s uint64
	var err error
	if !at.IsZero() {
		err = q.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM events WHERE pool = $1 AND time <= $2`, pool, at).Scan(&s)
	} else {
		err = q.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM events WHERE pool = $1 AND seq <= $2`, pool, int64(seq)).Scan(&s)
	}
	if err != nil {
		return 0, fmt.Errorf("resolve sequence: %w", err)
	}
	return s, nil
}

// readAsOf reads the pool just after event seq from the history: the plan
// of the last plan event, allocations_as_of for every consumer, demand
// from the demand and release events, hosts from host events and the
// slots each consumer held on each host by adding up the decisions.
func readAsOf(ctx context.Context, q querier, pool string, seq uint64) (*AsOfResponse, error) {
	res := &AsOfResponse{Pool: pool, Seq: seq, Consumers: []Consumer{}, Hosts: []Host{}}
	var prev, next *int64
	err := q.QueryRow(ctx, `
		SELECT coalesce(min(seq), 0), coalesce(max(seq), 0),
		       max(seq) FILTER (WHERE seq < $2), min(seq) FILTER (WHERE seq > $2)
		FROM events WHERE pool = $1`, pool, int64(seq)).Scan(&res.First, &res.Last, &prev, &next)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	if res.Last == 0 {
		return nil, errNoPool
	}
	res.Prev, res.Next = toU(prev), toU(next)
	if seq > 0 {
		var ev Event
		var refused *string
		err = q.QueryRow(ctx, `SELECT seq, type, time, producer, refused, data FROM events WHERE pool = $1 AND seq = $2`,
			pool, int64(seq)).Scan(&ev.Seq, &ev.Type, &ev.Time, &ev.Producer, &refused, &ev.Data)
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", seq, err)
		}
		if refused != nil {
			ev.Refused = *refused
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

func toU(p *int64) *uint64 {
	if p == nil {
		return nil
	}
	u := uint64(*p)
	return &u
}

func readTreeAsOf(ctx context.Context, q querier, res *AsOfResponse) error {
	var raw []byte
	err := q.QueryRow(ctx, `SELECT data->'plan' FROM events WHERE pool = $1 AND type = 'plan' AND refused IS NULL AND seq <= $2
		ORDER BY seq DESC LIMIT 1`, res.Pool, int64(res.Seq)).Scan(&raw)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("plan: %w", err)
	}
	plan, err := decodePlan(raw)
	if err != nil {
		return err
	}
	alloc := map[string]int64{}
	rows, _ := q.Query(ctx, `SELECT consumer, slots FROM allocations_as_of($1, $2)`, res.Pool, int64(res.Seq))
	if err := scanCounts(rows, alloc); err != nil {
		return fmt.Errorf("allocations_as_of: %w", err)
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

// demandAsOfSQL is, for each leaf, its last demand event at or before
// $2 and what it released since.
const demandAsOfSQL = `
WITH ev AS (
    SELECT seq, type, data FROM events
    WHERE pool = $1 AND seq <= $2 AND refused IS NULL AND type IN ('demand', 'release')),
last AS (
    SELECT DISTINCT ON (d.key) d.key AS consumer, d.value::bigint AS demand, ev.seq
    FROM ev CROSS JOIN LATERAL jsonb_each_text(ev.data->'demands') AS d
    WHERE ev.type = 'demand'
    ORDER BY d.key, ev.seq DESC)
SELECT l.consumer, l.seq, l.demand - coalesce((
    SELECT sum((r.data->>'slots')::bigint) FROM ev r
    WHERE r.type = 'release' AND r.data->>'consumer' = l.consumer AND r.seq > l.seq), 0)::bigint
FROM last l`

// readDemandAsOf is each leaf's demand just after seq: its last demand
// event less what it released since, unless a later plan dropped the leaf
// (or made it a parent), which drops its demand (decisions.md 16).
func readDemandAsOf(ctx context.Context, q querier, pool string, seq uint64) (map[string]int64, error) {
	rows, err := q.Query(ctx, `SELECT seq, data->'plan'->'consumers' FROM events
		WHERE pool = $1 AND type = 'plan' AND refused IS NULL AND seq <= $2 ORDER BY seq`, pool, int64(seq))
	if err != nil {
		return nil, fmt.Errorf("plans: %w", err)
	}
	type plan struct {
		seq    int64
		leaves map[string]bool
	}
	var plans []plan
	for rows.Next() {
		var p plan
		var raw []byte
		if err := rows.Scan(&p.seq, &raw); err != nil {
			rows.Close()
			return nil, fmt.Errorf("plans: %w", err)
		}
		var cs []struct {
			Path string `json:"path"`
		}
		if err := json.Unmarshal(raw, &cs); err != nil {
			rows.Close()
			return nil, fmt.Errorf("plan %d: %w", p.seq, err)
		}
		p.leaves = map[string]bool{}
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
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("plans: %w", err)
	}
	out := map[string]int64{}
	rows, _ = q.Query(ctx, demandAsOfSQL, pool, int64(seq))
	defer rows.Close()
	for rows.Next() {
		var leaf string
		var at, n int64
		if err := rows.Scan(&leaf, &at, &n); err != nil {
			return nil, fmt.Errorf("demand as of: %w", err)
		}
		dropped := false
		for _, p := range plans {
			if p.seq > at && !p.leaves[leaf] {
				dropped = true
				break
			}
		}
		if !dropped {
			out[leaf] = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("demand as of: %w", err)
	}
	return out, nil
}

func scanCounts(rows pgx.Rows, into map[string]int64) error {
	defer rows.Close()
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return err
		}
		into[k] = n
	}
	return rows.Err()
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
// and the slots each leaf held on it (grants and reclaims add, releases
// and trims take away, a reclaim takes from its victim).
func readHostsAsOf(ctx context.Context, q querier, res *AsOfResponse) error {
	rows, _ := q.Query(ctx, `
		SELECT DISTINCT ON (host) host, coalesce(grp, 'default'), coalesce(slots, 0), type = 'host_up'
		FROM (SELECT data->>'host' AS host, data->>'group' AS grp, (data->>'slots')::bigint AS slots, type, seq
		      FROM events WHERE pool = $1 AND seq <= $2 AND refused IS NULL AND type IN ('host_up', 'host_down')) h
		ORDER BY host, seq DESC`, res.Pool, int64(res.Seq))
	var err error
	res.Hosts, err = pgx.AppendRows(res.Hosts, rows, func(row pgx.CollectableRow) (Host, error) {
		h := Host{Holders: []Holder{}}
		err := row.Scan(&h.Name, &h.Group, &h.Slots, &h.Up)
		return h, err
	})
	if err != nil {
		return fmt.Errorf("hosts as of: %w", err)
	}
	// A host_down carries no slot count: keep the one of its last host_up.
	rows, _ = q.Query(ctx, `
		SELECT DISTINCT ON (data->>'host') data->>'host', (data->>'slots')::bigint FROM events
		WHERE pool = $1 AND seq <= $2 AND refused IS NULL AND type = 'host_up'
		ORDER BY data->>'host', seq DESC`, res.Pool, int64(res.Seq))
	slots := map[string]int64{}
	if err := scanCounts(rows, slots); err != nil {
		return fmt.Errorf("host slots as of: %w", err)
	}
	for i := range res.Hosts {
		res.Hosts[i].Slots = slots[res.Hosts[i].Name]
		if res.Hosts[i].Up {
			res.Capacity += res.Hosts[i].Slots
		}
	}
	rows, _ = q.Query(ctx, `
		SELECT host, consumer, sum(delta)::bigint FROM (
		    SELECT host, consumer, CASE WHEN kind IN ('grant', 'reclaim') THEN slots ELSE -slots END AS delta
		    FROM decisions WHERE pool = $1 AND event_seq <= $2 AND kind IN ('grant', 'reclaim', 'release', 'trim')
		    UNION ALL
		    SELECT host, from_consumer, -slots
		    FROM decisions WHERE pool = $1 AND event_seq <= $2 AND kind = 'reclaim') x
		GROUP BY host, consumer HAVING sum(delta) > 0
		ORDER BY host, sum(delta) DESC, consumer`, res.Pool, int64(res.Seq))
	if err := attachHolders(rows, res.Hosts); err != nil {
		return fmt.Errorf("host allocations as of: %w", err)
	}
	for i := range res.Hosts {
		for _, h := range res.Hosts[i].Holders {
			res.Hosts[i].Allocated += h.Slots
		}
	}
	return nil
}

// timelineSQL pages decisions newest first, filtered; $5,$6 is the
// (event_seq, ordinal) cursor (0: from the newest).
const timelineSQL = `
SELECT d.event_seq, d.ordinal, e.time, e.type, d.kind, d.consumer, coalesce(d.from_consumer, ''), d.host, d.slots, d.rule, d.deadline
FROM decisions d JOIN events e ON e.pool = d.pool AND e.seq = d.event_seq
WHERE d.pool = $1
  AND ($2 = '' OR d.consumer = $2 OR d.from_consumer = $2 OR d.consumer LIKE $2 || '/%' OR d.from_consumer LIKE $2 || '/%')
  AND ($3 = '' OR d.kind = $3)
  AND ($4 = '' OR d.rule = $4)
  AND ($5 = 0 OR (d.event_seq, d.ordinal) < ($5, $6))
ORDER BY d.event_seq DESC, d.ordinal DESC
LIMIT $7`

type timelineFilter struct {
	consumer, kind, rule string
	beforeSeq            int64
	beforeOrdinal        int
	limit                int
}

func readTimeline(ctx context.Context, q querier, pool string, f timelineFilter) ([]TimelineEntry, error) {
	rows, _ := q.Query(ctx, timelineSQL, pool, f.consumer, f.kind, f.rule, f.beforeSeq, f.beforeOrdinal, f.limit)
	out, err := pgx.AppendRows([]TimelineEntry{}, rows, func(row pgx.CollectableRow) (TimelineEntry, error) {
		var d TimelineEntry
		err := row.Scan(&d.EventSeq, &d.Ordinal, &d.Time, &d.EventType, &d.Kind, &d.Consumer, &d.FromConsumer, &d.Host, &d.Slots, &d.Rule, &d.Deadline)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	return out, nil
}

// readCheckpoints is every pool's projected sequence.
func readCheckpoints(ctx context.Context, q querier) (map[string]uint64, error) {
	rows, _ := q.Query(ctx, `SELECT pool, last_seq FROM checkpoints`)
	m := map[string]int64{}
	if err := scanCounts(rows, m); err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	out := make(map[string]uint64, len(m))
	for k, v := range m {
		out[k] = uint64(v)
	}
	return out, nil
}
