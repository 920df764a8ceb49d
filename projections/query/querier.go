package query

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// Querier runs a query: *pgxpool.Pool, pgx.Tx and *pgx.Conn satisfy it.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TxBeginner starts transactions: *pgxpool.Pool and *pgx.Conn satisfy it.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// ErrNoCheckpoint means the projection has applied no event of the pool.
var ErrNoCheckpoint = errors.New("no checkpoint")

// ReadOnly runs fn in one read-only REPEATABLE READ transaction, so every
// answer fn reads comes from the same snapshot (a checkpoint and the rows
// it covers agree even while the projector commits).
func ReadOnly(ctx context.Context, db TxBeginner, fn func(q Querier) error) error {
	return pgx.BeginTxFunc(ctx, db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return fn(tx) })
}

// notFound reports whether err is "no row".
func notFound(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
