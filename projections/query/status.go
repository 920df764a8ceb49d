package query

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Offset is a row of projector_offsets: where one projector (or one
// partition of a partitioned deployment) has committed to.
type Offset struct {
	Name string
	// Partition and Partitions are nil for an unpartitioned projector,
	// which folds every pool.
	Partition  *int
	Partitions *int
	// Owner is the instance that committed the row last ("" before
	// migration 0005's projectors wrote it).
	Owner     string
	Seq       uint64
	UpdatedAt time.Time
}

// ProjectorOffsets lists projector_offsets in name order, at most limit
// rows (a deployment has one per partition, so a few dozen at most).
func ProjectorOffsets(ctx context.Context, q Querier, limit int) ([]Offset, error) {
	rows, err := q.Query(ctx, `SELECT name, partition, partitions, owner, stream_seq, updated_at
FROM projector_offsets ORDER BY partitions NULLS FIRST, partition NULLS FIRST, name LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("projector offsets: %w", err)
	}
	var out []Offset
	var o Offset
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&o.Name, &o.Partition, &o.Partitions, &o.Owner, &seq, &o.UpdatedAt}, func() error {
		o.Seq = uint64(seq)
		out = append(out, o)
		o = Offset{}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("projector offsets: %w", err)
	}
	return out, nil
}

// Halted is a row of halted_pools: a pool whose projection stopped at Seq
// because folding that event failed.
type Halted struct {
	Pool     string
	Seq      uint64
	Reason   string // at most 500 characters of it
	HaltedAt time.Time
}

// HaltedPools lists halted_pools in pool order, at most limit rows.
func HaltedPools(ctx context.Context, q Querier, limit int) ([]Halted, error) {
	rows, err := q.Query(ctx, `SELECT pool, seq, left(reason, 500), halted_at FROM halted_pools ORDER BY pool LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("halted pools: %w", err)
	}
	var out []Halted
	var h Halted
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&h.Pool, &seq, &h.Reason, &h.HaltedAt}, func() error {
		h.Seq = uint64(seq)
		out = append(out, h)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("halted pools: %w", err)
	}
	return out, nil
}

// HaltedSeqs is every halted pool with the sequence whose fold failed.
func HaltedSeqs(ctx context.Context, q Querier) (map[string]uint64, error) {
	rows, _ := q.Query(ctx, `SELECT pool, seq FROM halted_pools`)
	out := map[string]uint64{}
	var pool string
	var seq int64
	_, err := pgx.ForEachRow(rows, []any{&pool, &seq}, func() error {
		out[pool] = uint64(seq)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("halted pools: %w", err)
	}
	return out, nil
}

// PendingEvents is every event the projector has set aside for a busy
// pool (pending_events): below its offset, not folded yet.
func PendingEvents(ctx context.Context, q Querier) (map[Key]bool, error) {
	rows, _ := q.Query(ctx, `SELECT pool, seq FROM pending_events`)
	out := map[Key]bool{}
	var pool string
	var seq int64
	_, err := pgx.ForEachRow(rows, []any{&pool, &seq}, func() error {
		out[Key{Pool: pool, Seq: uint64(seq)}] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pending events: %w", err)
	}
	return out, nil
}

// SetAside is what the projector holds set aside for one busy pool
// (pending_events): below its committed offset, not folded yet.
type SetAside struct {
	Pool   string
	Events uint64
	// Oldest is when the stream stored the oldest of them.
	Oldest time.Time
}

// SetAsidePools is every pool with events set aside, at most limit rows
// (most events first).
func SetAsidePools(ctx context.Context, q Querier, limit int) ([]SetAside, error) {
	rows, _ := q.Query(ctx, `SELECT pool, count(*), min(stored_at) FROM pending_events GROUP BY pool ORDER BY count(*) DESC, pool LIMIT $1`, limit)
	var out []SetAside
	var a SetAside
	var n int64
	_, err := pgx.ForEachRow(rows, []any{&a.Pool, &n, &a.Oldest}, func() error {
		a.Events = uint64(n)
		out = append(out, a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("events set aside: %w", err)
	}
	return out, nil
}

// Covers reports whether the projector of row o folds pool: every pool
// for an unpartitioned projector, those of its partition otherwise
// (partitionOf is projections.PartitionOf, which this package cannot
// import).
func (o Offset) Covers(pool string, partitionOf func(pool string, n int) int) bool {
	if o.Partition == nil || o.Partitions == nil {
		return true
	}
	return partitionOf(pool, *o.Partitions) == *o.Partition
}
