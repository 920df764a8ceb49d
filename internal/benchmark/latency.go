package benchmark

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cluster-ledger/ledger/events"

	"github.com/cluster-ledger/ledger/projections/query"
)

// latency is phase 3: at a steady rate through the API, with the
// projector running, the time from just before each POST until the
// pool's checkpoint in PostgreSQL covers the event's sequence.
func (b *bench) latency(ctx context.Context) error {
	if b.stopAPI == nil {
		if err := b.startAPI(ctx, b.natsURL, b.dbURL, false); err != nil {
			return err
		}
	}
	defer func() {
		if b.stopAPI != nil {
			_ = b.stopAPI()
		}
	}()
	// The projector of phase 2 resumes where it stopped and catches up
	// with phase 1's events first.
	rp, err := b.startProjector(ctx, b.n.projectorName)
	if err != nil {
		return err
	}
	defer func() { _ = rp.stop() }()
	npools := b.n.latencyPools
	pools := make([]string, npools)
	index := map[string]int{}
	for p := range pools {
		pools[p] = fmt.Sprintf("lat%d-%s", p, b.runID)
		index[pools[p]] = p
		if err := b.postSetup(ctx, pools[p]); err != nil {
			return err
		}
	}
	last, err := b.lastSeq(ctx)
	if err != nil {
		return err
	}
	b.progress("projector catching up to sequence %d", last)
	t := time.Now()
	if _, err := b.waitOffset(ctx, b.n.projectorName, last, 10*time.Millisecond, rp.done); err != nil {
		return fmt.Errorf("projector catching up: %w (Run: %v)", err, rp.err)
	}
	b.progress("  caught up in %s", time.Since(t).Round(time.Millisecond))

	total := int(float64(b.n.latencyRate) * b.n.latencyFor.Seconds())
	bodies := make([][]byte, total)
	gens := make([]*generator, npools)
	for p := range gens {
		gens[p] = newGenerator(uint64(300 + p))
	}
	for k := range bodies {
		p := k % npools
		pool := pools[p]
		ps := gens[p].next()
		body, err := requestBody([]string{fmt.Sprintf("%s-%d", pool, k)}, []events.Payload{ps}, false)
		if err != nil {
			return err
		}
		bodies[k] = body
	}

	// The poller: one goroutine reads the pools' checkpoints every
	// millisecond and marks the events they cover as visible.
	type pending struct {
		seq uint64
		t0  time.Time
	}
	var mu sync.Mutex
	waiting := make([][]pending, npools)
	visible := make([]time.Duration, 0, total)
	registered := 0
	pctx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	pollDone := make(chan error, 1)
	polls := 0
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			seqs, err := query.ProjectedSeqs(pctx, b.db, pools)
			if pctx.Err() != nil {
				pollDone <- nil
				return
			}
			if err != nil {
				pollDone <- err
				return
			}
			lasts := make([]uint64, npools)
			for pool, seq := range seqs {
				lasts[index[pool]] = seq
			}
			now := time.Now()
			mu.Lock()
			polls++
			for p := range waiting {
				w := waiting[p]
				for len(w) > 0 && w[0].seq <= lasts[p] {
					visible = append(visible, now.Sub(w[0].t0))
					w = w[1:]
				}
				waiting[p] = w
			}
			mu.Unlock()
			select {
			case <-pctx.Done():
				pollDone <- nil
				return
			case <-tick.C:
			}
		}
	}()

	// One worker per pool posts that pool's events in order; the
	// dispatcher hands out events at the steady rate.
	queues := make([]chan int, npools)
	for p := range queues {
		queues[p] = make(chan int, total/npools+1)
	}
	rtts := make([]time.Duration, total)
	var wg sync.WaitGroup
	errs := make([]error, npools)
	var lastDone time.Time
	for p := range npools {
		wg.Go(func() {
			for k := range queues[p] {
				if errs[p] != nil {
					continue
				}
				t0 := time.Now()
				res, err := b.post(ctx, pools[p], bodies[k])
				done := time.Now()
				rtts[k] = done.Sub(t0)
				if err != nil {
					errs[p] = err
					continue
				}
				mu.Lock()
				waiting[p] = append(waiting[p], pending{seq: res[0].Seq, t0: t0})
				registered++
				if done.After(lastDone) {
					lastDone = done
				}
				mu.Unlock()
			}
		})
	}
	b.progress("%d events at %d events/s through the API over %d pools", total, b.n.latencyRate, npools)
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	sent := 0
	for sent < total && ctx.Err() == nil {
		<-tick.C
		due := min(total, int(time.Since(start).Seconds()*float64(b.n.latencyRate)))
		for ; sent < due; sent++ {
			queues[sent%npools] <- sent
		}
	}
	tick.Stop()
	dispatched := time.Since(start)
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Wait until the poller has seen every event (or give up).
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n := len(visible)
		mu.Unlock()
		if n == registered {
			break
		}
		select {
		case err := <-pollDone:
			return fmt.Errorf("poller: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d events visible in PostgreSQL after 60s", n, registered)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stopPoll()
	if err := <-pollDone; err != nil && ctx.Err() == nil {
		return fmt.Errorf("poller: %w", err)
	}
	if err := rp.stop(); err != nil {
		return fmt.Errorf("projector: %w", err)
	}
	slices.Sort(visible)
	slices.Sort(rtts)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	posted := lastDone.Sub(start)
	detail := fmt.Sprintf("%d events over %d pools (one in flight each), sent at %.0f/s, answered at %.0f/s; polled every 1 ms (%d polls)",
		total, npools, float64(total)/dispatched.Seconds(), float64(total)/posted.Seconds(), polls)
	b.add(Result{Phase: "3 latency", Name: "POST round trip, p50", Signing: b.signing(), Value: ms(quantile(rtts, 0.50)), Unit: "ms",
		Detail: fmt.Sprintf("p99 %.2f ms: the append alone, answered with the sequence", ms(quantile(rtts, 0.99)))})
	b.add(Result{Phase: "3 latency", Name: "POST → visible in PostgreSQL, p50", Signing: b.signing(), Value: ms(quantile(visible, 0.50)), Unit: "ms",
		Baseline: "POST round trip p50", BaselineValue: ms(quantile(rtts, 0.50)), Detail: detail})
	b.add(Result{Phase: "3 latency", Name: "POST → visible in PostgreSQL, p99", Signing: b.signing(), Value: ms(quantile(visible, 0.99)), Unit: "ms",
		Target: "≤ 25 ms", Max: 25, Detail: fmt.Sprintf("max %.1f ms", ms(visible[len(visible)-1]))})
	return nil
}

// quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(len(sorted)-1, i))]
}
