package query

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// codeUnauthenticated is the refusal code of an event no trusted key
// signed (projections.CodeUnauthenticated; not imported: projections
// imports this package).
const codeUnauthenticated = "unauthenticated"

// RefusedEvent is an event the projector refused, by its place in the log.
type RefusedEvent struct {
	Pool string
	Seq  int64
	ID   string
}

// Unauthenticated lists, in sequence order, at most limit events refused
// as unauthenticated (no trusted key signed them), of pool ("" every
// pool) after sequence after (0: from the start).
func Unauthenticated(ctx context.Context, q Querier, pool string, after uint64, limit int) ([]RefusedEvent, error) {
	rows, _ := q.Query(ctx, `SELECT pool, seq, id FROM events
		WHERE refused = $1 AND ($2 = '' OR pool = $2) AND seq > $3 ORDER BY seq LIMIT $4`,
		codeUnauthenticated, pool, int64(after), limit)
	return pgx.CollectRows(rows, pgx.RowToStructByPos[RefusedEvent])
}
