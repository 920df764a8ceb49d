package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// Resident pools (docs/decisions.md #183). A site may hold thousands of
// pools, most of them idle at any time; the projector keeps the engine
// state of at most WithResidentPools of them in memory, the ones it
// folded most recently, and lets the others go:
//
//   - A pool is let go (evicted) only once every event of it the
//     projector folded is committed, so PostgreSQL holds exactly its
//     state; if it folded events since the state was last stored (a
//     snapshot or a saved state), its state is saved (saved_states) with
//     the batch it is let go in.
//   - When an event of a pool not in memory comes, the pool is taken up
//     again as at start (loadPools, rebuild): from its newest snapshot or
//     saved state, folding the log after it up to the checkpoint, and
//     checked against the checkpoint. The pools of a batch are loaded
//     together, in one query.
//   - At start only pools whose state is not stored at their checkpoint
//     (they were in memory at a crash) and halted pools are rebuilt; the
//     others are checked against their checkpoint by hashes and loaded
//     when an event of them comes. A clean stop saves every resident
//     pool's state, so the next start rebuilds none.
//
// What stays in memory of an idle pool is its name and committed
// sequence (Applied).

// DefaultResidentPools is how many pools' engine states the projector
// keeps in memory by default.
const DefaultResidentPools = 1024

// WithResidentPools sets how many pools' engine states the projector
// keeps in memory (default DefaultResidentPools). It may keep more for a
// moment: the pools of the batches not yet committed, and halted pools.
func WithResidentPools(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.resident = n
		}
	}
}

// Resident returns how many pools' engine states the projector holds in
// memory now (any goroutine).
func (p *Projector) Resident() int { return int(p.residentCount.Load()) }

func (p *Projector) resetResident() {
	p.pools = map[string]*poolState{}
	p.lru.Init()
	p.residentCount.Store(0)
}

// addResident makes ps the state of pool name in memory, as the most
// recently used.
func (p *Projector) addResident(name string, ps *poolState) {
	if old := p.pools[name]; old != nil && old.lru != nil {
		p.lru.Remove(old.lru)
	}
	ps.lru = p.lru.PushFront(name)
	p.pools[name] = ps
	p.residentCount.Store(int64(len(p.pools)))
}

// used marks a resident pool as just used.
func (p *Projector) used(ps *poolState) {
	if ps.lru != nil {
		p.lru.MoveToFront(ps.lru)
	}
}

// poolFor returns pool name's state: in memory, taken up again from
// PostgreSQL, or new.
func (p *Projector) poolFor(ctx context.Context, name string) (*poolState, error) {
	if ps := p.pools[name]; ps != nil {
		p.used(ps)
		return ps, nil
	}
	if err := p.load(ctx, []string{name}); err != nil {
		return nil, err
	}
	return p.pools[name], nil
}

// prefetch takes up, in one go, the pools of msgs (this projector's)
// that are not in memory.
func (p *Projector) prefetch(ctx context.Context, msgs []jetstream.Msg) error {
	var missing []string
	seen := map[string]bool{}
	for _, m := range msgs {
		name, err := stream.PoolOf(m.Subject())
		if err != nil || seen[name] || p.pools[name] != nil || !p.mine(name) {
			continue
		}
		seen[name] = true
		missing = append(missing, name)
	}
	for lo := 0; lo < len(missing); lo += loadChunk {
		if err := p.load(ctx, missing[lo:min(lo+loadChunk, len(missing))]); err != nil {
			return err
		}
	}
	return nil
}

// load takes the named pools up from PostgreSQL (rebuild: base, the log
// after it, checked against the checkpoint); a pool without a checkpoint
// starts empty. PostgreSQL unavailable is retried; a pool that does not
// match its checkpoint stops the projector, as at start.
func (p *Projector) load(ctx context.Context, names []string) error {
	start := time.Now()
	var cps map[string]checkpoint
	err := p.retry(ctx, "load pools", func() error {
		var err error
		cps, err = p.loadPools(ctx, names)
		return classify(err)
	})
	if err != nil {
		return err
	}
	rebuilt := 0
	for _, name := range names {
		cp, ok := cps[name]
		if !ok {
			p.addResident(name, newPoolState(p.newDomainPool(name), zeroHash))
			continue
		}
		var ps *poolState
		err := p.retry(ctx, "rebuild pool "+name, func() error {
			var err error
			ps, err = p.rebuild(ctx, cp, slog.LevelDebug)
			if errors.Is(err, ErrNeedsNewer) {
				return fatal(err) // not retried: halted below
			}
			return err
		})
		if nn, ok := errors.AsType[*NeedsNewerError](err); ok {
			if ps, err = p.haltUnfoldable(ctx, name, nn); err != nil {
				return err
			}
		}
		if err != nil {
			return err
		}
		rebuilt++
		p.addResident(name, ps)
	}
	if rebuilt > 0 {
		p.cfg.log.Debug("projector: pools taken up again", "pools", rebuilt, "took", time.Since(start))
	}
	return nil
}

// evict lets the least recently used pools go until at most the bound
// are resident, saving the state of those that folded events since it
// was last stored (into b, committed with it). A pool is let go only
// once its every folded event is committed and when it is not in b.
func (p *Projector) evict(b *batch) {
	defer func() { p.residentCount.Store(int64(len(p.pools))) }()
	committed := p.committedSeq.Load()
	for e := p.lru.Back(); e != nil && len(p.pools) > p.cfg.resident; {
		name := e.Value.(string)
		ps := p.pools[name]
		prev := e.Prev()
		switch {
		case ps.halted || p.deferred.has(name):
			// A halted pool stays (its state is not its checkpoint's), and
			// so does one with events set aside: look past them.
		case ps.lastSeq > committed || b.pools[name] != nil:
			// Not committed yet; the pools before it in the list are
			// more recent still.
			return
		default:
			if ps.sinceSave > 0 {
				b.saved = append(b.saved, savedRow(name, ps))
			}
			p.lru.Remove(e)
			delete(p.pools, name)
		}
		e = prev
	}
}

const sqlUpsertSaved = `INSERT INTO saved_states (pool, seq, format, state, state_hash, snap_events, snap_cost, saved_at)
SELECT z.*, now() FROM unnest($1::text[], $2::bigint[], $3::int[], $4::bytea[], $5::bytea[], $6::int[], $7::bigint[]) AS z
ON CONFLICT (pool) DO UPDATE SET seq = EXCLUDED.seq, format = EXCLUDED.format, state = EXCLUDED.state,
  state_hash = EXCLUDED.state_hash, snap_events = EXCLUDED.snap_events, snap_cost = EXCLUDED.snap_cost, saved_at = EXCLUDED.saved_at
WHERE saved_states.seq <= EXCLUDED.seq`

// savedRow is a saved_states row of a pool's state now.
func savedRow(name string, ps *poolState) []any {
	h := ps.pool.StateHash()
	return []any{name, int64(ps.pool.Seq()), int32(domain.SnapshotFormat), ps.pool.Snapshot(), h[:], int32(ps.sinceSnap), ps.costSnap}
}

// writeSaved upserts saved_states rows. A saved state is the fold of the
// log up to its sequence, whoever computed it, so it needs no fence: a
// newer one is never replaced by an older one.
func writeSaved(ctx context.Context, tx pgx.Tx, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	cols := make([][]any, 7)
	for _, r := range rows {
		appendCols(cols, r...)
	}
	args := make([]any, len(cols))
	for i, c := range cols {
		args[i] = c
	}
	if _, err := tx.Exec(ctx, sqlUpsertSaved, args...); err != nil {
		return fmt.Errorf("save pool states: %w", err)
	}
	return nil
}

// saveResident saves, when the projector stops or gives its partition
// up, the state of every resident pool that folded events since it was
// last stored, so the next start rebuilds none of them. Everything folded
// must be committed (the writer stopped or drained). Best effort: a pool
// without a saved state is rebuilt from the log at the next start.
func (p *Projector) saveResident() {
	committed := p.committedSeq.Load()
	var rows [][]any
	for name, ps := range p.pools {
		if !ps.halted && ps.sinceSave > 0 && ps.lastSeq <= committed {
			rows = append(rows, savedRow(name, ps))
		}
	}
	if len(rows) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := pgx.BeginFunc(ctx, p.db, func(tx pgx.Tx) error { return writeSaved(ctx, tx, rows) })
	if err != nil {
		p.cfg.log.Warn("projector: could not save the pools' states; the next start folds their events again", "pools", len(rows), "err", err)
		return
	}
	for _, ps := range p.pools {
		if ps.lastSeq <= committed {
			ps.sinceSave = 0
		}
	}
	p.cfg.log.Info("projector: saved the pools' states", "pools", len(rows))
}

// commitSaved writes the saved states of a batch that has no events (the
// pools were let go while the log was idle), in a transaction of their
// own: they need no offset.
func (p *Projector) commitSaved(ctx context.Context, b *batch) error {
	if len(b.saved) == 0 {
		return nil
	}
	return p.retry(ctx, "save pool states", func() error {
		return classify(pgx.BeginFunc(ctx, p.db, func(tx pgx.Tx) error { return writeSaved(ctx, tx, b.saved) }))
	})
}
