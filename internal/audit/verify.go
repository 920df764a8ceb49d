package audit

import (
	"bytes"
	"context"
	"fmt"

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
// consumer state (ownership figures included), ownership and checkpoint. It returns the first *Divergence as the
// error. progress, if not nil, is called as events are checked.
// keys, when not nil, are the trusted keys the projector was given.
func Verify(ctx context.Context, js jetstream.JetStream, db *pgxpool.Pool, keys *signing.Keyring, from uint64, pool string, progress func(checked int)) (Report, error) {
	r := NewReplayer(db, from)
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
	committed, err := query.ProjectorOffset(ctx, db, "")
	if err != nil {
		return Report{}, err
	}
	c := &checker{db: db, from: max(from, 1)}
	err = ReadLog(ctx, js, readFrom, filter, func(m Message) error {
		if m.Stored.Seq > committed {
			return nil // not projected yet: nothing to compare
		}
		ev, ok, err := r.Fold(ctx, m)
		if err != nil || !ok {
			return err
		}
		c.noteChanges(ev)
		if ev.Result.Refused == projections.CodeUnauthenticated {
			forged = append(forged, Refusal{Pool: m.Pool, Seq: m.Stored.Seq, ID: m.Stored.Envelope.ID, Reason: ev.Result.RefusalDetail})
		}
		if m.Stored.Seq < c.from {
			return nil
		}
		c.pending = append(c.pending, ev)
		if len(c.pending) >= 2000 {
			if err := c.flush(ctx); err != nil {
				return err
			}
			if progress != nil {
				progress(c.checked)
			}
		}
		return nil
	})
	if err == nil {
		err = c.flush(ctx)
	}
	if err != nil {
		return Report{}, err
	}
	pools, err := poolsToCheck(ctx, db, pool, r)
	if err != nil {
		return Report{}, err
	}
	for _, name := range pools {
		if err := c.finalState(ctx, name, r); err != nil {
			return Report{}, err
		}
	}
	return Report{Pools: len(pools), Events: c.checked, Unauthenticated: forged}, nil
}

type checker struct {
	db         *pgxpool.Pool
	from       uint64
	pending    []Event
	checked    int
	lastChange map[lastKey]uint64
}

// flush compares a chunk of replayed events with their rows.
func (c *checker) flush(ctx context.Context) error {
	if len(c.pending) == 0 {
		return nil
	}
	rows, err := loadRows(ctx, c.db, c.pending)
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

func poolsToCheck(ctx context.Context, db *pgxpool.Pool, pool string, r *Replayer) ([]string, error) {
	if pool != "" {
		return []string{pool}, nil
	}
	known, err := r.knownPools(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, p := range known {
		seen[p] = true
	}
	for name := range r.Pools() {
		if !seen[name] {
			known = append(known, name)
		}
	}
	sortStrings(known)
	return known, nil
}
