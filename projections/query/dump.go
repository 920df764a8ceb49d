package query

import (
	"context"
	"fmt"
)

// dumpQueries list every projection table in a canonical order, without
// wall-clock columns. projector_offsets is left out: its rows are a
// projector's resume point (keyed by projector or partition names), not
// the projection, and a rebuild leaves none (docs/decisions.md #148); the
// checkpoints say how far each pool is.
var dumpQueries = []string{
	`SELECT pool, seq, id, type, v, time, producer, data::text, refused, encode(prev_hash, 'hex'), encode(hash, 'hex') FROM events ORDER BY pool, seq`,
	`SELECT * FROM consumers ORDER BY pool, path`,
	`SELECT * FROM hosts ORDER BY pool, name`,
	`SELECT * FROM allocations ORDER BY pool, consumer, host`,
	`SELECT * FROM consumer_state ORDER BY pool, consumer`,
	`SELECT * FROM decisions ORDER BY pool, event_seq, ordinal`,
	`SELECT * FROM allocation_history ORDER BY pool, consumer, valid_from_seq`,
	`SELECT * FROM ownership ORDER BY pool, consumer, host`,
	`SELECT * FROM ownership_history ORDER BY pool, consumer, host, valid_from_seq`,
	`SELECT pool, last_seq, encode(state_hash, 'hex'), encode(chain_hash, 'hex') FROM checkpoints ORDER BY pool`,
	`SELECT pool, seq, format, encode(sha256(state), 'hex'), encode(state_hash, 'hex') FROM snapshots ORDER BY pool, seq`,
}

// Dump returns every row of every projection table as canonical text,
// one line per row in key order, so two projections of the same log can
// be compared line by line (a rebuild against the live projection, a
// resumed projector against an uninterrupted one).
func Dump(ctx context.Context, q Querier) ([]string, error) {
	var out []string
	for qi, sql := range dumpQueries {
		rows, err := q.Query(ctx, sql)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sql, err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, fmt.Sprintf("%d: %v", qi, vals))
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
