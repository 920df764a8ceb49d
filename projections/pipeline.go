package projections

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
)

// The writer commits folded batches in order and then acks them, while
// Run fetches and folds the next batch: folding (Go) and writing
// (PostgreSQL) overlap on two cores. This is safe because a batch's rows
// are fixed when it is handed over and a commit is retried until it
// succeeds or fails for good, so a fold never has to be undone. The order
// of effects per batch stays: write, commit, then ack.
//
// A large batch's transaction also overlaps the commit of the batch
// before it (decision #439): the writer's first stage begins it on a
// connection of its own and appends its new rows (writeAppended: events,
// decisions, the history intervals it opened), which no other batch
// writes or reads, while the second stage is still writing and
// committing the batch before; the second stage then checks the offset
// in it (which the batch before has just committed), writes the rest
// (writeChanges: history closes, current state, checkpoints, offset) and
// commits it. PostgreSQL works on two batches at once, on two backends.
// Each batch is still one transaction with its offset, committed in
// order after the one before, then acked. A batch whose first stage
// failed, or whose second stage failed in a way worth retrying, is
// rolled back and written again from the start as before (writeTx), so
// the offset check still comes first there: a batch another writer
// committed already is never appended twice.

type writeJob struct {
	b       *batch
	f       *finalRows
	last    jetstream.Msg
	barrier chan error // set for a barrier: answered once every earlier job is done
	// pre is the batch's transaction with its new rows appended, begun
	// by the first stage; nil when the batch is written whole by commit.
	pre pgx.Tx
}

type writer struct {
	jobs    chan writeJob // to the first stage
	ready   chan writeJob // from the first stage to the second
	failed  chan error    // the first error, once
	stopped chan struct{}
	// broken is set once the second stage failed: the first stage then
	// prepares nothing more.
	broken atomic.Bool
}

func (p *Projector) startWriter(ctx context.Context) *writer {
	p.setAside.restarted()
	w := &writer{jobs: make(chan writeJob, 1), ready: make(chan writeJob), failed: make(chan error, 1), stopped: make(chan struct{})}
	wctx := drainContext(ctx, stopGrace)
	go w.prepare(wctx, p)
	go w.run(wctx, p)
	return w
}

// overlapMinConns is the smallest pool the writer's stages share: the
// first stage holds one connection while it waits for the second, which
// may need another for a batch written whole, and the folding goroutine
// reads pools with a third.
const overlapMinConns = 3

// overlaps reports whether batch b is begun by the first stage: a large
// batch (a small one is one pipelined round trip, write.go) of an
// unpartitioned projector (partitions share the pool and overlap among
// themselves) without the rarer writes, whose offset check must come
// before any row (fair.go's deferred events, a halted pool's catch-up),
// on a pool large enough for both stages.
func (p *Projector) overlaps(b *batch, f *finalRows) bool {
	return f != nil && p.cfg.part == nil && !p.cfg.serialWrites && !b.catchUp && b.to > b.from && len(b.pendingDone) == 0 &&
		!p.pipelined(b, f) && p.db.Stat().MaxConns() >= overlapMinConns
}

// prepare is the first stage: it begins the transaction of each large
// batch and appends its new rows, then hands every job to the second
// stage in order. A batch it could not begin or append to goes on
// unprepared (commit writes it whole and says what is wrong).
func (w *writer) prepare(ctx context.Context, p *Projector) {
	defer close(w.ready)
	for j := range w.jobs {
		if j.barrier == nil && !w.broken.Load() && p.overlaps(j.b, j.f) {
			j.pre = p.begin(ctx, j.b)
		}
		w.ready <- j
	}
}

// begin begins batch b's transaction and appends its new rows, or
// returns nil, having rolled back, when that fails.
func (p *Projector) begin(ctx context.Context, b *batch) pgx.Tx {
	tx, err := p.db.Begin(ctx)
	if err != nil {
		return nil
	}
	if !p.cfg.syncCommit {
		_, err = tx.Exec(ctx, sqlAsyncCommit)
	}
	if err == nil {
		err = writeAppended(ctx, tx, b)
	}
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil
	}
	return tx
}

// stopGrace is how long the writer goes on committing what was folded
// once the projector is told to stop: a stop commits every batch handed
// over (and the states of the pools let go with them), unless PostgreSQL
// is away that long.
const stopGrace = 10 * time.Second

// drainContext is ctx, except that its end comes grace later.
func drainContext(ctx context.Context, grace time.Duration) context.Context {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	context.AfterFunc(ctx, func() { time.AfterFunc(grace, cancel) })
	return wctx
}

// run is the second stage: it commits each batch in order, then acks it.
func (w *writer) run(ctx context.Context, p *Projector) {
	defer close(w.stopped)
	var failure error
	for j := range w.ready {
		switch {
		case j.barrier != nil:
			j.barrier <- failure
		case failure != nil:
			// after a failure nothing more is written or acked
			if j.pre != nil {
				_ = j.pre.Rollback(context.WithoutCancel(ctx))
			}
		default:
			if failure = p.commitPrepared(ctx, j.b, j.f, j.pre); failure != nil {
				w.broken.Store(true)
				w.failed <- failure
				continue
			}
			p.ack(j.last)
		}
	}
}

// submit hands a folded batch over, or returns the writer's failure.
func (w *writer) submit(j writeJob) error {
	select {
	case err := <-w.failed:
		return err
	case w.jobs <- j:
		return nil
	}
}

// drain waits until every batch handed over is committed and acked.
func (w *writer) drain() error {
	done := make(chan error, 1)
	w.jobs <- writeJob{barrier: done}
	return <-done
}

// stop lets the writer finish what it has and returns its failure, if any.
func (w *writer) stop() error {
	close(w.jobs)
	<-w.stopped
	select {
	case err := <-w.failed:
		return err
	default:
		return nil
	}
}
