package query

import (
	"context"
	"fmt"
)

// ProjectorOffset is the stream sequence the projector name has
// committed, 0 before its first commit. With name "" it is the sequence up
// to which the whole projection is written: the furthest any projector
// has committed, or, when the pools are partitioned, the offset of the
// partition furthest behind (every partition reads the whole stream).
func ProjectorOffset(ctx context.Context, q Querier, name string) (uint64, error) {
	var seq int64
	var err error
	if name == "" {
		// A partition without a row has committed nothing yet.
		err = q.QueryRow(ctx, `SELECT coalesce(CASE
			WHEN NOT bool_or(partitions IS NOT NULL) THEN max(stream_seq)
			WHEN count(*) FILTER (WHERE partitions IS NOT NULL) < max(partitions) THEN 0
			ELSE min(stream_seq) FILTER (WHERE partitions IS NOT NULL) END, 0)
			FROM projector_offsets`).Scan(&seq)
	} else {
		err = q.QueryRow(ctx, `SELECT coalesce(max(stream_seq), 0) FROM projector_offsets WHERE name = $1`, name).Scan(&seq)
	}
	if err != nil {
		return 0, fmt.Errorf("read the projection's offset: %w", err)
	}
	return uint64(seq), nil
}

// HoldsProjection reports whether the database holds any projected event
// or projector offset (a rebuild needs an empty one).
func HoldsProjection(ctx context.Context, q Querier) (bool, error) {
	var held bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events) OR EXISTS (SELECT 1 FROM projector_offsets)`).Scan(&held)
	if err != nil {
		return false, fmt.Errorf("look for a projection: %w", err)
	}
	return held, nil
}

// DecisionCount is the number of rows of decisions, over every pool.
func DecisionCount(ctx context.Context, q Querier) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, `SELECT count(*) FROM decisions`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count decisions: %w", err)
	}
	return n, nil
}

// FurthestOffset is the furthest stream sequence any projector (or
// partition) has committed: beyond the stream's end, the stream lost
// events the projection holds (the append hold waits for the heal).
func FurthestOffset(ctx context.Context, q Querier) (uint64, error) {
	var seq int64
	if err := q.QueryRow(ctx, `SELECT coalesce(max(stream_seq), 0) FROM projector_offsets`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("read the projection's offsets: %w", err)
	}
	return uint64(seq), nil
}
