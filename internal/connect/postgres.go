package connect

import (
	"context"
	"errors"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/redact"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cluster-ledger/ledger/migrations"
)

// Postgres opens a pool on url and waits until PostgreSQL answers, within
// the Waiter's bound; with migrate it then applies the schema migrations.
func (w *Waiter) Postgres(ctx context.Context, url string, migrate bool) (*pgxpool.Pool, error) {
	if url == "" {
		return nil, errors.New("no database URL: set DATABASE_URL or --database-url")
	}
	db, err := pgxpool.New(ctx, url) // connects lazily
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", redact.Error(err, url))
	}
	err = w.Retry(ctx, "PostgreSQL", url, db.Ping)
	if err == nil && migrate {
		err = migrations.Up(ctx, url) // redacted by migrations
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}
