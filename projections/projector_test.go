package projections

import (
	"context"
	"errors"
	"fmt"
	"github.com/cluster-ledger/ledger/migrations"
	"io"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

const seedFile = "../test/scenarios/seed/seed-001-share-ratio-subconsumers.yaml"

// publishMix publishes the seed scenario (with a refused event) on pool
// "seed" and a random stream over a 3-level tree on pool "tree",
// interleaved.
func publishMix(m *model, rng *rand.Rand, n int) {
	m.publishScenario(seedFile, "seed")
	m.publish("seed", &events.Demand{Demands: map[string]int64{"/B": 3}}) // a parent: refused
	m.publishScenario("../test/scenarios/seed/seed-000-priority-reclaim.yaml", "prio")
	plan, leaves := treePlan(events.ReclaimShareRatio, 3, 3, 4)
	m.publish("tree", &events.PlanChange{Plan: plan})
	for _, h := range hostsUp(4, 25) {
		m.publish("tree", h)
	}
	for i := range n {
		m.randomEvents(rng, "tree", plan, leaves, 4, 1)
		if i%10 == 0 {
			m.publish("seed", &events.Demand{Demands: map[string]int64{"/A": rng.Int64N(100), "/B/B2": rng.Int64N(100)}})
		}
	}
}

func TestProjectMatchesFold(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	publishMix(m, rand.New(rand.NewPCG(1, 2)), 300)
	begin := time.Now()
	project(t, New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(50), WithSnapshotEvery(40)), m)
	t.Logf("projected %d events in %v", m.n, time.Since(begin))
	checkAgainstModel(t, db, m)
	if len(m.refused) == 0 {
		t.Fatal("the stream has no refused event")
	}
	var refused string
	if err := db.QueryRow(context.Background(), `SELECT refused FROM events WHERE pool = 'seed' AND refused IS NOT NULL`).Scan(&refused); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(refused, "parent") {
		t.Fatalf("refusal reason %q does not say why", refused)
	}
}

// crashRun projects m's stream with a failpoint that fails once at stage
// after `after` batches, then with a fresh projector (both with the
// options extra), and compares the result with a projection that never
// crashed.
func crashRun(t *testing.T, js jetstream.JetStream, m *model, stage string, after int32, extra ...Option) {
	db := newDB(t)
	var calls atomic.Int32
	boom := errors.New("simulated crash")
	fp := func(s string) error {
		if s == stage && calls.Add(1) == after {
			return boom
		}
		return nil
	}
	r := start(New(asProjector(t, js), db, append([]Option{WithLogger(quietLog()), WithBatchSize(7), WithSnapshotEvery(13), WithFailpoint(fp)}, extra...)...))
	if err := <-r.done; !errors.Is(err, boom) {
		t.Fatalf("Run with failpoint: %v, want the simulated crash", err)
	}
	r.cancel()
	var logs strings.Builder
	// Debug: a pool whose snapshot is its checkpoint is rebuilt when its
	// next event comes, and says so at debug level.
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	project(t, New(asProjector(t, js), db, append([]Option{WithLogger(logger), WithBatchSize(11), WithSnapshotEvery(13)}, extra...)...), m)
	if !regexp.MustCompile(`rebuilt pool" pool=tree from_snapshot_seq=[1-9]`).MatchString(logs.String()) {
		t.Fatalf("the restart did not restore pool tree from a snapshot:\n%s", logs.String())
	}
	ref := newDB(t)
	project(t, New(asProjector(t, js), ref, WithLogger(quietLog()), WithBatchSize(1000), WithSnapshotEvery(13)), m)
	diffDumps(t, dump(t, ref), dump(t, db))
	checkAgainstModel(t, db, m)
}

func TestCrashBeforeCommit(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	m := newModel(t, js)
	publishMix(m, rand.New(rand.NewPCG(3, 4)), 250)
	crashRun(t, js, m, StageBeforeCommit, 9)
}

func TestCrashAfterCommitBeforeAck(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	m := newModel(t, js)
	publishMix(m, rand.New(rand.NewPCG(5, 6)), 250)
	crashRun(t, js, m, StageAfterCommitBeforeAck, 9)
}

// The same crashes with every batch written by COPY (WithPipelineRows(0)),
// so that each batch's rows are appended while the batch before it
// commits (pipeline.go): the failing batch's transaction is rolled back,
// and so is the next one, begun beside it.
func TestCrashBeforeCommitOverlapped(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	m := newModel(t, js)
	publishMix(m, rand.New(rand.NewPCG(3, 4)), 250)
	crashRun(t, js, m, StageBeforeCommit, 9, WithPipelineRows(0))
}

func TestCrashAfterCommitBeforeAckOverlapped(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	m := newModel(t, js)
	publishMix(m, rand.New(rand.NewPCG(5, 6)), 250)
	crashRun(t, js, m, StageAfterCommitBeforeAck, 9, WithPipelineRows(0))
}

// TestOverlappedWrites projects a backlog in batches written by COPY, as
// a backlog's large batches are: most are committed in the transaction
// the writer's first stage began while the batch before committed, and
// the tables are those of a projection written one batch at a time in
// pipelined round trips.
func TestOverlappedWrites(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	m := newModel(t, js)
	publishMix(m, rand.New(rand.NewPCG(13, 14)), 400)
	db := newDB(t)
	p := New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(20), WithSnapshotEvery(40), WithPipelineRows(0))
	project(t, p, m)
	batches := (m.n + 19) / 20
	if n := p.overlapped.Load(); n < int64(batches)/2 {
		t.Errorf("%d of about %d batches committed in a transaction begun beside the one before, want most", n, batches)
	}
	checkAgainstModel(t, db, m)
	ref := newDB(t)
	project(t, New(asProjector(t, js), ref, WithLogger(quietLog()), WithBatchSize(20), WithSnapshotEvery(40)), m)
	diffDumps(t, dump(t, ref), dump(t, db))
}

// TestRedeliverySkipped drops acks so that JetStream redelivers committed
// messages to the same running projector, which must ack and skip them.
func TestRedeliverySkipped(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(7, 8))
	publishMix(m, rng, 60)
	p := New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(5))
	p.cfg.ackWait = 300 * time.Millisecond
	var dropping atomic.Bool
	p.cfg.dropAck = dropping.Load
	r := start(p)
	if err := r.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	plan, leaves := treePlan(events.ReclaimShareRatio, 3, 3, 4)
	dropping.Store(true) // these batches commit but their acks are lost
	m.randomEvents(rng, "tree", plan, leaves, 4, 8)
	if err := r.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	dropping.Store(false)
	time.Sleep(time.Second) // past the ack wait: the unacked messages come back
	m.randomEvents(rng, "tree", plan, leaves, 4, 30)
	if err := r.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	info, err := js.Consumer(context.Background(), stream.Name, DefaultName)
	if err != nil {
		t.Fatal(err)
	}
	ci := info.CachedInfo()
	if ci.Delivered.Consumer <= ci.Delivered.Stream {
		t.Fatalf("consumer delivered %d messages for %d stream sequences: no redelivery happened", ci.Delivered.Consumer, ci.Delivered.Stream)
	}
	t.Logf("%d deliveries for %d stream sequences", ci.Delivered.Consumer, ci.Delivered.Stream)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	checkAgainstModel(t, db, m)
}

func TestRestart(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(9, 10))
	publishMix(m, rng, 80)
	opts := []Option{WithLogger(quietLog()), WithBatchSize(16), WithSnapshotEvery(25)}
	project(t, New(asProjector(t, js), db, opts...), m)
	checkAgainstModel(t, db, m)
	plan, leaves := treePlan(events.ReclaimShareRatio, 3, 3, 4)
	m.randomEvents(rng, "tree", plan, leaves, 4, 80)
	m.publish("new-pool", &events.HostUp{Host: "x", Slots: 3})
	r := start(New(asProjector(t, js), db, opts...))
	if err := r.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	m.randomEvents(rng, "tree", plan, leaves, 4, 40) // while running
	if err := r.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	checkAgainstModel(t, db, m)
	ref := newDB(t)
	project(t, New(asProjector(t, js), ref, opts...), m)
	diffDumps(t, dump(t, ref), dump(t, db))
}

// TestPostgresOutage kills the projector's connections while it works: it
// must retry and end with exactly the same tables.
func TestPostgresOutage(t *testing.T) { postgresOutage(t) }

// TestPostgresOutageOverlapped is TestPostgresOutage with every batch
// written by COPY, its rows appended while the batch before commits
// (pipeline.go): either transaction may lose its connection.
func TestPostgresOutageOverlapped(t *testing.T) { postgresOutage(t, WithPipelineRows(0)) }

func postgresOutage(t *testing.T, extra ...Option) {
	js := connectNATS(t, testenv.NATS(t))
	roles, db := newRoleDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(11, 12))
	publishMix(m, rng, 50)
	killer, err := pgx.Connect(context.Background(), roles.Admin) // the outage: an administrator's doing
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close(context.Background())
	var killed int
	r := start(New(asProjector(t, js), db, append([]Option{WithLogger(quietLog()), WithBatchSize(3)}, extra...)...))
	plan, leaves := treePlan(events.ReclaimShareRatio, 3, 3, 4)
	for range 10 {
		m.randomEvents(rng, "tree", plan, leaves, 4, 20)
		time.Sleep(20 * time.Millisecond)
		var n int
		err := killer.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND usename = $1`, migrations.RoleProjector).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		killed += n
	}
	t.Logf("terminated %d projector connections", killed)
	if err := r.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	checkAgainstModel(t, db, m)
}

// TestChainMismatchIsFatal alters a recorded checkpoint: the next start
// must refuse to continue, saying why.
func TestChainMismatchIsFatal(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	m.publishScenario(seedFile, "seed")
	project(t, New(asProjector(t, js), db, WithLogger(quietLog())), m)
	if _, err := db.Exec(context.Background(), `UPDATE checkpoints SET chain_hash = '\x00'`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := New(asProjector(t, js), db, WithLogger(quietLog())).Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "chain hash") {
		t.Fatalf("Run on an altered checkpoint: %v", err)
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// TestRestartManyPoolsLeavesNoConsumer: the rebuild of every pool at
// start reads each pool's log with direct gets, so a projector (run as
// the projector identity) restarted over more pools than the server's
// limit of 1,000 consumers per stream starts, projects, and leaves the
// stream with its own durable only (issue 20: one consumer leaked per
// pool stopped every restart past 1,000 pools).
func TestRestartManyPoolsLeavesNoConsumer(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	const pools = 1200
	for i := range pools {
		m.publish(fmt.Sprintf("pool-%04d", i), &events.HostUp{Host: "h1", Slots: 4})
	}
	project(t, New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(500)), m)
	for i := range pools { // a second event each, folded again at the restart
		m.publish(fmt.Sprintf("pool-%04d", i), &events.HostUp{Host: "h2", Slots: 2})
	}
	project(t, New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(500)), m)
	began := time.Now()
	r := start(New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(500)))
	m.publish("pool-0007", &events.HostDown{Host: "h2"})
	if err := r.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart over %d pools and one new event projected in %v", pools, time.Since(began))
	s, err := js.Stream(context.Background(), stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Consumers; n != 1 {
		t.Errorf("%d consumers on the stream after restarts over %d pools, want the projector's 1", n, pools)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	checkAgainstModel(t, db, m)
}
