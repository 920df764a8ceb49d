package query

import (
	"context"
	"fmt"
)

// ProjectorOffset is the stream sequence up to which the projector name
// has projected every event, 0 before its first commit. With name "" it
// is the sequence up to which the whole projection is written: the
// furthest any projector has committed, or, when the pools are
// partitioned, the offset of the partition furthest behind (every
// partition reads the whole stream). Events a projector set aside for a
// busy pool (pending_events) are below its committed offset but not
// projected yet: the answer stops before the first of them.
func ProjectorOffset(ctx context.Context, q Querier, name string) (uint64, error) {
	return offset(ctx, q, name, true)
}

// PassedOffset is ProjectorOffset counting the events set aside for busy
// pools as passed: the committed offset itself, below which every event
// is projected or in pending_events (what audit verify holds the
// checkpoints to).
func PassedOffset(ctx context.Context, q Querier, name string) (uint64, error) {
	return offset(ctx, q, name, false)
}

func offset(ctx context.Context, q Querier, name string, projected bool) (uint64, error) {
	var seq int64
	var err error
	sql := `SELECT coalesce(max(stream_seq), 0) FROM projector_offsets WHERE name = $1`
	if name == "" {
		// A partition without a row has committed nothing yet.
		sql = `SELECT coalesce(CASE
			WHEN NOT bool_or(partitions IS NOT NULL) THEN max(stream_seq)
			WHEN count(*) FILTER (WHERE partitions IS NOT NULL) < max(partitions) THEN 0
			ELSE min(stream_seq) FILTER (WHERE partitions IS NOT NULL) END, 0)
			FROM projector_offsets WHERE $1 = ''`
	}
	if projected {
		sql = `SELECT least((` + sql + `), coalesce((SELECT min(seq) - 1 FROM pending_events), 9223372036854775807))`
	}
	err = q.QueryRow(ctx, sql, name).Scan(&seq)
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
