package query

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Key names one event of the projection: its pool and stream sequence.
type Key struct {
	Pool string
	Seq  uint64
}

// Event is a row of events: the projection's copy of one event, with the
// fold's refusal and the hash-chain link.
type Event struct {
	ID       string
	Type     string
	V        int32
	Time     time.Time
	Producer string
	Data     []byte  // the payload as JSON text (jsonb normalises it)
	Refused  *string // stable refusal code; nil when the fold applied the event
	// RefusalDetail is the refusal in words (not covered by the chain).
	RefusalDetail *string
	PrevHash      []byte
	Hash          []byte
}

// EventsAt returns the events rows of the given events; an event the
// projection does not hold is absent from the map.
func EventsAt(ctx context.Context, q Querier, keys []Key) (map[Key]Event, error) {
	pools, seqs := unzip(keys)
	rows, err := q.Query(ctx, `
		SELECT e.pool, e.seq, e.id, e.type, e.v, e.time, e.producer, e.data::text, e.refused, e.refusal_detail, e.prev_hash, e.hash, e.time_ns
		FROM events e JOIN unnest($1::text[], $2::bigint[]) AS k(pool, seq) ON e.pool = k.pool AND e.seq = k.seq`, pools, seqs)
	if err != nil {
		return nil, fmt.Errorf("read events rows: %w", err)
	}
	defer rows.Close()
	out := make(map[Key]Event, len(keys))
	for rows.Next() {
		var k Key
		var seq int64
		var e Event
		var data string
		var ns int16
		if err := rows.Scan(&k.Pool, &seq, &e.ID, &e.Type, &e.V, &e.Time, &e.Producer, &data, &e.Refused, &e.RefusalDetail, &e.PrevHash, &e.Hash, &ns); err != nil {
			return nil, fmt.Errorf("read events rows: %w", err)
		}
		// time_ns: the nanoseconds PostgreSQL's microseconds lose, so Time
		// is exactly the time in the log.
		k.Seq, e.Data, e.Time = uint64(seq), []byte(data), e.Time.Add(time.Duration(ns))
		out[k] = e
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read events rows: %w", err)
	}
	return out, nil
}

// StoredEventTimes returns the time of each event of pool after sequence
// after up to and including upTo, as PostgreSQL stores it (to the
// microsecond, without time_ns): the precision of decisions.deadline, so
// that a deadline less its event's time is exactly the grace it was given.
func StoredEventTimes(ctx context.Context, q Querier, pool string, after, upTo uint64) (map[uint64]time.Time, error) {
	rows, err := q.Query(ctx, `SELECT seq, time FROM events WHERE pool = $1 AND seq > $2 AND seq <= $3`, pool, int64(after), int64(upTo))
	if err != nil {
		return nil, fmt.Errorf("read event times: %w", err)
	}
	defer rows.Close()
	out := map[uint64]time.Time{}
	for rows.Next() {
		var seq int64
		var at time.Time
		if err := rows.Scan(&seq, &at); err != nil {
			return nil, fmt.Errorf("read event times: %w", err)
		}
		out[uint64(seq)] = at
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read event times: %w", err)
	}
	return out, nil
}

// DecisionsAt returns the decisions of the given events, each event's in
// the order the fold made them; an event without decisions is absent.
func DecisionsAt(ctx context.Context, q Querier, keys []Key) (map[Key][]Decision, error) {
	pools, seqs := unzip(keys)
	rows, err := q.Query(ctx, `
		SELECT d.pool, d.event_seq, d.ordinal, d.kind, d.consumer, coalesce(d.from_consumer, ''), d.host, d.slots, d.rule, d.deadline
		FROM decisions d JOIN unnest($1::text[], $2::bigint[]) AS k(pool, seq) ON d.pool = k.pool AND d.event_seq = k.seq
		ORDER BY d.pool, d.event_seq, d.ordinal`, pools, seqs)
	if err != nil {
		return nil, fmt.Errorf("read decisions rows: %w", err)
	}
	defer rows.Close()
	out := map[Key][]Decision{}
	for rows.Next() {
		var pool string
		var d Decision
		if err := rows.Scan(&pool, &d.EventSeq, &d.Ordinal, &d.Kind, &d.Consumer, &d.FromConsumer, &d.Host, &d.Slots, &d.Rule, &d.Deadline); err != nil {
			return nil, fmt.Errorf("read decisions rows: %w", err)
		}
		k := Key{pool, d.EventSeq}
		out[k] = append(out[k], d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read decisions rows: %w", err)
	}
	return out, nil
}

func unzip(keys []Key) ([]string, []int64) {
	pools, seqs := make([]string, len(keys)), make([]int64, len(keys))
	for i, k := range keys {
		pools[i], seqs[i] = k.Pool, int64(k.Seq)
	}
	return pools, seqs
}

// Snapshot is a saved pool state with the chain link after its event.
type Snapshot struct {
	Seq       uint64 // last event folded into State
	State     []byte
	ChainHash []byte // events.hash at Seq
}

// SnapshotBefore returns pool's newest snapshot taken strictly before
// sequence before; ok is false when there is none.
func SnapshotBefore(ctx context.Context, q Querier, pool string, before uint64) (s Snapshot, ok bool, err error) {
	var seq int64
	err = q.QueryRow(ctx, `
		SELECT s.seq, s.state, e.hash FROM snapshots s
		JOIN events e ON e.pool = s.pool AND e.seq = s.seq
		WHERE s.pool = $1 AND s.seq < $2 ORDER BY s.seq DESC LIMIT 1`, pool, int64(before)).Scan(&seq, &s.State, &s.ChainHash)
	if notFound(err) {
		return Snapshot{}, false, nil
	}
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("snapshot of pool %s: %w", pool, err)
	}
	s.Seq = uint64(seq)
	return s, true, nil
}

// AppliedIDs returns the ids of pool's events up to sequence upTo
// (included) that the fold applied, refused ones excluded, in no
// particular order: what a replay starting from a snapshot at upTo needs
// to refuse a late duplicate, as the projector does when it resumes.
func AppliedIDs(ctx context.Context, q Querier, pool string, upTo uint64) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT id FROM events WHERE pool = $1 AND seq <= $2 AND refused IS NULL`, pool, int64(upTo))
	if err != nil {
		return nil, fmt.Errorf("applied ids of pool %s: %w", pool, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("applied ids of pool %s: %w", pool, err)
	}
	return ids, nil
}
