package query

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Owned is a row of ownership: slots of a host a consumer owns now.
type Owned struct {
	Consumer string
	Host     string
	Slots    int64
}

// Ownership returns the ownership rows of pool in (consumer, host) order.
func Ownership(ctx context.Context, q Querier, pool string) ([]Owned, error) {
	rows, _ := q.Query(ctx, `SELECT consumer, host, slots FROM ownership WHERE pool = $1 ORDER BY consumer, host`, pool)
	out, err := pgx.AppendRows([]Owned{}, rows, pgx.RowToStructByPos[Owned])
	if err != nil {
		return nil, fmt.Errorf("ownership: %w", err)
	}
	return out, nil
}

// OwnersByHost returns the ownership rows of pool by host, the consumer
// owning most first, then path (a parent's row includes its children's).
func OwnersByHost(ctx context.Context, q Querier, pool string) ([]Owned, error) {
	rows, _ := q.Query(ctx, `SELECT consumer, host, slots FROM ownership WHERE pool = $1
		ORDER BY host, slots DESC, consumer`, pool)
	out, err := pgx.AppendRows([]Owned{}, rows, pgx.RowToStructByPos[Owned])
	if err != nil {
		return nil, fmt.Errorf("ownership: %w", err)
	}
	return out, nil
}

// OwnersAt answers "who owned host at time t": the consumers owning
// slots of the host just after the pool's last event at or before t, in
// path order (ownership_history).
func OwnersAt(ctx context.Context, q Querier, pool, host string, t time.Time) ([]Owned, error) {
	rows, _ := q.Query(ctx, sqlOwnersAt, pool, host, t)
	out, err := pgx.AppendRows([]Owned{}, rows, pgx.RowToStructByPos[Owned])
	if err != nil {
		return nil, fmt.Errorf("owners of %s in pool %s at %s: %w", host, pool, t.Format(time.RFC3339Nano), err)
	}
	return out, nil
}

// sqlOwnersAt is README's "who owned host X at time T".
const sqlOwnersAt = `SELECT consumer, host, slots FROM ownership_history
WHERE pool = $1 AND host = $2
  AND valid_from_time <= $3 AND (valid_to_time IS NULL OR valid_to_time > $3)
ORDER BY consumer`

// ConsumerOwnership is the ownership part of a consumer_state row.
type ConsumerOwnership struct {
	Path    string
	Owned   int64
	OwnUsed int64
	LentOut int64
	// Sources is the sources column as JSON; nil for NULL (a parent, or a
	// pool without ownership).
	Sources json.RawMessage
}

// ConsumerOwnerships returns the ownership columns of pool's
// consumer_state rows in path order.
func ConsumerOwnerships(ctx context.Context, q Querier, pool string) ([]ConsumerOwnership, error) {
	rows, _ := q.Query(ctx, `SELECT consumer, owned, own_used, lent_out, sources
		FROM consumer_state WHERE pool = $1 ORDER BY consumer`, pool)
	out, err := pgx.AppendRows([]ConsumerOwnership{}, rows, func(row pgx.CollectableRow) (ConsumerOwnership, error) {
		var c ConsumerOwnership
		var src []byte
		err := row.Scan(&c.Path, &c.Owned, &c.OwnUsed, &c.LentOut, &src)
		if src != nil {
			c.Sources = src
		}
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("consumer_state ownership: %w", err)
	}
	return out, nil
}

// Lending is one row of README's "idle owned slots lent out, by owner,
// per day".
type Lending struct {
	Day       time.Time
	Owner     string
	Lent      int64 // slots lent that day (lend decisions)
	Lends     int64 // how many lend decisions
	TakenBack int64 // slots taken back from borrowers that day (return decisions)
}

// LendingByOwnerPerDay runs README's lending report on pool.
func LendingByOwnerPerDay(ctx context.Context, q Querier, pool string) ([]Lending, error) {
	rows, _ := q.Query(ctx, SQLLendingByOwnerPerDay, pool)
	out, err := pgx.AppendRows([]Lending{}, rows, pgx.RowToStructByPos[Lending])
	if err != nil {
		return nil, fmt.Errorf("lending by owner per day: %w", err)
	}
	return out, nil
}

// SQLLendingByOwnerPerDay is README's report "idle owned slots lent out,
// by owner, per day", from the decisions: a lend names the owner in
// from_consumer, a return names it in consumer (the borrower in
// from_consumer). Days are UTC.
const SQLLendingByOwnerPerDay = `SELECT date_trunc('day', e.time AT TIME ZONE 'UTC') AS day,
       CASE d.kind WHEN 'lend' THEN d.from_consumer ELSE d.consumer END AS owner,
       coalesce(sum(d.slots) FILTER (WHERE d.kind = 'lend'), 0) AS slots_lent,
       count(*) FILTER (WHERE d.kind = 'lend') AS lends,
       coalesce(sum(d.slots) FILTER (WHERE d.kind = 'return'), 0) AS slots_taken_back
FROM decisions d JOIN events e ON e.pool = d.pool AND e.seq = d.event_seq
WHERE d.pool = $1 AND d.kind IN ('lend', 'return')
GROUP BY 1, 2 ORDER BY 1, 2`
