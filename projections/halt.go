package projections

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// A pool whose fold fails (the engine panics: a bug, or an event it
// cannot take; or an event this build cannot fold because a newer ledger,
// or one folding the rules version in development, wrote it) is halted: its projection stays at its last committed
// checkpoint, the projector records why in halted_pools and skips the
// pool's later events, and every other pool goes on. Nothing one pool's
// events do stops the others.
//
// A halted pool is tried again when the projector starts (an
// unpartitioned one: resumeHalted): its events from its checkpoint up to
// the committed offset are folded with the code now running and, if
// none fails, written in one transaction that clears its halted_pools
// row, so an upgrade that fixes the cause resumes the pool by itself. If
// the fold fails again the pool stays halted and nothing is written. A
// partitioned projector leaves it halted: rebuild the projection
// (`ledger replay --into` an empty database) and switch to it; see
// docs/decisions.md #67.

// halt is one halted pool.
type halt struct {
	seq    uint64
	reason string
}

// safeFold is Fold turning a panic into a halt.
func safeFold(ps *poolState, st stream.Stored, hook func(pool string, seq uint64)) (res FoldResult, link domain.Hash, h *halt, err error) {
	defer func() {
		if r := recover(); r != nil {
			h = &halt{seq: st.Seq, reason: fmt.Sprintf("fold failed at sequence %d: %v\n%s", st.Seq, r, debug.Stack())}
		}
	}()
	if hook != nil {
		hook(ps.pool.Name(), st.Seq)
	}
	res, link, err = Fold(ps.pool, ps.ids, st, ps.chain)
	if nn, ok := errors.AsType[*NeedsNewerError](err); ok {
		// Another build wrote it (a newer ledger, or one folding the rules
		// version in development): this pool waits for that build, the
		// others go on.
		return res, link, &halt{seq: nn.Seq, reason: nn.Error()}, nil
	}
	return res, link, nil, err
}

// haltUnfoldable records that pool name cannot be rebuilt by this build
// (an event of it needs a newer ledger, nn) and returns its state: halted,
// skipping the pool's events until a build that folds them starts and
// resumes it (resumeHalted). The other pools go on.
func (p *Projector) haltUnfoldable(ctx context.Context, name string, nn *NeedsNewerError) (*poolState, error) {
	err := p.retry(ctx, "record halted pool "+name, func() error {
		_, err := p.db.Exec(ctx, sqlHalt, name, int64(nn.Seq), nn.Error())
		return classify(err)
	})
	if err != nil {
		return nil, err
	}
	p.cfg.log.Error("projector: pool halted: this build cannot fold it; the other pools go on", "pool", name, "seq", nn.Seq, "reason", nn.Error())
	p.mu.Lock()
	p.halted[name] = nn.Seq
	p.mu.Unlock()
	ps := newPoolState(p.newDomainPool(name), zeroHash)
	ps.halted = true
	return ps, nil
}

// dropPool removes a pool's rows from the batch: its state in memory may
// be half-changed by the failed fold, so nothing of it from this batch is
// written; its projection stays at its committed checkpoint.
func (b *batch) dropPool(name string) {
	notPool := func(row []any) bool { return row[0] == name }
	b.events = slices.DeleteFunc(b.events, notPool)
	b.decisions = slices.DeleteFunc(b.decisions, notPool)
	b.snapshots = slices.DeleteFunc(b.snapshots, notPool)
	b.history = slices.DeleteFunc(b.history, func(h histRow) bool { return h.pool == name })
	c, keep := &b.closes, otherPools(b.closes.pools, name)
	c.pools, c.consumers = keepRows(c.pools, keep), keepRows(c.consumers, keep)
	c.froms, c.seqs, c.times = keepRows(c.froms, keep), keepRows(c.seqs, keep), keepRows(c.times, keep)
	b.dropOwnership(name)
	delete(b.pools, name)
	// openHere indexes b.history, which moved: rebuild the indexes.
	for _, pb := range b.pools {
		clear(pb.openHere)
	}
	for i, h := range b.history {
		if h.toSeq == nil {
			b.pools[h.pool].openHere[h.consumer] = i
		}
	}
	b.reindexOwnOpen()
}

const sqlHalt = `INSERT INTO halted_pools (pool, seq, reason) VALUES ($1, $2, $3) ON CONFLICT (pool) DO NOTHING`

func writeHalts(ctx context.Context, tx pgx.Tx, halts map[string]halt) error {
	for name, h := range halts {
		if _, err := tx.Exec(ctx, sqlHalt, name, int64(h.seq), h.reason); err != nil {
			return fmt.Errorf("record halted pool %s: %w", name, err)
		}
	}
	return nil
}

// loadHalted reads the halted pools.
func loadHalted(ctx context.Context, tx pgx.Tx) (map[string]halt, error) {
	rows, _ := tx.Query(ctx, `SELECT pool, seq, reason FROM halted_pools`)
	out := map[string]halt{}
	var name, reason string
	var seq int64
	_, err := pgx.ForEachRow(rows, []any{&name, &seq, &reason}, func() error {
		out[name] = halt{seq: uint64(seq), reason: reason}
		return nil
	})
	return out, err
}

// Halted returns the pools the projector has halted, with the sequence
// and reason (for /healthz).
func (p *Projector) Halted() map[string]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]uint64, len(p.halted))
	for name, seq := range p.halted {
		out[name] = seq
	}
	return out
}

// unhalt deletes the halted_pools rows of the pools a catch-up batch
// brought up to date.
func (p *Projector) unhalt(ctx context.Context, tx pgx.Tx, b *batch) error {
	for name, ps := range b.resumed {
		if ps.halted {
			continue
		}
		tag, err := tx.Exec(ctx, `DELETE FROM halted_pools WHERE pool = $1`, name)
		if err != nil {
			return fmt.Errorf("clear halted pool %s: %w", name, err)
		}
		if tag.RowsAffected() == 1 {
			continue
		}
		// The halt is gone: another instance of the partition caught the
		// pool up and committed first (the offset row's lock orders the
		// two). This transaction is rolled back, and this instance takes
		// the partition again from what PostgreSQL now holds.
		if p.cfg.part != nil {
			return fmt.Errorf("%w: halted pool %s was resumed by another instance", ErrPartitionLost, name)
		}
		return fatalf("halted pool %s is no longer halted: another projector with the same name is writing", name)
	}
	return nil
}

// resumeHalted tries a halted pool again at start: it folds the pool's
// events after its checkpoint up to the committed offset with the code
// now running and, when none of them fails, writes them (a catch-up batch)
// and lifts the halt. It returns an error only when the write fails or
// the log needs a newer ledger.
func (p *Projector) resumeHalted(ctx context.Context, name string, ps *poolState) error {
	ps.halted = false
	b := newBatch(p.committed)
	b.catchUp, b.resumed = true, map[string]*poolState{name: ps}
	last, err := p.lastPoolSeq(ctx, name, p.committed)
	if err != nil {
		return err
	}
	err = p.eachPoolMsg(ctx, name, ps.lastSeq+1, last, func(m *Decoded) error {
		if !m.OK {
			return nil
		}
		if m.Err != nil {
			return m.Err
		}
		return b.add(name, ps, m.Stored, storedMsg{subject: m.Subject, headers: headersJSON(m.Header)}, p.cfg.snapshotRule(), p.cfg.foldHook)
	})
	if err != nil {
		return err
	}
	if h, again := b.halts[name]; again {
		ps.halted = true
		p.cfg.log.Warn("projector: halted pool still fails; it stays halted", "pool", name, "seq", h.seq)
		return nil
	}
	if err := p.commit(ctx, b, b.finish()); err != nil {
		return err
	}
	p.mu.Lock()
	delete(p.halted, name)
	p.mu.Unlock()
	p.setApplied(name, ps.lastSeq)
	p.cfg.log.Info("projector: halted pool resumed", "pool", name, "caught_up_to", p.committed)
	return nil
}

// eachPoolMsg calls fn for every stored message of pool name with a
// sequence in [from, last], in order, decoded and authenticated ahead of
// fn (readDecoded). It reads with direct gets (stream.Read): rebuilding
// thousands of pools at start creates no consumer, so none is left
// behind (issue 20).
func (p *Projector) eachPoolMsg(ctx context.Context, name string, from, last uint64, fn func(m *Decoded) error) error {
	err := ReadDecoded(ctx, p.js.Conn(), p.cfg.keys, nil, stream.PoolFilter(name), from, last, fn)
	if err != nil {
		return fmt.Errorf("read pool %s from %d to %d: %w", name, from, last, err)
	}
	return nil
}

// lastPoolSeq is the sequence of pool name's last stored message at or
// before to (0: none), as the stream leader holds it.
func (p *Projector) lastPoolSeq(ctx context.Context, name string, to uint64) (uint64, error) {
	m, err := request(ctx, p, func(ctx context.Context) (*stream.Msg, error) {
		m, ok, err := stream.Last(ctx, p.js.Conn(), stream.PoolFilter(name))
		if !ok {
			return nil, err
		}
		return &m, err
	})
	if err != nil {
		return 0, fmt.Errorf("last event of pool %s: %w", name, err)
	}
	if m == nil {
		return 0, nil
	}
	return min(m.Seq, to), nil
}

// otherPools marks the rows of a column of pool names that are not name.
func otherPools(pools []string, name string) []bool {
	keep := make([]bool, len(pools))
	for i, p := range pools {
		keep[i] = p != name
	}
	return keep
}

// keepRows keeps the rows of one column that keep marks (the columns of
// one set of rows are filtered with the same marks).
func keepRows[T any](col []T, keep []bool) []T {
	var out []T
	for i, v := range col {
		if keep[i] {
			out = append(out, v)
		}
	}
	return out
}
