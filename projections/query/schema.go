package query

import (
	"context"
	"fmt"
)

// Index is a secondary index of the schema: one that backs no constraint.
type Index struct {
	Name       string
	Definition string // CREATE INDEX statement that recreates it
}

// SecondaryIndexes lists the indexes of the current schema that back no
// constraint, by name; a bulk load drops them and recreates them once at
// the end.
func SecondaryIndexes(ctx context.Context, q Querier) ([]Index, error) {
	rows, err := q.Query(ctx, `
		SELECT i.indexname, i.indexdef FROM pg_indexes i
		WHERE i.schemaname = current_schema()
		  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)
		ORDER BY i.indexname`)
	if err != nil {
		return nil, fmt.Errorf("list indexes: %w", err)
	}
	defer rows.Close()
	var out []Index
	for rows.Next() {
		var ix Index
		if err := rows.Scan(&ix.Name, &ix.Definition); err != nil {
			return nil, fmt.Errorf("list indexes: %w", err)
		}
		out = append(out, ix)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list indexes: %w", err)
	}
	return out, nil
}
