package query

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ConsumerState is a row of consumer_state: a consumer's reportable state
// after the last applied event (for a parent, demand and allocated are
// sums over its leaves).
type ConsumerState struct {
	Path         string
	Leaf         bool
	Demand       int64
	Effective    int64
	Planned      int64
	Target       int64
	Allocated    int64
	Borrowed     int64
	WaitingSince *int64 // nil when no demand is unmet
}

// HostAllocation is a row of allocations: slots a leaf holds on a host.
type HostAllocation struct {
	Consumer string
	Host     string
	Slots    int64
}

// ConsumerSlots is how many slots a consumer held.
type ConsumerSlots struct {
	Consumer string
	Slots    int64
}

// Allocations is a pool's projected state. Read it inside [ReadOnly] so
// Seq and the rows agree.
type Allocations struct {
	Pool      string
	Seq       uint64 // last event applied, 0 when none
	Consumers []ConsumerState
	Hosts     []HostAllocation
}

// ConsumerStates returns the consumer_state rows of pool in path order.
func ConsumerStates(ctx context.Context, q Querier, pool string) ([]ConsumerState, error) {
	rows, _ := q.Query(ctx, `SELECT consumer, leaf, demand, effective, planned, target, allocated, borrowed, waiting_since
		FROM consumer_state WHERE pool = $1 ORDER BY consumer`, pool)
	out, err := pgx.AppendRows([]ConsumerState{}, rows, func(row pgx.CollectableRow) (ConsumerState, error) {
		var c ConsumerState
		err := row.Scan(&c.Path, &c.Leaf, &c.Demand, &c.Effective, &c.Planned, &c.Target, &c.Allocated, &c.Borrowed, &c.WaitingSince)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("consumer_state: %w", err)
	}
	return out, nil
}

// HostAllocations returns the allocations rows of pool in (consumer, host)
// order.
func HostAllocations(ctx context.Context, q Querier, pool string) ([]HostAllocation, error) {
	rows, _ := q.Query(ctx, `SELECT consumer, host, slots FROM allocations WHERE pool = $1 ORDER BY consumer, host`, pool)
	out, err := pgx.AppendRows([]HostAllocation{}, rows, pgx.RowToStructByPos[HostAllocation])
	if err != nil {
		return nil, fmt.Errorf("allocations: %w", err)
	}
	return out, nil
}

// PoolAllocations reads a pool's checkpoint sequence, consumer states and
// host allocations; run it inside [ReadOnly] for one consistent answer.
func PoolAllocations(ctx context.Context, q Querier, pool string) (Allocations, error) {
	a := Allocations{Pool: pool}
	var err error
	if a.Seq, err = ProjectedSeq(ctx, q, pool); err != nil {
		return a, err
	}
	if a.Consumers, err = ConsumerStates(ctx, q, pool); err != nil {
		return a, err
	}
	a.Hosts, err = HostAllocations(ctx, q, pool)
	return a, err
}

// AllocationsAsOf returns the slots of every consumer of pool (leaves and
// parents) holding any just after the event with sequence seq was
// applied, in path order (the SQL function allocations_as_of).
func AllocationsAsOf(ctx context.Context, q Querier, pool string, seq uint64) ([]ConsumerSlots, error) {
	rows, _ := q.Query(ctx, `SELECT consumer, slots FROM allocations_as_of($1, $2)`, pool, int64(seq))
	out, err := pgx.AppendRows([]ConsumerSlots{}, rows, pgx.RowToStructByPos[ConsumerSlots])
	if err != nil {
		return nil, fmt.Errorf("allocations of pool %s as of %d: %w", pool, seq, err)
	}
	return out, nil
}

// AllocationsAsOfTime is AllocationsAsOf at the pool's last event at or
// before t (the SQL function allocations_as_of_time).
func AllocationsAsOfTime(ctx context.Context, q Querier, pool string, t time.Time) ([]ConsumerSlots, error) {
	rows, _ := q.Query(ctx, `SELECT consumer, slots FROM allocations_as_of_time($1, $2)`, pool, t)
	out, err := pgx.AppendRows([]ConsumerSlots{}, rows, pgx.RowToStructByPos[ConsumerSlots])
	if err != nil {
		return nil, fmt.Errorf("allocations of pool %s at %s: %w", pool, t.Format(time.RFC3339Nano), err)
	}
	return out, nil
}
