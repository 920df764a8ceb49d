package query

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Checkpoint is a pool's row of checkpoints: the last event the
// projection applied, the hashes after it, and the rules version the pool
// runs under.
type Checkpoint struct {
	Pool       string
	LastSeq    uint64
	StateHash  []byte
	ChainHash  []byte
	Rules      int    // 0 while the pool has no plan
	RulesSince uint64 // sequence of the plan from which Rules holds
}

// CheckpointOf returns pool's checkpoint; an error matching
// ErrNoCheckpoint when the projection has applied none of its events.
func CheckpointOf(ctx context.Context, q Querier, pool string) (Checkpoint, error) {
	c := Checkpoint{Pool: pool}
	var last, since int64
	err := q.QueryRow(ctx, `SELECT last_seq, state_hash, chain_hash, rules, rules_since FROM checkpoints WHERE pool = $1`, pool).
		Scan(&last, &c.StateHash, &c.ChainHash, &c.Rules, &since)
	if notFound(err) {
		return c, fmt.Errorf("pool %s: %w", pool, ErrNoCheckpoint)
	}
	if err != nil {
		return c, fmt.Errorf("checkpoint of pool %s: %w", pool, err)
	}
	c.LastSeq, c.RulesSince = uint64(last), uint64(since)
	return c, nil
}

// ProjectedSeq is the sequence of the last event of pool the projection
// applied, 0 when it has applied none.
func ProjectedSeq(ctx context.Context, q Querier, pool string) (uint64, error) {
	var last int64
	err := q.QueryRow(ctx, `SELECT last_seq FROM checkpoints WHERE pool = $1`, pool).Scan(&last)
	if err != nil && !notFound(err) {
		return 0, fmt.Errorf("checkpoint of pool %s: %w", pool, err)
	}
	return uint64(last), nil
}

// ProjectedSeqs is ProjectedSeq for several pools at once (one round
// trip); a pool with no checkpoint is absent from the map.
func ProjectedSeqs(ctx context.Context, q Querier, pools []string) (map[string]uint64, error) {
	rows, err := q.Query(ctx, `SELECT pool, last_seq FROM checkpoints WHERE pool = ANY($1)`, pools)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	defer rows.Close()
	out := make(map[string]uint64, len(pools))
	for rows.Next() {
		var pool string
		var seq int64
		if err := rows.Scan(&pool, &seq); err != nil {
			return nil, fmt.Errorf("checkpoints: %w", err)
		}
		out[pool] = uint64(seq)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	return out, nil
}

// Pools lists the pools the projection holds (those with a checkpoint),
// in name order.
func Pools(ctx context.Context, q Querier) ([]string, error) {
	rows, _ := q.Query(ctx, `SELECT pool FROM checkpoints ORDER BY pool`)
	pools, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	return pools, nil
}
