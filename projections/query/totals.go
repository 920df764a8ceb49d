package query

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// PoolTotals are a pool's totals in the projection, in slots: what the
// projector's per-pool gauges show (internal/metrics.PoolFigures).
type PoolTotals struct {
	Pool      string
	Capacity  int64 // slots of the hosts that are up
	Allocated int64 // slots held, over every host
	Borrowed  int64 // over the leaves: slots held beyond the planned share
	Demand    int64 // over the leaves: slots asked for
	Unmet     int64 // over the leaves: demand - allocated, when positive
}

const poolTotalsSQL = `
WITH h AS (
    SELECT pool, sum(slots) FILTER (WHERE up) AS capacity, sum(allocated) AS allocated
    FROM hosts WHERE pool = ANY($1) GROUP BY pool),
c AS (
    SELECT pool, sum(borrowed) AS borrowed, sum(demand) AS demand, sum(greatest(demand - allocated, 0)) AS unmet
    FROM consumer_state WHERE pool = ANY($1) AND leaf GROUP BY pool)
SELECT p.pool, coalesce(h.capacity, 0)::bigint, coalesce(h.allocated, 0)::bigint,
       coalesce(c.borrowed, 0)::bigint, coalesce(c.demand, 0)::bigint, coalesce(c.unmet, 0)::bigint
FROM unnest($1::text[]) AS p(pool)
LEFT JOIN h ON h.pool = p.pool
LEFT JOIN c ON c.pool = p.pool
LEFT JOIN checkpoints k ON k.pool = p.pool
ORDER BY k.last_seq DESC NULLS LAST, p.pool`

// PoolTotalsOf reads the totals of pools (one query, two aggregates, for
// any number of pools: a projector asks for all of its pools at start),
// the most recently projected first: a registry that labels a bounded
// number of pools gives its labels to the pools in use (metrics.MaxPools).
func PoolTotalsOf(ctx context.Context, q Querier, pools []string) ([]PoolTotals, error) {
	rows, _ := q.Query(ctx, poolTotalsSQL, pools)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[PoolTotals])
	if err != nil {
		return nil, fmt.Errorf("pool totals: %w", err)
	}
	return out, nil
}
