package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// benchStream generates n events for pool "bench": a 1,000-leaf, 3-level
// tree (10 x 10 x 10) in share_ratio mode on 50 hosts of 64 slots, then a
// realistic stream: demand changes (one to three leaves), releases of
// held slots, and now and then a host failing or coming back. It folds
// them in memory to generate only sensible releases.
func benchStream(n int) (subjects []string, bodies [][]byte) {
	plan, leaves := treePlan(events.ReclaimShareRatio, 10, 10, 10)
	subjects, bodies, _ = benchStreamOf(plan, leaves, n)
	return subjects, bodies
}

// benchStreamOf is n events of pool "bench": plan, 50 hosts of 64 slots,
// then benchEvent's events on leaves, folded as they are made (so each is
// drawn from the state before it); refused counts those the engine
// refuses, which the stream keeps.
func benchStreamOf(plan events.Plan, leaves []string, n int) (subjects []string, bodies [][]byte, refused int) {
	rng := rand.New(rand.NewPCG(42, 43))
	dp := domain.NewPool("bench")
	at := scenario.Epoch
	add := func(p events.Payload) {
		env, _ := events.New(fmt.Sprintf("b%d", len(bodies)), "bench", "bench", at, p)
		b, _ := json.Marshal(env)
		subjects, bodies = append(subjects, stream.Subject("bench", p.EventType())), append(bodies, b)
		if _, err := dp.Apply(domain.Event{Seq: uint64(len(bodies)), Time: at, Payload: p}); err != nil {
			dp.Skip(uint64(len(bodies)), at)
			refused++
		}
		at = at.Add(100 * time.Millisecond)
	}
	add(&events.PlanChange{Plan: plan})
	for _, h := range hostsUp(50, 64) {
		add(h)
	}
	for len(bodies) < n {
		add(benchEvent(rng, dp, leaves))
	}
	return subjects[:n], bodies[:n], refused
}

func benchEvent(rng *rand.Rand, dp *domain.Pool, leaves []string) events.Payload {
	leaf := leaves[rng.IntN(len(leaves))]
	switch r := rng.IntN(100); {
	case r < 75:
		d := map[string]int64{leaf: rng.Int64N(8)}
		for range rng.IntN(3) {
			d[leaves[rng.IntN(len(leaves))]] = rng.Int64N(8)
		}
		return &events.Demand{Demands: d}
	case r < 98:
		if c, _ := dp.Consumer(leaf); c.Allocated > 0 {
			return &events.Release{Consumer: leaf, Slots: 1 + rng.Int64N(c.Allocated)}
		}
		return &events.Demand{Demands: map[string]int64{leaf: 4}}
	default:
		h := dp.Hosts()[rng.IntN(50)]
		if h.Up {
			return &events.HostDown{Host: h.Name}
		}
		return &events.HostUp{Host: h.Name, Slots: h.Slots}
	}
}

func publishAll(b *testing.B, js jetstream.JetStream, subjects []string, bodies [][]byte) {
	for i := range bodies {
		if _, err := js.PublishAsync(subjects[i], bodies[i]); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 { // below PublishAsync's default limit of pending acks
			<-js.PublishAsyncComplete()
		}
	}
	<-js.PublishAsyncComplete()
}

// BenchmarkProject measures events projected per second (fold, rows,
// one transaction per 1,000 events) from a JetStream backlog.
func BenchmarkProject(b *testing.B) {
	n := max(b.N, 100)
	subjects, bodies := benchStream(n)
	db := projectBacklog(b, n, subjects, bodies, func(js jetstream.JetStream, db *pgxpool.Pool) *Projector {
		return New(js, db, WithLogger(quietLog()))
	})
	var rows int64
	if err := db.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM decisions) + (SELECT count(*) FROM allocation_history)`).Scan(&rows); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(rows)/float64(n), "rows/event")
}

// projectBacklog publishes the n events of pool bench, times a projector
// made by newProjector folding them into a fresh database, reports
// events/s and returns the database.
func projectBacklog(b *testing.B, n int, subjects []string, bodies [][]byte, newProjector func(jetstream.JetStream, *pgxpool.Pool) *Projector) *pgxpool.Pool {
	js := connectNATS(b, testenv.NATS(b))
	db := newDB(b)
	publishAll(b, js, subjects, bodies)
	p := newProjector(js, db)
	b.ResetTimer()
	begin := time.Now()
	r := start(p)
	for p.Applied("bench") < uint64(n) {
		select {
		case err := <-r.done:
			b.Fatalf("Run: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	elapsed := time.Since(begin)
	b.StopTimer()
	if err := r.stop(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
	return db
}

// BenchmarkRawInsert is the floor BenchmarkProject is compared with: COPY
// of the same number of events rows, 1,000 per transaction, without
// reading NATS or folding.
func BenchmarkRawInsert(b *testing.B) {
	n := max(b.N, 100)
	_, bodies := benchStream(n)
	rows := make([][]any, n)
	var zero domain.Hash
	for i, body := range bodies {
		var env events.Envelope
		if err := json.Unmarshal(body, &env); err != nil {
			b.Fatal(err)
		}
		rows[i] = []any{"bench", int64(i + 1), env.ID, string(env.Type), int32(env.V), env.Time, env.Producer, []byte(env.Data), nil, nil, zero[:], zero[:],
			"ledger.bench." + string(env.Type), []byte(`{"Nats-Msg-Id":["` + env.ID + `"]}`), body}
	}
	db := newDB(b)
	ctx := context.Background()
	b.ResetTimer()
	begin := time.Now()
	for lo := 0; lo < n; lo += DefaultBatchSize {
		batch := rows[lo:min(lo+DefaultBatchSize, n)]
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			_, err := tx.CopyFrom(ctx, pgx.Identifier{"events"}, eventCols, pgx.CopyFromRows(batch))
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/time.Since(begin).Seconds(), "events/s")
}

// BenchmarkProjectSmallBatches is BenchmarkProject in batches of 10
// events, as a live projector writes them, each written in one pipelined
// round trip (pipelined) or by COPYs in a transaction (copy), and
// committed asynchronously or synchronously: the per-batch cost of the
// write path.
func BenchmarkProjectSmallBatches(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []Option
	}{
		{"pipelined-async", nil},
		{"copy-async", []Option{WithPipelineRows(0)}},
		{"pipelined-sync", []Option{WithSynchronousCommit()}},
		{"copy-sync", []Option{WithPipelineRows(0), WithSynchronousCommit()}},
	} {
		b.Run(c.name, func(b *testing.B) {
			n := max(b.N, 100)
			subjects, bodies := benchStream(n)
			projectBacklog(b, n, subjects, bodies, func(js jetstream.JetStream, db *pgxpool.Pool) *Projector {
				return New(js, db, append([]Option{WithLogger(quietLog()), WithBatchSize(10)}, c.opts...)...)
			})
		})
	}
}

// BenchmarkProjectBatchSize is BenchmarkProject at several batch sizes.
func BenchmarkProjectBatchSize(b *testing.B) {
	for _, size := range []int{250, 500, 1000, 2000, 4000} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			n := max(b.N, 100)
			subjects, bodies := benchStream(n)
			projectBacklog(b, n, subjects, bodies, func(js jetstream.JetStream, db *pgxpool.Pool) *Projector {
				return New(js, db, WithLogger(quietLog()), WithBatchSize(size))
			})
		})
	}
}

// BenchmarkProjectOverlap is BenchmarkProject with each large batch's
// rows appended while the batch before commits (overlapped, the
// default: pipeline.go) and with every batch written after the one
// before (serial), side by side in one process, so that both meet the
// same load.
func BenchmarkProjectOverlap(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []Option
	}{
		{"serial", []Option{withSerialWrites()}},
		{"overlapped", nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			n := max(b.N, 100)
			subjects, bodies := benchStream(n)
			projectBacklog(b, n, subjects, bodies, func(js jetstream.JetStream, db *pgxpool.Pool) *Projector {
				return New(js, db, append([]Option{WithLogger(quietLog())}, c.opts...)...)
			})
		})
	}
}

// withSerialWrites writes every batch after the one before has
// committed, as before batches overlapped (pipeline.go): for comparison.
func withSerialWrites() Option { return func(c *config) { c.serialWrites = true } }
