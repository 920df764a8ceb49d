package query

// Questions about a pool at a past point of its history, answered from
// the events, decisions and allocation_history tables.

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// LastSeqAtOrBefore is the sequence of pool's last event at or before
// seq; 0 when there is none.
func LastSeqAtOrBefore(ctx context.Context, q Querier, pool string, seq uint64) (uint64, error) {
	var s int64
	if err := q.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM events WHERE pool = $1 AND seq <= $2`, pool, int64(seq)).Scan(&s); err != nil {
		return 0, fmt.Errorf("resolve sequence: %w", err)
	}
	return uint64(s), nil
}

// LastSeqAtTime is the sequence of pool's last event stamped at or
// before t; 0 when there is none.
func LastSeqAtTime(ctx context.Context, q Querier, pool string, t time.Time) (uint64, error) {
	var s int64
	if err := q.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM events WHERE pool = $1 AND time <= $2`, pool, t).Scan(&s); err != nil {
		return 0, fmt.Errorf("resolve sequence: %w", err)
	}
	return uint64(s), nil
}

// EventBounds bound a pool's history around a sequence: its first and
// last events (0 when it has none) and the events just before and after.
type EventBounds struct {
	First, Last uint64
	Prev, Next  *uint64
}

// EventsAround returns the bounds of pool's history around seq.
func EventsAround(ctx context.Context, q Querier, pool string, seq uint64) (EventBounds, error) {
	var b EventBounds
	var prev, next *int64
	err := q.QueryRow(ctx, `
		SELECT coalesce(min(seq), 0), coalesce(max(seq), 0),
		       max(seq) FILTER (WHERE seq < $2), min(seq) FILTER (WHERE seq > $2)
		FROM events WHERE pool = $1`, pool, int64(seq)).Scan(&b.First, &b.Last, &prev, &next)
	if err != nil {
		return b, fmt.Errorf("events: %w", err)
	}
	b.Prev, b.Next = unsigned(prev), unsigned(next)
	return b, nil
}

func unsigned(p *int64) *uint64 {
	if p == nil {
		return nil
	}
	u := uint64(*p)
	return &u
}

// PlanAsOf is the "plan" object of pool's last applied plan event at or
// before seq, as JSON; nil when there is none.
func PlanAsOf(ctx context.Context, q Querier, pool string, seq uint64) ([]byte, error) {
	var raw []byte
	err := q.QueryRow(ctx, `SELECT data->'plan' FROM events WHERE pool = $1 AND type = 'plan' AND refused IS NULL AND seq <= $2
		ORDER BY seq DESC LIMIT 1`, pool, int64(seq)).Scan(&raw)
	if err != nil && !notFound(err) {
		return nil, fmt.Errorf("plan: %w", err)
	}
	return raw, nil
}

// PlanEvent is an applied plan event: its sequence and its consumers as
// written (a JSON array).
type PlanEvent struct {
	Seq       uint64
	Consumers []byte
}

// PlansUpTo returns pool's applied plan events up to seq, in order.
func PlansUpTo(ctx context.Context, q Querier, pool string, seq uint64) ([]PlanEvent, error) {
	rows, _ := q.Query(ctx, `SELECT seq, data->'plan'->'consumers' FROM events
		WHERE pool = $1 AND type = 'plan' AND refused IS NULL AND seq <= $2 ORDER BY seq`, pool, int64(seq))
	out, err := pgx.AppendRows([]PlanEvent{}, rows, pgx.RowToStructByPos[PlanEvent])
	if err != nil {
		return nil, fmt.Errorf("plans: %w", err)
	}
	return out, nil
}

// LeafDemand is a leaf's last demand event at or before a sequence, less
// what it released since.
type LeafDemand struct {
	Consumer string
	Seq      uint64 // the demand event
	Demand   int64
}

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

// DemandsAsOf returns, for every consumer a demand event of pool named
// at or before seq, its last such demand less what it released since (a
// plan applied later may have dropped the consumer: see PlansUpTo).
func DemandsAsOf(ctx context.Context, q Querier, pool string, seq uint64) ([]LeafDemand, error) {
	rows, _ := q.Query(ctx, demandAsOfSQL, pool, int64(seq))
	out, err := pgx.AppendRows([]LeafDemand{}, rows, pgx.RowToStructByPos[LeafDemand])
	if err != nil {
		return nil, fmt.Errorf("demand as of: %w", err)
	}
	return out, nil
}

// HostsAsOf returns pool's hosts just after seq, by name, from each
// host's last host event: its group, whether it is up, and the slots of
// its last host_up (a host_down carries none). Allocated is left 0: see
// HoldersAsOf.
func HostsAsOf(ctx context.Context, q Querier, pool string, seq uint64) ([]Host, error) {
	rows, _ := q.Query(ctx, `
		SELECT DISTINCT ON (host) host, coalesce(grp, 'default'), coalesce(slots, 0), type = 'host_up'
		FROM (SELECT data->>'host' AS host, data->>'group' AS grp, (data->>'slots')::bigint AS slots, type, seq
		      FROM events WHERE pool = $1 AND seq <= $2 AND refused IS NULL AND type IN ('host_up', 'host_down')) h
		ORDER BY host, seq DESC`, pool, int64(seq))
	hosts, err := pgx.AppendRows([]Host{}, rows, func(row pgx.CollectableRow) (Host, error) {
		var h Host
		err := row.Scan(&h.Name, &h.Group, &h.Slots, &h.Up)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("hosts as of: %w", err)
	}
	rows, _ = q.Query(ctx, `
		SELECT DISTINCT ON (data->>'host') data->>'host', (data->>'slots')::bigint FROM events
		WHERE pool = $1 AND seq <= $2 AND refused IS NULL AND type = 'host_up'
		ORDER BY data->>'host', seq DESC`, pool, int64(seq))
	slots := map[string]int64{}
	var name string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&name, &n}, func() error { slots[name] = n; return nil }); err != nil {
		return nil, fmt.Errorf("host slots as of: %w", err)
	}
	for i := range hosts {
		hosts[i].Slots = slots[hosts[i].Name]
	}
	return hosts, nil
}

// HoldersAsOf returns the slots each leaf of pool held on each host just
// after seq, adding up the decisions (grants and reclaims add, releases
// and trims take away, a reclaim takes from its victim); by host, then
// the largest holding first, then consumer.
func HoldersAsOf(ctx context.Context, q Querier, pool string, seq uint64) ([]HostAllocation, error) {
	rows, _ := q.Query(ctx, `
		SELECT consumer, host, sum(delta)::bigint FROM (
		    SELECT host, consumer, CASE WHEN kind IN ('grant', 'reclaim') THEN slots ELSE -slots END AS delta
		    FROM decisions WHERE pool = $1 AND event_seq <= $2 AND kind IN ('grant', 'reclaim', 'release', 'trim')
		    UNION ALL
		    SELECT host, from_consumer, -slots
		    FROM decisions WHERE pool = $1 AND event_seq <= $2 AND kind = 'reclaim') x
		GROUP BY host, consumer HAVING sum(delta) > 0
		ORDER BY host, sum(delta) DESC, consumer`, pool, int64(seq))
	out, err := pgx.AppendRows([]HostAllocation{}, rows, pgx.RowToStructByPos[HostAllocation])
	if err != nil {
		return nil, fmt.Errorf("host allocations as of: %w", err)
	}
	return out, nil
}
