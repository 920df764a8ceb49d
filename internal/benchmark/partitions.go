package benchmark

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/natsserver"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/migrations"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
)

// Phase 5: the same log of many pools projected by one unpartitioned
// projector (the baseline), by one instance of a partitioned projector,
// and by two instances sharing the partitions.

const (
	partitionPools = 64
	partitionCount = 8
)

// partitionSetup is one way of projecting phase 5's log.
type partitionSetup struct {
	name      string
	instances int // 0: one unpartitioned projector
}

var partitionSetups = []partitionSetup{
	{"1 projector, unpartitioned", 0},
	{fmt.Sprintf("1 instance, %d partitions", partitionCount), 1},
	{fmt.Sprintf("2 instances, %d partitions", partitionCount), 2},
}

func (b *bench) partitions(ctx context.Context) error {
	url, js, stop, err := b.freshStream(ctx, "nats-partitions")
	if err != nil {
		return err
	}
	defer stop()
	per := b.n.partitionEvents
	b.progress("writing %d pools of %d events each", partitionPools, per)
	for i := range partitionPools {
		if _, err := b.writeLogTo(ctx, js, fmt.Sprintf("part-%s-%d", b.runID, i), setup(), uint64(100+i), per); err != nil {
			return err
		}
	}
	s, err := js.Stream(ctx, stream.Name)
	if err != nil {
		return err
	}
	last := s.CachedInfo().State.LastSeq
	reads := "each partition reads every event (the stream's subjects carry no partition it can filter on)"
	if sp := stream.Partitions(s.CachedInfo().Config); sp > 0 && sp%partitionCount == 0 {
		reads = fmt.Sprintf("each partition reads its own events (the stream's %d subject partitions)", sp)
	}
	rates := make([]float64, len(partitionSetups))
	cpus := make([]string, len(partitionSetups))
	for k, setup := range partitionSetups {
		b.progress("projecting %d events: %s", last, setup.name)
		cpu, pg, start := processCPU(), b.pgCPU(), time.Now()
		rate, err := b.projectWith(step(ctx, setup.name), url, fmt.Sprintf("part%d", k), setup, last)
		if err != nil {
			return fmt.Errorf("%s: %w", setup.name, err)
		}
		rates[k] = rate
		cpus[k] = cpuShares(processCPU()-cpu, b.pgCPU()-pg, time.Since(start), int(last))
	}
	detail := fmt.Sprintf("%d events over %d pools, fresh database", last, partitionPools)
	b.add(Result{Phase: "5 partitions", Name: "projector, " + partitionSetups[0].name, Signing: b.signing(), Value: rates[0], Unit: "events/s",
		Detail: detail + " (the baseline)" + cpus[0]})
	b.add(Result{Phase: "5 partitions", Name: "projector, " + partitionSetups[1].name, Signing: b.signing(), Value: rates[1], Unit: "events/s",
		Baseline: "unpartitioned", BaselineValue: rates[0], Target: "≥ 0.95", Min: 0.95, Detail: detail + "; " + reads + cpus[1]})
	b.add(Result{Phase: "5 partitions", Name: "projector, " + partitionSetups[2].name, Signing: b.signing(), Value: rates[2], Unit: "events/s",
		Baseline: "1 instance", BaselineValue: rates[1], Target: "> 1", Min: 1, Above: true,
		Detail: detail + fmt.Sprintf("; on %d cores, shared with PostgreSQL and NATS", b.report.CPUs) + cpus[2]})
	return nil
}

// cpuShares says what a projection of n events over d cost the CPUs:
// this process (the projectors, the embedded NATS server) and the
// private PostgreSQL, in cores kept busy and microseconds an event ("" if
// neither is measured). Both near the machine's cores together: more
// instances on it cannot project faster.
func cpuShares(own, pg, d time.Duration, n int) string {
	if own <= 0 || d <= 0 || n <= 0 {
		return ""
	}
	s := fmt.Sprintf("; CPU: this process %.2f cores (%.0f µs an event)", own.Seconds()/d.Seconds(), float64(own.Microseconds())/float64(n))
	if pg > 0 {
		s += fmt.Sprintf(", PostgreSQL %.2f cores (%.0f µs an event)", pg.Seconds()/d.Seconds(), float64(pg.Microseconds())/float64(n))
	}
	return s
}

// freshStream is a fresh embedded server for phases 5 and 6 (so its log
// holds only their pools), its store in dir under the run's, or the run's
// own server when it is not embedded.
func (b *bench) freshStream(ctx context.Context, dir string) (string, jetstream.JetStream, func(), error) {
	if b.ns == nil {
		b.report.Notes = append(b.report.Notes, "with --nats-url, phases 5 and 6 project the whole stream of that server")
		return b.natsURL, b.js, func() {}, nil
	}
	ns, err := natsserver.Start(ctx, natsserver.WithStoreDir(filepath.Join(b.dir, dir)),
		natsserver.WithListen("127.0.0.1:0"), natsserver.WithSync(unsynced))
	if err != nil {
		return "", nil, nil, fmt.Errorf("start NATS: %w", err)
	}
	nc, err := b.connect(ns.URL(), nats.Name("ledger-bench-partitions"))
	if err != nil {
		ns.Shutdown()
		return "", nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		_, err = stream.Ensure(ctx, js)
	}
	if err != nil {
		nc.Close()
		ns.Shutdown()
		return "", nil, nil, err
	}
	return ns.URL(), js, func() { nc.Close(); ns.Shutdown() }, nil
}

// projectWith projects the stream at url into a fresh database with the
// setup's instances, each on its own NATS connection, and returns events/s.
func (b *bench) projectWith(ctx context.Context, url, tag string, setup partitionSetup, last uint64) (float64, error) {
	dbURL, err := b.createDatabase(ctx, fmt.Sprintf("bench_%s_%s", b.runID, strings.ReplaceAll(tag, "-", "_")))
	if err != nil {
		return 0, err
	}
	if err := migrations.Up(ctx, dbURL); err != nil {
		return 0, err
	}
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, max(setup.instances, 1))
	name := fmt.Sprintf("bench-%s-%s", b.runID, tag)
	start := time.Now()
	for i := range max(setup.instances, 1) {
		nc, err := b.connect(url, nats.Name(fmt.Sprintf("ledger-bench-projector-%d", i)))
		if err != nil {
			cancel()
			return 0, err
		}
		js, _ := jetstream.New(nc)
		opts := []projections.Option{projections.WithName(name), projections.WithLogger(b.log), projections.WithInstance(fmt.Sprintf("i%d", i)),
			projections.WithTrustedKeys(b.keys)}
		wg.Go(func() {
			defer nc.Close()
			var err error
			if setup.instances == 0 {
				err = projections.New(js, db, opts...).Run(pctx)
			} else {
				var g *projections.Group
				if g, err = projections.NewGroup(js, db, partitionCount, opts...); err == nil {
					err = g.Run(pctx)
				}
			}
			if err != nil {
				errs <- err
			}
		})
	}
	var elapsed time.Duration
	for {
		seq, err := query.ProjectorOffset(ctx, db, "")
		if err == nil && seq >= last {
			elapsed = time.Since(start)
			break
		}
		select {
		case err := <-errs:
			cancel()
			wg.Wait()
			return 0, err
		case <-ctx.Done():
			cancel()
			wg.Wait()
			return 0, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	wg.Wait()
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	if elapsed <= 0 {
		return 0, errors.New("no time measured")
	}
	return float64(last) / elapsed.Seconds(), nil
}
