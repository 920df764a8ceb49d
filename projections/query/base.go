package query

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Base is an engine state of a pool the projector stored: a snapshot
// (snapshots) or the state it saved when it let the pool go (saved_states).
type Base struct {
	Seq       uint64 // the last event folded into State
	State     []byte
	StateHash []byte // as stored with it
	Saved     bool   // from saved_states, not snapshots
}

// NewestBase returns pool's newest snapshot or saved state of the given
// serialisation format at or below atMost, whichever is newer: where a
// reader that trusts the projection starts folding the pool (the ledger
// API's view after a restart) instead of at its first event.
func NewestBase(ctx context.Context, q Querier, pool string, atMost uint64, format int) (b Base, ok bool, err error) {
	var seq int64
	err = q.QueryRow(ctx, `
		SELECT seq, state, state_hash, saved FROM (
		    (SELECT seq, state, state_hash, false AS saved FROM snapshots
		        WHERE pool = $1 AND seq <= $2 AND format = $3 ORDER BY seq DESC LIMIT 1)
		    UNION ALL
		    (SELECT seq, state, state_hash, true AS saved FROM saved_states
		        WHERE pool = $1 AND seq <= $2 AND format = $3)
		) b ORDER BY seq DESC, saved LIMIT 1`, pool, int64(min(atMost, MaxSeq)), format).Scan(&seq, &b.State, &b.StateHash, &b.Saved)
	if notFound(err) {
		return Base{}, false, nil
	}
	if err != nil {
		return Base{}, false, fmt.Errorf("newest state of pool %s: %w", pool, err)
	}
	b.Seq = uint64(seq)
	return b, true, nil
}

// StoredID is an event id of a pool with where the fold met it first and
// where it applied it (0: never).
type StoredID struct {
	ID             string
	First, Applied uint64
}

// StoredIDs returns every non-empty id of pool's events up to sequence
// upTo (included), once each, in no particular order: what a reader that
// starts from a state at upTo needs to answer retries of the events
// before it (the ledger API's view).
func StoredIDs(ctx context.Context, q Querier, pool string, upTo uint64) ([]StoredID, error) {
	rows, err := q.Query(ctx, `SELECT id, min(seq), coalesce(min(seq) FILTER (WHERE refused IS NULL), 0)
		FROM events WHERE pool = $1 AND seq <= $2 AND id <> '' GROUP BY id`, pool, int64(min(upTo, MaxSeq)))
	if err != nil {
		return nil, fmt.Errorf("ids of pool %s: %w", pool, err)
	}
	ids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StoredID, error) {
		var a StoredID
		var first, applied int64
		err := r.Scan(&a.ID, &first, &applied)
		a.First, a.Applied = uint64(first), uint64(applied)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("ids of pool %s: %w", pool, err)
	}
	return ids, nil
}

// LastAcceptedTime is the time of the last event of pool up to upTo that
// the ledger took (not refused; zero when none): the API stamps new
// events no earlier. The events the ledger took are stamped in time
// order, so the last by sequence is the latest.
func LastAcceptedTime(ctx context.Context, q Querier, pool string, upTo uint64) (time.Time, error) {
	var at time.Time
	err := q.QueryRow(ctx, `SELECT time FROM events WHERE pool = $1 AND seq <= $2 AND refused IS NULL ORDER BY seq DESC LIMIT 1`,
		pool, int64(min(upTo, MaxSeq))).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("last accepted event of pool %s: %w", pool, err)
	}
	return at.UTC(), nil
}
