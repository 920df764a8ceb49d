package projections

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// A pool whose fold fails (the engine panics: a bug, or an event it
// cannot take) is halted: its projection stays at its last committed
// checkpoint, the projector records why in halted_pools and skips the
// pool's later events, and every other pool goes on. Nothing one pool's
// events do stops the others.
//
// A halted pool stays halted across restarts (the projector cannot skip
// part of a pool's log and stay right). To resume it after an upgrade
// that fixes the cause, rebuild the projection with the new code
// (`ledger replay --into` an empty database, which folds every pool from
// the start) and switch to it; see docs/decisions.md.

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
	return res, link, nil, err
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
	c := b.closes
	var kept closeRows
	for i := range c.pools {
		if c.pools[i] != name {
			kept.pools = append(kept.pools, c.pools[i])
			kept.consumers = append(kept.consumers, c.consumers[i])
			kept.froms = append(kept.froms, c.froms[i])
			kept.seqs = append(kept.seqs, c.seqs[i])
			kept.times = append(kept.times, c.times[i])
		}
	}
	b.closes = kept
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
