// Package pgdump renders every projection table as canonical text, one
// line per row in key order, without wall-clock columns, so two
// projections of the same log can be compared line by line (a rebuild
// against the live projection, a crashed-and-resumed projector against an
// uninterrupted one).
package pgdump

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Queries list every projection table in a canonical order. The
// projector_offsets row is keyed by the projector's name, which differs
// between a live projection and a rebuild, so only its sequence is kept.
var Queries = []string{
	`SELECT pool, seq, id, type, v, time, producer, data::text, refused, encode(prev_hash, 'hex'), encode(hash, 'hex') FROM events ORDER BY pool, seq`,
	`SELECT * FROM consumers ORDER BY pool, path`,
	`SELECT * FROM hosts ORDER BY pool, name`,
	`SELECT * FROM allocations ORDER BY pool, consumer, host`,
	`SELECT * FROM consumer_state ORDER BY pool, consumer`,
	`SELECT * FROM decisions ORDER BY pool, event_seq, ordinal`,
	`SELECT * FROM allocation_history ORDER BY pool, consumer, valid_from_seq`,
	`SELECT pool, last_seq, encode(state_hash, 'hex'), encode(chain_hash, 'hex') FROM checkpoints ORDER BY pool`,
	`SELECT stream_seq FROM projector_offsets ORDER BY stream_seq`,
	`SELECT pool, seq, format, encode(sha256(state), 'hex'), encode(state_hash, 'hex') FROM snapshots ORDER BY pool, seq`,
}

// Tables returns every row of every projection table as text.
func Tables(ctx context.Context, db *pgxpool.Pool) ([]string, error) {
	var out []string
	for qi, q := range Queries {
		rows, err := db.Query(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
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

// Diff returns the first line where two dumps differ, or "" when equal.
func Diff(want, got []string) string {
	for i := range max(len(want), len(got)) {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n  want %s\n  got  %s", i, w, g)
		}
	}
	return ""
}
