package pgdump

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cluster-ledger/ledger/projections/query"
)

// Tables returns every row of every projection table as text
// (query.Dump).
func Tables(ctx context.Context, db *pgxpool.Pool) ([]string, error) {
	return query.Dump(ctx, db)
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
