package query

import (
	"context"
	"errors"
	"math"

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

// Bounds of the projection's columns. Stream sequences are unsigned
// 64-bit (JetStream's), stored as bigint: a sequence past MaxSeq cannot
// be stored, and the stream would need centuries at millions of events a
// second to reach it. A caller given a sequence beyond it (a URL
// parameter) asks about a point after every stored event, and clamps it
// to MaxSeq; no ordinal (a decision's place within its event) reaches
// MaxOrdinal (an integer column).
const (
	MaxSeq     = math.MaxInt64
	MaxOrdinal = math.MaxInt32
)

// ClampSeq is seq, or MaxSeq when it is beyond what a column holds.
func ClampSeq(seq uint64) uint64 { return min(seq, MaxSeq) }

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
