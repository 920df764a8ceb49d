package query

// Where a pool's history stands around a point: which event is the
// pool's last at or before a sequence or a time, and its neighbours. The
// pool's state at that point is the engine's, folded from the log
// (internal/whatif), never re-derived here.

import (
	"context"
	"fmt"
	"time"
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

// LastSeqAtTime is the sequence of pool's last event the ledger took
// (not refused) stamped at or before t; 0 when there is none. A refused
// event changed nothing and carries whatever time its publisher wrote
// (one published around the ledger): counted, a refused event dated
// 2000-01-01 made every time answer the pool's state now, as
// allocations_as_of_time did (decision 523, migration 0010).
func LastSeqAtTime(ctx context.Context, q Querier, pool string, t time.Time) (uint64, error) {
	var s int64
	if err := q.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM events WHERE pool = $1 AND time <= $2 AND refused IS NULL`, pool, t).Scan(&s); err != nil {
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
