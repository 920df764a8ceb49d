package projections

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/stream"
)

var zeroHash domain.Hash

// newDomainPool is an empty pool as the projector folds it.
func (p *Projector) newDomainPool(name string) *domain.Pool {
	return domain.NewPool(name, p.cfg.poolOptions()...)
}

// checkpoint is a pool's committed position with the newest usable base
// to rebuild it from: its newest snapshot or saved state at or before it
// (the state itself only when the pool is loaded: loadPools).
type checkpoint struct {
	pool                 string
	lastSeq              uint64
	stateHash, chainHash []byte
	snapSeq              *int64 // the base's sequence; nil: none, fold from the start
	snapState, snapHash  []byte
	snapChain            []byte // events.hash at snapSeq: the chain link to continue from
	// the counts towards the pool's next snapshot at the base (a saved
	// state's; 0 at a snapshot)
	baseEvents int
	baseCost   int64
	open       map[string]openRow
	ownOpen    map[ownKey]openRow // open ownership_history rows
	halted     *halt              // the pool is halted (halted_pools)
}

// sqlBase picks a pool's newest base at or before its checkpoint: its
// newest snapshot or its saved state (saved_states), whichever is newer.
// STATE is replaced by the state column or, to read positions only, by
// NULL, so that the states of thousands of pools are not read at start.
const sqlBase = `(SELECT seq, state_hash, STATE AS state, 0 AS snap_events, 0::bigint AS snap_cost FROM snapshots
        WHERE pool = c.pool AND seq <= c.last_seq AND format = $1 ORDER BY seq DESC LIMIT 1)
    UNION ALL
    (SELECT seq, state_hash, STATE AS state, snap_events, snap_cost FROM saved_states
        WHERE pool = c.pool AND seq <= c.last_seq AND format = $1)
    ORDER BY seq DESC LIMIT 1`

// sqlCheckpoints reads every checkpoint with the position of its base
// (not the state); sqlLoadCheckpoints the named pools' with the state.
var (
	sqlCheckpoints = `SELECT c.pool, c.last_seq, c.state_hash, c.chain_hash, b.seq, b.state, b.state_hash, e.hash, b.snap_events, b.snap_cost
FROM checkpoints c
LEFT JOIN LATERAL (` + strings.ReplaceAll(sqlBase, "STATE", "NULL::bytea") + `) b ON true
LEFT JOIN events e ON e.pool = c.pool AND e.seq = b.seq
ORDER BY c.pool`
	sqlLoadCheckpoints = `SELECT c.pool, c.last_seq, c.state_hash, c.chain_hash, b.seq, b.state, b.state_hash, e.hash, b.snap_events, b.snap_cost
FROM checkpoints c
LEFT JOIN LATERAL (` + strings.ReplaceAll(sqlBase, "STATE", "state") + `) b ON true
LEFT JOIN events e ON e.pool = c.pool AND e.seq = b.seq
WHERE c.pool = ANY($2)`
)

// sqlOpenHistory finds each consumer's newest allocation_history row by
// the primary key (one backward index probe per consumer) and keeps it
// when it is still open; $1 names the pools (NULL: every pool).
const sqlOpenHistory = `SELECT c.pool, c.consumer, h.slots, h.valid_from_seq
FROM consumer_state c
CROSS JOIN LATERAL (
    SELECT slots, valid_from_seq, valid_to_seq FROM allocation_history h
    WHERE h.pool = c.pool AND h.consumer = c.consumer
    ORDER BY valid_from_seq DESC LIMIT 1) h
WHERE h.valid_to_seq IS NULL AND ($1::text[] IS NULL OR c.pool = ANY($1))`

// sqlOpenOwnHistory finds the open ownership_history row of each current
// ownership row the same way (the open rows are the ownership table; a
// mismatch is caught by checkOwnOpen).
const sqlOpenOwnHistory = `SELECT o.pool, o.consumer, o.host, h.slots, h.valid_from_seq
FROM ownership o
CROSS JOIN LATERAL (
    SELECT slots, valid_from_seq, valid_to_seq FROM ownership_history h
    WHERE h.pool = o.pool AND h.consumer = o.consumer AND h.host = o.host
    ORDER BY valid_from_seq DESC LIMIT 1) h
WHERE h.valid_to_seq IS NULL AND ($1::text[] IS NULL OR o.pool = ANY($1))`

// start reads every checkpoint and (re)creates the durable consumer
// after the committed sequence. A pool whose newest snapshot or saved
// state is its checkpoint is checked against it (hashes) and left in
// PostgreSQL until an event of it comes (loadPools); the others, and the
// halted pools, are rebuilt now from their base and the log and checked,
// as before. So a start reads no state of an idle pool, and a pool that
// was in memory at a crash is rebuilt at once.
func (p *Projector) start(ctx context.Context) error {
	if p.cfg.until == 0 {
		// A batch a stopped projector sent whole (one pipelined round
		// trip, commit included) may still be running in PostgreSQL: it
		// holds the offset row's lock until it commits. Wait for it, so
		// that what is read next includes it.
		err := pgx.BeginFunc(ctx, p.db, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, sqlLockOffset, p.offsetName())
			return err
		})
		if err != nil {
			return classify(err)
		}
	}
	committed, cps, err := p.loadCheckpoints(ctx, false)
	if err != nil {
		return classify(err)
	}
	if err := p.checkStream(ctx, cps, committed); err != nil {
		return err
	}
	p.resetResident()
	p.committed = committed
	p.committedSeq.Store(committed)
	p.carry = nil // delivered again after the committed sequence
	if err := p.loadDeferred(ctx); err != nil {
		return classify(err)
	}
	var rebuild []checkpoint
	for _, cp := range cps {
		p.setApplied(cp.pool, cp.lastSeq)
		if cp.halted == nil && cp.snapSeq != nil && uint64(*cp.snapSeq) == cp.lastSeq {
			if err := checkBase(cp); err != nil {
				return err
			}
			continue // loaded when an event of it comes
		}
		rebuild = append(rebuild, cp)
	}
	p.observeStart(len(rebuild))
	for lo := 0; lo < len(rebuild); lo += loadChunk {
		chunk := rebuild[lo:min(lo+loadChunk, len(rebuild))]
		loaded, err := p.loadPools(ctx, poolNames(chunk))
		if err != nil {
			return classify(err)
		}
		for i, meta := range chunk {
			cp, ok := loaded[meta.pool]
			if !ok {
				return fmt.Errorf("pool %s: its checkpoint went away while the projector started", meta.pool)
			}
			ps, err := p.rebuild(ctx, cp, slog.LevelInfo)
			if nn, ok := errors.AsType[*NeedsNewerError](err); ok {
				if ps, err = p.haltUnfoldable(ctx, cp.pool, nn); err != nil {
					return err
				}
				p.addResident(cp.pool, ps)
				continue
			}
			if err != nil {
				return err
			}
			p.observeRebuilt(len(rebuild), lo+i+1, ps.sinceSave)
			p.addResident(cp.pool, ps)
			if meta.halted != nil {
				if err := p.haltedAtStart(ctx, cp.pool, ps, meta.halted.seq); err != nil {
					return err
				}
			}
		}
	}
	for _, name := range p.haltedNoCheckpoint { // halted at its first batch
		ps := newPoolState(p.newDomainPool(name), zeroHash)
		p.addResident(name, ps)
		if err := p.haltedAtStart(ctx, name, ps, p.halted[name]); err != nil {
			return err
		}
	}
	// Every pool of its checkpoints (in name order: past the metrics'
	// pool cap, which ones are labelled does not depend on map order).
	pools := make([]string, 0, len(cps)+len(p.haltedNoCheckpoint))
	for _, cp := range cps {
		pools = append(pools, cp.pool)
	}
	pools = append(pools, p.haltedNoCheckpoint...)
	slices.Sort(pools)
	p.observeLoaded(ctx, pools)
	if p.cfg.part == nil && p.cfg.until == 0 { // a partition's consumer is shared: never reset; WithUntil has none
		if err := p.resetConsumer(ctx); err != nil {
			return err
		}
	}
	p.cfg.log.Info("projector: resumed", "name", p.offsetName(), "committed_seq", committed, "pools", len(cps),
		"rebuilt_now", len(rebuild), "resident_max", p.cfg.resident)
	return nil
}

// loadChunk is how many pools' states one query reads.
const loadChunk = 64

func poolNames(cps []checkpoint) []string {
	names := make([]string, len(cps))
	for i, cp := range cps {
		names[i] = cp.pool
	}
	return names
}

// checkBase checks a pool whose base is its checkpoint: the state and
// the chain link saved with it are those the checkpoint records. The
// state itself is checked against its hash when the pool is loaded
// (restore).
func checkBase(cp checkpoint) error {
	if !bytes.Equal(cp.snapChain, cp.chainHash) {
		return fatalf("pool %s: the log up to sequence %d has chain hash %s (events.hash) but checkpoints.chain_hash is %s: the log or the projection was altered",
			cp.pool, cp.lastSeq, hex.EncodeToString(cp.snapChain), hex.EncodeToString(cp.chainHash))
	}
	if !bytes.Equal(cp.snapHash, cp.stateHash) {
		return fatalf("pool %s: the state saved at sequence %d has hash %s but checkpoints.state_hash is %s: the projection was altered",
			cp.pool, cp.lastSeq, hex.EncodeToString(cp.snapHash), hex.EncodeToString(cp.stateHash))
	}
	return nil
}

// loadPools reads, in one snapshot of the database, the named pools'
// checkpoints with their bases' states and their open history rows. A
// pool without a checkpoint is absent from the answer.
func (p *Projector) loadPools(ctx context.Context, names []string) (map[string]checkpoint, error) {
	out := make(map[string]checkpoint, len(names))
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := pgx.BeginTxFunc(ctx, p.db, opts, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, sqlLoadCheckpoints, domain.SnapshotFormat, names)
		cps, err := pgx.CollectRows(rows, scanCheckpoint)
		if err != nil {
			return err
		}
		if err := loadOpen(ctx, tx, cps, names); err != nil {
			return err
		}
		for _, cp := range cps {
			out[cp.pool] = cp
		}
		return nil
	})
	return out, err
}

func scanCheckpoint(r pgx.CollectableRow) (checkpoint, error) {
	var c checkpoint
	var last int64
	var events *int32
	var cost *int64
	err := r.Scan(&c.pool, &last, &c.stateHash, &c.chainHash, &c.snapSeq, &c.snapState, &c.snapHash, &c.snapChain, &events, &cost)
	c.lastSeq = uint64(last)
	if events != nil && cost != nil {
		c.baseEvents, c.baseCost = int(*events), *cost
	}
	return c, err
}

// haltedAtStart tries a halted pool again (resumeHalted). A partitioned
// projector starts only when it holds the partition (takeOver); should
// another instance have taken it since and lifted the halt first, the
// catch-up's transaction finds the halt gone and this instance gives the
// partition up (ErrPartitionLost, unhalt).
func (p *Projector) haltedAtStart(ctx context.Context, name string, ps *poolState, seq uint64) error {
	p.cfg.log.Info("projector: trying a halted pool again", "pool", name, "seq", seq)
	return p.resumeHalted(ctx, name, ps)
}

// loadCheckpoints reads the offset and the checkpoints (with the position
// of each pool's base, not its state) in one snapshot of the database:
// this projector's (or partition's) offset and pools, or, with whole, the
// furthest offset of any projector and every pool (what healing the
// stream needs, whatever the partitioning).
func (p *Projector) loadCheckpoints(ctx context.Context, whole bool) (uint64, []checkpoint, error) {
	var committed int64
	var cps []checkpoint
	var halted map[string]halt
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := pgx.BeginTxFunc(ctx, p.db, opts, func(tx pgx.Tx) error {
		var err error
		if whole {
			err = tx.QueryRow(ctx, `SELECT coalesce(max(stream_seq), 0) FROM projector_offsets`).Scan(&committed)
		} else if err = p.checkPartitioning(ctx, tx); err == nil {
			err = tx.QueryRow(ctx, `SELECT stream_seq FROM projector_offsets WHERE name = $1`, p.offsetName()).Scan(&committed)
		}
		if err != nil && err != pgx.ErrNoRows {
			return err
		}
		if halted, err = loadHalted(ctx, tx); err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, sqlCheckpoints, domain.SnapshotFormat)
		cps, err = pgx.CollectRows(rows, scanCheckpoint)
		if err != nil {
			return err
		}
		if !whole {
			cps = slices.DeleteFunc(cps, func(c checkpoint) bool { return !p.mine(c.pool) })
		}
		return nil
	})
	for i := range cps {
		if h, ok := halted[cps[i].pool]; ok {
			cps[i].halted = &h
		}
	}
	p.mu.Lock()
	clear(p.halted)
	for name, h := range halted {
		p.halted[name] = h.seq
	}
	p.mu.Unlock()
	p.haltedNoCheckpoint = nil
	for name := range halted {
		if !p.mine(name) {
			continue
		}
		if !slices.ContainsFunc(cps, func(c checkpoint) bool { return c.pool == name }) {
			p.haltedNoCheckpoint = append(p.haltedNoCheckpoint, name)
		}
	}
	return uint64(committed), cps, err
}

// loadOpen reads the open history rows of the pools cps, which are
// names (nil: every pool).
func loadOpen(ctx context.Context, tx pgx.Tx, cps []checkpoint, names []string) error {
	byPool := map[string]map[string]openRow{}
	for i := range cps {
		cps[i].open = map[string]openRow{}
		byPool[cps[i].pool] = cps[i].open
	}
	rows, _ := tx.Query(ctx, sqlOpenHistory, names)
	var pool, consumer, host string
	var slots, from int64
	_, err := pgx.ForEachRow(rows, []any{&pool, &consumer, &slots, &from}, func() error {
		if m := byPool[pool]; m != nil {
			m[consumer] = openRow{slots: slots, from: uint64(from)}
		}
		return nil
	})
	if err != nil {
		return err
	}
	ownByPool := map[string]map[ownKey]openRow{}
	for i := range cps {
		cps[i].ownOpen = map[ownKey]openRow{}
		ownByPool[cps[i].pool] = cps[i].ownOpen
	}
	rows, _ = tx.Query(ctx, sqlOpenOwnHistory, names)
	_, err = pgx.ForEachRow(rows, []any{&pool, &consumer, &host, &slots, &from}, func() error {
		if m := ownByPool[pool]; m != nil {
			m[ownKey{consumer, host}] = openRow{slots: slots, from: uint64(from)}
		}
		return nil
	})
	return err
}

// checkStream heals a stream that ends before the projection (heal.go)
// and refuses one whose start was removed.
func (p *Projector) checkStream(ctx context.Context, cps []checkpoint, committed uint64) error {
	info, err := p.streamInfo(ctx)
	if err != nil {
		return err
	}
	if info.State.LastSeq < committed {
		if l := p.cfg.healLock; l != nil { // the first partition heals, the others find it healed
			l.Lock()
			defer l.Unlock()
			if info, err = p.streamInfo(ctx); err != nil || info.State.LastSeq >= committed {
				return err
			}
		}
		if _, err := p.heal(ctx, cps, info.State.LastSeq, committed); err != nil {
			return err
		}
		return nil
	}
	if info.State.Msgs > 0 && info.State.FirstSeq > committed+1 {
		return fatalf("stream %s starts at sequence %d but the projection needs %d next: events were removed from the log",
			stream.Name, info.State.FirstSeq, committed+1)
	}
	return nil
}

// rebuild restores a pool from its snapshot (if any), folds the log after
// it up to the checkpoint without writing, and checks the result against
// the recorded hashes.
func (p *Projector) rebuild(ctx context.Context, cp checkpoint, level slog.Level) (*poolState, error) {
	pool, chain, err := restore(cp, p.cfg.poolOptions()...)
	if err != nil {
		return nil, err
	}
	ps := newPoolState(pool, chain)
	ps.sinceSnap, ps.costSnap = cp.baseEvents, cp.baseCost
	if err := p.loadIDs(ctx, ps, cp.pool, snapSeqOf(cp)); err != nil {
		return nil, err
	}
	if err := p.replay(ctx, ps, cp.pool, cp.lastSeq); err != nil {
		return nil, err
	}
	p.cfg.log.Log(ctx, level, "projector: rebuilt pool", "pool", cp.pool, "from_snapshot_seq", snapSeqOf(cp),
		"events_folded", ps.sinceSave, "to_seq", cp.lastSeq)
	if got := ps.chain; !bytes.Equal(got[:], cp.chainHash) {
		return nil, fatalf("pool %s: the log folded up to sequence %d gives chain hash %s but checkpoints.chain_hash is %s: the log or the projection was altered",
			cp.pool, cp.lastSeq, hex.EncodeToString(got[:]), hex.EncodeToString(cp.chainHash))
	}
	if got := ps.pool.StateHash(); !bytes.Equal(got[:], cp.stateHash) {
		return nil, fatalf("pool %s: the state rebuilt at sequence %d has hash %s but checkpoints.state_hash is %s: the engine folds this log differently than when it was projected",
			cp.pool, cp.lastSeq, hex.EncodeToString(got[:]), hex.EncodeToString(cp.stateHash))
	}
	ps.open, ps.ownOpen = cp.open, cp.ownOpen
	if err := checkOpen(cp.pool, ps); err != nil {
		return nil, err
	}
	return ps, checkOwnOpen(cp.pool, ps)
}

// checkOpen makes sure the open allocation_history intervals are those of
// the rebuilt state, since the projector closes them by key.
func checkOpen(name string, ps *poolState) error {
	n := 0
	for _, c := range ps.pool.Consumers() {
		if !c.Leaf || c.Allocated == 0 {
			continue
		}
		n++
		if o, ok := ps.open[c.Path]; !ok || o.slots != c.Allocated {
			return fatalf("pool %s: consumer %s holds %d slots at sequence %d but its open allocation_history row says %d", name, c.Path, c.Allocated, ps.lastSeq, o.slots)
		}
	}
	if n != len(ps.open) {
		return fatalf("pool %s: %d open allocation_history rows for %d leaves holding slots", name, len(ps.open), n)
	}
	return nil
}

func snapSeqOf(cp checkpoint) uint64 {
	if cp.snapSeq == nil {
		return 0
	}
	return uint64(*cp.snapSeq)
}

func restore(cp checkpoint, opts ...domain.PoolOption) (*domain.Pool, domain.Hash, error) {
	if cp.snapSeq == nil {
		return domain.NewPool(cp.pool, opts...), zeroHash, nil
	}
	pool, err := domain.Restore(cp.snapState, opts...)
	if errors.Is(err, domain.ErrUnknownRules) { // saved by a build that folds a version this one does not
		return nil, zeroHash, &NeedsNewerError{Pool: cp.pool, Seq: uint64(*cp.snapSeq), Why: fmt.Sprintf("its state saved at sequence %d: %v", *cp.snapSeq, err)}
	}
	if err != nil {
		return nil, zeroHash, fatalf("pool %s: snapshot at sequence %d: %v", cp.pool, *cp.snapSeq, err)
	}
	// The restored state must hash to what was recorded with it.
	if h := pool.StateHash(); !bytes.Equal(h[:], cp.snapHash) {
		return nil, zeroHash, fatalf("pool %s: snapshot at sequence %d does not match its state_hash", cp.pool, *cp.snapSeq)
	}
	var chain domain.Hash
	if len(cp.snapChain) != len(chain) {
		return nil, zeroHash, fatalf("pool %s: no events row for the snapshot at sequence %d", cp.pool, *cp.snapSeq)
	}
	copy(chain[:], cp.snapChain)
	return pool, chain, nil
}

// replay folds the pool's events after its current sequence up to to
// (its checkpoint: one of its events), reading only the pool's subjects,
// without writing.
func (p *Projector) replay(ctx context.Context, ps *poolState, name string, to uint64) error {
	return p.eachPoolMsg(ctx, name, ps.pool.Seq()+1, to, func(m *Decoded) error {
		seq := m.Seq
		if !m.OK || m.Pool != name {
			return nil
		}
		if m.Err != nil {
			return m.Err
		}
		res, link, err := Fold(ps.pool, ps.ids, m.Stored, ps.chain)
		if err != nil {
			return err
		}
		ps.chain, ps.lastSeq = link, seq
		// Counted, never reset here: the live projector took no snapshot
		// in this stretch, and a rule that has changed since takes one
		// at the next event.
		ps.sinceSnap++
		ps.costSnap += foldCost(res)
		ps.sinceSave++
		return nil
	})
}

// loadIDs reads the ids of the events the pool applied up to its
// snapshot at seq (the replay after it adds the rest), so that a late
// duplicate is refused after a restart too.
func (p *Projector) loadIDs(ctx context.Context, ps *poolState, name string, seq uint64) error {
	if seq == 0 {
		return nil
	}
	rows, err := p.db.Query(ctx, `SELECT id FROM events WHERE pool = $1 AND seq <= $2 AND refused IS NULL`, name, int64(seq))
	if err != nil {
		return fmt.Errorf("applied ids of pool %s: %w", name, err)
	}
	var id string
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error { ps.ids.Add(id); return nil })
	return err
}
