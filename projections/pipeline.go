package projections

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The writer commits folded batches in order and then acks them, while
// Run fetches and folds the next batch: folding (Go) and writing
// (PostgreSQL) overlap on two cores. This is safe because a batch's rows
// are fixed when it is handed over and a commit is retried until it
// succeeds or fails for good, so a fold never has to be undone. The order
// of effects per batch stays: write, commit, then ack.

type writeJob struct {
	b       *batch
	f       *finalRows
	last    jetstream.Msg
	barrier chan error // set for a barrier: answered once every earlier job is done
}

type writer struct {
	jobs    chan writeJob
	failed  chan error // the first error, once
	stopped chan struct{}
}

func (p *Projector) startWriter(ctx context.Context) *writer {
	w := &writer{jobs: make(chan writeJob, 1), failed: make(chan error, 1), stopped: make(chan struct{})}
	go w.run(drainContext(ctx, stopGrace), p)
	return w
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

func (w *writer) run(ctx context.Context, p *Projector) {
	defer close(w.stopped)
	var failure error
	for j := range w.jobs {
		switch {
		case j.barrier != nil:
			j.barrier <- failure
		case failure != nil:
			// after a failure nothing more is written or acked
		default:
			if failure = p.commit(ctx, j.b, j.f); failure != nil {
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
