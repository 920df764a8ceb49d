package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
)

// Divergence is the first place where the projection and the replayed log
// disagree.
type Divergence struct {
	Pool     string
	Seq      uint64 // 0 when the divergence is in the final state only
	What     string
	Expected string
	Found    string
}

func (d *Divergence) Error() string {
	at := "final state"
	if d.Seq > 0 {
		at = fmt.Sprintf("sequence %d", d.Seq)
	}
	return fmt.Sprintf("pool %s, %s: %s\n  expected (replayed log): %s\n  found (projection):      %s", d.Pool, at, d.What, d.Expected, d.Found)
}

// Report sums up a verification that found no divergence.
type Report struct {
	Pools  int
	Events int
	// Offset is the projection's committed stream sequence in the
	// snapshot verify read (projector_offsets), and UpTo the last
	// sequence it compared: the furthest checkpoint of the pools verified.
	// Events after a pool's checkpoint were not projected yet in that
	// snapshot and are not compared.
	Offset, UpTo uint64
	// Unauthenticated names the events the fold refused because no
	// trusted key signed them (forged, or published around the ledger):
	// consistent with the projection, but an operator must look.
	Unauthenticated []Refusal
}

// Refusal is one refused event, by pool and sequence.
type Refusal struct {
	Pool   string
	Seq    uint64
	ID     string
	Reason string
}

// Verify replays the log from offset from (each pool from its nearest
// snapshot) and compares it with the projection in db: every event copy,
// hash-chain link and decision, then every pool's final allocations,
// consumer state (ownership figures included), ownership and checkpoint.
// It returns the first *Divergence as the error. progress, if not nil, is
// called as events are checked. keys, when not nil, are the trusted keys
// the projector was given; opts make its pools as the projector's were
// made (WithDevelopmentRules for a projector of ledger dev
// --rules-development).
//
// Everything it reads from PostgreSQL comes from one read-only REPEATABLE
// READ transaction: one consistent snapshot of the projection, taken at a
// commit of the projector. Each pool is replayed up to exactly its
// checkpoint in that snapshot (checkpoints.last_seq) and compared there,
// so appends and projection going on meanwhile can never show as a
// divergence; later events are not compared (Report.UpTo says how far it
// went).
func Verify(ctx context.Context, js jetstream.JetStream, db *pgxpool.Pool, keys *signing.Keyring, from uint64, pool string, progress func(checked int), opts ...Option) (Report, error) {
	if pool != "" {
		// A name with a wildcard would be a filter over other pools.
		if err := stream.ValidatePool(pool); err != nil {
			return Report{}, err
		}
	}
	var rep Report
	err := query.ReadOnly(ctx, db, func(q query.Querier) error {
		var err error
		rep, err = verifySnapshot(ctx, js, q, keys, from, pool, progress, opts)
		return err
	})
	return rep, err
}

// errPastSnapshot ends the read of the log after the last sequence the
// snapshot covers.
var errPastSnapshot = errors.New("past the snapshot")

func verifySnapshot(ctx context.Context, js jetstream.JetStream, q query.Querier, keys *signing.Keyring, from uint64, pool string, progress func(checked int), opts []Option) (Report, error) {
	snap, err := readSnapshot(ctx, q, pool)
	if err != nil {
		return Report{}, err
	}
	r := newReplayer(q, from)
	for _, o := range opts {
		o(r)
	}
	r.Trust(keys)
	var forged []Refusal
	filter := "ledger.>"
	if pool != "" {
		filter = stream.PoolFilter(pool)
	}
	readFrom, err := r.ReadFrom(ctx, pool)
	if err != nil {
		return Report{}, err
	}
	c := &checker{db: q, from: max(from, 1), lastQuery: time.Now()}
	if c.keepAlive, err = keepAliveEvery(ctx, q); err != nil {
		return Report{}, err
	}
	err = ReadLogTrusted(ctx, js, readFrom, filter, keys, func(m Message) error {
		seq := m.Stored.Seq
		if seq > snap.last() {
			return errPastSnapshot
		}
		if cp, ok := snap.checkpoints[m.Pool]; !ok || seq > cp {
			return snap.unprojected(m.Pool, seq, cp)
		}
		ev, ok, err := r.Fold(ctx, m)
		if err != nil || !ok {
			return err
		}
		c.noteChanges(ev)
		if ev.Result.Refused == projections.CodeUnauthenticated {
			forged = append(forged, Refusal{Pool: m.Pool, Seq: seq, ID: m.Stored.Envelope.ID, Reason: ev.Result.RefusalDetail})
		}
		if seq < c.from {
			return c.keepBusy(ctx)
		}
		c.pending = append(c.pending, ev)
		if len(c.pending) >= 2000 || time.Since(c.lastQuery) >= c.keepAlive {
			if err := c.flush(ctx); err != nil {
				return err
			}
			if progress != nil {
				progress(c.checked)
			}
		}
		return nil
	})
	if errors.Is(err, errPastSnapshot) {
		err = nil
	}
	if err == nil {
		err = c.flush(ctx)
	}
	if err != nil {
		return Report{}, err
	}
	pools := snap.pools()
	if pool != "" && len(pools) == 0 {
		if _, halted := snap.halted[pool]; !halted {
			return Report{}, fmt.Errorf("pool %s: the projection holds none of its events (at sequence %d)", pool, snap.offset)
		}
	}
	for _, name := range pools {
		if err := c.finalState(ctx, name, r); err != nil {
			return Report{}, err
		}
	}
	return Report{Pools: len(pools), Events: c.checked, Offset: snap.offset, UpTo: snap.last(), Unauthenticated: forged}, nil
}

// projectionSnapshot is where the projection stands in the transaction
// verify reads: the committed offset, each pool's checkpoint, and the
// halted pools.
type projectionSnapshot struct {
	offset      uint64
	checkpoints map[string]uint64 // pool -> checkpoints.last_seq
	halted      map[string]uint64 // pool -> the sequence whose fold failed
	pending     map[query.Key]bool
}

func readSnapshot(ctx context.Context, q query.Querier, pool string) (projectionSnapshot, error) {
	var s projectionSnapshot
	var err error
	if s.offset, err = query.PassedOffset(ctx, q, ""); err != nil {
		return s, err
	}
	if s.checkpoints, err = query.AllProjectedSeqs(ctx, q); err != nil {
		return s, err
	}
	if pool != "" {
		s.checkpoints = map[string]uint64{pool: s.checkpoints[pool]}
		if s.checkpoints[pool] == 0 {
			delete(s.checkpoints, pool)
		}
	}
	if s.halted, err = query.HaltedSeqs(ctx, q); err != nil {
		return s, err
	}
	if s.pending, err = query.PendingEvents(ctx, q); err != nil {
		return s, err
	}
	return s, nil
}

// last is the last sequence the snapshot covers: the projector's offset,
// or a pool's checkpoint beyond it.
func (s projectionSnapshot) last() uint64 {
	last := s.offset
	for _, seq := range s.checkpoints {
		last = max(last, seq)
	}
	return last
}

func (s projectionSnapshot) pools() []string {
	return slices.Sorted(maps.Keys(s.checkpoints))
}

// unprojected judges an event of pool after its checkpoint cp (0: the
// pool has none): not projected yet when it is past the committed offset,
// set aside for a busy pool (pending_events), or when the pool is halted
// at or before it; otherwise the offset says the projection holds it and
// the checkpoint says it does not, so a checkpoint was changed or
// removed.
func (s projectionSnapshot) unprojected(pool string, seq, cp uint64) error {
	if seq > s.offset || s.pending[query.Key{Pool: pool, Seq: seq}] {
		return nil
	}
	if h, ok := s.halted[pool]; ok && h <= seq {
		return nil
	}
	found := "no checkpoint row"
	if cp > 0 {
		found = fmt.Sprintf("checkpoints.last_seq %d", cp)
	}
	return &Divergence{Pool: pool, Seq: seq, What: fmt.Sprintf("the projection's offset (%d) covers this event but the pool's checkpoint does not (a checkpoint was changed or removed)", s.offset),
		Expected: fmt.Sprintf("a checkpoint at or after %d", seq), Found: found}
}

type checker struct {
	db         query.Querier // the transaction of the snapshot
	from       uint64
	pending    []Event
	checked    int
	lastChange map[lastKey]uint64
	// lastQuery is when the transaction last ran a statement, keepAlive
	// how long it may go without one (keepAliveEvery).
	lastQuery time.Time
	keepAlive time.Duration
}

// keepAliveEvery is how often verify's transaction must run a statement
// while the log is folded: a third of the session's
// idle_in_transaction_session_timeout, and at most 20 s (ledger dev's
// guard ends a reporting session idle in a transaction for a minute,
// whatever the session set). Between two statements verify folds up to
// 2,000 events; for a pool of thousands of consumers and hosts that
// took minutes, and PostgreSQL ended the session ("terminating
// connection due to idle-in-transaction timeout"): such a pool could
// not be verified at all (helper-41, round 10; decision 484).
func keepAliveEvery(ctx context.Context, q query.Querier) (time.Duration, error) {
	var ms int64
	if err := q.QueryRow(ctx, `SELECT setting::bigint FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'`).Scan(&ms); err != nil {
		return 0, fmt.Errorf("read idle_in_transaction_session_timeout: %w", err)
	}
	every := 20 * time.Second
	if ms > 0 {
		every = min(every, time.Duration(ms)*time.Millisecond/3)
	}
	return every, nil
}

// keepBusy runs a statement in the transaction when it has run none for
// keepAlive (events folded before --from are not compared, so no flush
// queries for them).
func (c *checker) keepBusy(ctx context.Context) error {
	if time.Since(c.lastQuery) < c.keepAlive {
		return nil
	}
	var one int
	if err := c.db.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("keep the snapshot's transaction busy: %w", err)
	}
	c.lastQuery = time.Now()
	return nil
}

// flush compares a chunk of replayed events with their rows.
func (c *checker) flush(ctx context.Context) error {
	if len(c.pending) == 0 {
		return c.keepBusy(ctx)
	}
	rows, err := loadRows(ctx, c.db, c.pending)
	c.lastQuery = time.Now()
	if err != nil {
		return err
	}
	for _, ev := range c.pending {
		if d := compareEvent(ev, rows); d != nil {
			return d
		}
		c.checked++
	}
	c.pending = c.pending[:0]
	return nil
}

func compareEvent(ev Event, rows map[query.Key]*stored) *Divergence {
	div := func(what, want, got string) *Divergence {
		return &Divergence{Pool: ev.Pool.Name(), Seq: ev.Stored.Seq, What: what, Expected: want, Found: got}
	}
	row := rows[query.Key{Pool: ev.Message.Pool, Seq: ev.Stored.Seq}]
	if row == nil {
		return div("the event is missing from the events table", "a row", "none")
	}
	if msg := row.event.differs(ev); msg != "" {
		return div("the event copy differs: "+msg, describeEnvelope(ev), row.event.describe())
	}
	if !bytes.Equal(row.event.PrevHash, ev.Prev[:]) || !bytes.Equal(row.event.Hash, ev.Link[:]) {
		return div("the hash chain differs (an earlier row, or this one, was changed)", fmt.Sprintf("%x", ev.Link[:8]), fmt.Sprintf("%x", row.event.Hash[:min(8, len(row.event.Hash))]))
	}
	want := ev.Result.Decisions
	for i := 0; i < max(len(want), len(row.decisions)); i++ {
		switch {
		case i >= len(row.decisions):
			return div(fmt.Sprintf("decision %d is missing", i), describeDecision(want[i]), "none")
		case i >= len(want):
			return div(fmt.Sprintf("decision %d should not exist", i), "none", row.decisions[i].describe())
		case !row.decisions[i].equals(want[i]):
			return div(fmt.Sprintf("decision %d differs", i), describeDecision(want[i]), row.decisions[i].describe())
		}
	}
	return nil
}
