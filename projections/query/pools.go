package query

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PoolSummary is what the pools list shows of a pool.
type PoolSummary struct {
	Pool      string
	Seq       uint64     // last event the projection applied
	FirstSeq  uint64     // the pool's first event
	Time      *time.Time // time of the last event
	LastType  string     // type of the last event
	Capacity  int64      // slots of the hosts that are up
	HostsUp   int
	HostsDown int
	Consumers int
	Leaves    int
	Allocated int64 // over the leaves
	Demand    int64 // over the leaves
	// Plan is the "plan" object of the pool's last applied plan event as
	// JSON; nil while the pool has none.
	Plan []byte
	// Rules is the rules version the pool runs under (0 while it has no
	// plan), since the plan at RulesSince.
	Rules      int
	RulesSince uint64
}

const summarySQL = `
SELECT c.pool, c.last_seq, coalesce((SELECT min(seq) FROM events WHERE pool = c.pool), 0), e.time, coalesce(e.type, ''),
       coalesce(h.cap, 0), coalesce(h.up, 0), coalesce(h.down, 0),
       coalesce(cs.n, 0), coalesce(cs.leaves, 0), coalesce(cs.alloc, 0), coalesce(cs.demand, 0),
       pl.data, c.rules, c.rules_since
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
WHERE $1::text[] IS NULL OR c.pool = ANY($1)
ORDER BY c.pool`

// PoolSummaries sums up the named pools that the projection holds, in
// name order; with no name, every projected pool (a site with thousands
// asks for a page of names first: PoolNames).
func PoolSummaries(ctx context.Context, q Querier, pools ...string) ([]PoolSummary, error) {
	rows, _ := q.Query(ctx, summarySQL, pools)
	out, err := pgx.AppendRows([]PoolSummary{}, rows, func(row pgx.CollectableRow) (PoolSummary, error) {
		var s PoolSummary
		err := row.Scan(&s.Pool, &s.Seq, &s.FirstSeq, &s.Time, &s.LastType, &s.Capacity, &s.HostsUp, &s.HostsDown,
			&s.Consumers, &s.Leaves, &s.Allocated, &s.Demand, &s.Plan, &s.Rules, &s.RulesSince)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("pools: %w", err)
	}
	return out, nil
}

// PoolNames returns, in name order, at most limit names of projected
// pools that come after after ("" from the first), start with prefix and
// that keep accepts (nil: all), and whether more follow: a page of the
// pools list, by keyset, so a page costs the same on the first pool as on
// the ten-thousandth.
func PoolNames(ctx context.Context, q Querier, after, prefix string, keep func(pool string) bool, limit int) ([]string, bool, error) {
	sql := `SELECT pool FROM checkpoints WHERE pool > $1 AND starts_with(pool, $2) ORDER BY pool`
	args := []any{after, prefix}
	if keep == nil {
		sql += ` LIMIT $3`
		args = append(args, limit+1)
	}
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, false, fmt.Errorf("pools: %w", err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, false, fmt.Errorf("pools: %w", err)
		}
		if keep != nil && !keep(name) {
			continue
		}
		if len(names) == limit {
			return names, true, nil
		}
		names = append(names, name)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("pools: %w", err)
	}
	return names, false, nil
}

// PlanConsumer is a consumer of a pool's current plan with its state
// (state fields are nil for a consumer the projection has no state for).
type PlanConsumer struct {
	Path         string
	Parent       string
	Leaf         bool
	Share        int64
	Priority     int64
	Max          *string // as written: a slot count or N%; nil for none
	Demand       int64
	Allocated    int64
	Effective    *int64
	Planned      *int64
	Target       *int64
	Borrowed     *int64
	WaitingSince *int64
}

// PlanConsumers returns the consumers of pool's plan with their state, in
// path order.
func PlanConsumers(ctx context.Context, q Querier, pool string) ([]PlanConsumer, error) {
	rows, _ := q.Query(ctx, `
		SELECT c.path, c.parent, c.leaf, c.share, c.priority, c.max,
		       coalesce(s.demand, 0), coalesce(s.allocated, 0), s.effective, s.planned, s.target, s.borrowed, s.waiting_since
		FROM consumers c LEFT JOIN consumer_state s ON s.pool = c.pool AND s.consumer = c.path
		WHERE c.pool = $1 ORDER BY c.path`, pool)
	out, err := pgx.AppendRows([]PlanConsumer{}, rows, pgx.RowToStructByPos[PlanConsumer])
	if err != nil {
		return nil, fmt.Errorf("consumers: %w", err)
	}
	return out, nil
}

// Host is a row of hosts.
type Host struct {
	Name      string
	Group     string
	Slots     int64
	Up        bool
	Allocated int64
}

// Hosts returns the hosts of pool in name order.
func Hosts(ctx context.Context, q Querier, pool string) ([]Host, error) {
	rows, _ := q.Query(ctx, `SELECT name, grp, slots, up, allocated FROM hosts WHERE pool = $1 ORDER BY name`, pool)
	out, err := pgx.AppendRows([]Host{}, rows, pgx.RowToStructByPos[Host])
	if err != nil {
		return nil, fmt.Errorf("hosts: %w", err)
	}
	return out, nil
}

// HoldersByHost returns the allocations of pool holding slots, by host,
// then the largest holding first, then consumer.
func HoldersByHost(ctx context.Context, q Querier, pool string) ([]HostAllocation, error) {
	rows, _ := q.Query(ctx, `SELECT consumer, host, slots FROM allocations WHERE pool = $1 AND slots > 0
		ORDER BY host, slots DESC, consumer`, pool)
	out, err := pgx.AppendRows([]HostAllocation{}, rows, pgx.RowToStructByPos[HostAllocation])
	if err != nil {
		return nil, fmt.Errorf("allocations: %w", err)
	}
	return out, nil
}

// AllProjectedSeqs is every pool's projected sequence.
func AllProjectedSeqs(ctx context.Context, q Querier) (map[string]uint64, error) {
	rows, _ := q.Query(ctx, `SELECT pool, last_seq FROM checkpoints`)
	out := map[string]uint64{}
	var pool string
	var seq int64
	_, err := pgx.ForEachRow(rows, []any{&pool, &seq}, func() error {
		out[pool] = uint64(seq)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	return out, nil
}
