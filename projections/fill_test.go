package projections

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/migrations"
)

// fillTTL is the partition's pinned TTL and ack wait in the gap tests:
// the events an instance died holding come again only that long after
// they were delivered, so the next holder is given a later event first
// and fills the gap from the stream.
const fillTTL = 10 * time.Second

// gapRig is partition 0 of 1 held by instance a (the projector's
// identities) until it dies holding events delivered to it and never
// committed (a failpoint before the commit); instance b waits in the
// partition's priority group.
type gapRig struct {
	t      *testing.T
	js     jetstream.JetStream // admin: publishes, unpins, reconfigures
	db     *pgxpool.Pool
	d      testdb.DB
	m      *model
	rng    *rand.Rand
	plan   events.Plan
	leaves []string
	// gap is the sequences a was delivered and died with: the gap b
	// finds when it is given a later event first.
	gapFrom, gapTo uint64
}

func partitionOpts(logs *syncLog, extra ...Option) []Option {
	return append([]Option{WithPartition(0, 1), WithPinnedTTL(fillTTL), WithBatchSize(20), WithSnapshotEvery(1), WithLogger(logs.logger())}, extra...)
}

// newGapRig publishes 8 pools, has a fold them, starts b (opts) beside
// it, then publishes gap (a pool name per event), all delivered to a,
// which dies committing them.
func newGapRig(t *testing.T, seed uint64, gap []string, bLogs *syncLog, opts ...Option) (*gapRig, *running) {
	t.Helper()
	js := connectNATS(t, testenv.NATS(t))
	d, db := newRoleDB(t)
	r := &gapRig{t: t, js: js, db: db, d: d, m: newModel(t, js), rng: rand.New(rand.NewPCG(seed, 25))}
	publishTreePools(r.m, r.rng, 8, 16)
	r.plan, r.leaves = treePlan(events.ReclaimShareRatio, 2, 3)

	var aLogs syncLog
	var dying atomic.Bool
	died := errors.New("instance a died before its commit")
	published := make(chan struct{})
	a := start(New(asProjector(t, js), db, partitionOpts(&aLogs,
		WithFailpoint(func(stage string) error {
			if stage == StageBeforeCommit && dying.Load() {
				return died
			}
			return nil
		}),
		withFoldHook(func(pool string, seq uint64) {
			if dying.Load() && seq == r.gapFrom {
				<-published // every event of the gap is delivered to a first
			}
		}))...))
	if err := a.waitFor(t, r.m); err != nil {
		t.Fatal(err)
	}
	b := start(New(asProjector(t, js), db, partitionOpts(bLogs, opts...)...))
	r.waitWaiting(2) // a's pull requests and b's

	r.gapFrom = r.m.lastSeq + 1
	dying.Store(true)
	for _, pool := range gap {
		r.m.randomEvents(r.rng, pool, r.plan, r.leaves, 2, 1)
	}
	r.gapTo = r.m.lastSeq
	time.Sleep(time.Second) // delivered to a, which waits at the first of them
	close(published)
	if err := a.waitDone(); !errors.Is(err, died) {
		t.Fatalf("instance a: %v, want it to die before its commit\n%s", err, aLogs.String())
	}
	return r, b
}

// waitWaiting waits until the partition's consumer has at least n pull
// requests waiting.
func (r *gapRig) waitWaiting(n int) {
	r.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := r.js.Consumer(context.Background(), stream.Name, PartitionName(DefaultName, 0, 1))
		if err == nil && c.CachedInfo().NumWaiting >= n {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the partition's consumer does not have %d pull requests waiting: %v", n, err)
		}
	}
}

// unpin lets the next event of the partition go to another instance at
// once (not after the dead one's pin lapses).
func (r *gapRig) unpin() {
	r.t.Helper()
	ctx := context.Background()
	s, err := r.js.Stream(ctx, stream.Name)
	if err == nil {
		err = s.UnpinConsumer(ctx, PartitionName(DefaultName, 0, 1), PriorityGroup)
	}
	if err != nil {
		r.t.Fatal(err)
	}
}

// setDirect turns the stream's direct gets on or off, as the admin
// would: off, no server answers a direct get, as while a clustered
// stream elects a leader and its replicas catch up.
func (r *gapRig) setDirect(on bool) {
	r.t.Helper()
	ctx := context.Background()
	s, err := r.js.Stream(ctx, stream.Name)
	if err != nil {
		r.t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.AllowDirect = on
	if _, err := r.js.UpdateStream(ctx, cfg); err != nil {
		r.t.Fatal(err)
	}
}

// TestGapFillReadAgainWhileTheStreamDoesNotAnswer: instance a dies
// holding 12 events of its partition; b is given the next event first
// and finds the gap, but no server answers the direct gets that fill it
// (the stream's direct gets are off for 4 s, as when no replica of a
// clustered stream is current). b commits what came before, keeps what
// it was given (kept alive), and fills again after a doubling pause,
// never stopping; once the stream answers, it fills the gap, and every
// event is projected exactly once.
func TestGapFillReadAgainWhileTheStreamDoesNotAnswer(t *testing.T) {
	var logs syncLog
	gap := []string{"p00", "p01", "p02", "p03", "p00", "p01", "p02", "p03", "p04", "p05", "p06", "p07"}
	r, b := newGapRig(t, 258, gap, &logs)
	r.setDirect(false)
	r.unpin()
	r.m.randomEvents(r.rng, "p05", r.plan, r.leaves, 2, 1) // b's first: after the gap

	const unread = "could not read the stream to fill a gap; reading again"
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-b.done:
			r.setDirect(true)
			t.Fatalf("instance b stopped while the stream did not answer: %v\n%s", err, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	tries := strings.Count(logs.String(), unread)
	r.setDirect(true)
	if tries < 3 {
		t.Fatalf("b tried to fill the gap %d times while the stream did not answer, want at least 3 (100, 200, 400 ms apart ...)\n%s", tries, logs.String())
	}
	for range 40 { // traffic goes on
		r.m.randomEvents(r.rng, poolName(r.rng.IntN(8)), r.plan, r.leaves, 2, 1)
	}
	if err := b.waitFor(t, r.m); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	t.Logf("a died holding sequences %d-%d; b's fill went unanswered %d times, then b projected all %d events", r.gapFrom, r.gapTo, tries, r.m.n)
	if err := b.stop(); err != nil {
		t.Fatalf("instance b: %v\n%s", err, logs.String())
	}
	checkAgainstModel(t, r.db, r.m)
}

// TestStopWhileAFilledPoolLoads: b is stopped while it takes a pool of
// the gap it fills up again from PostgreSQL (an administrator's lock
// holds the load). A stop is no failure: Run returns nil, not a fatal
// error (a fill made every error of a fold fatal, a load cut short by
// the stop included), and the next instance projects every event
// exactly once.
func TestStopWhileAFilledPoolLoads(t *testing.T) {
	var logs syncLog
	var rig atomic.Pointer[gapRig]
	var admin atomic.Pointer[pgxpool.Pool]
	var locked atomic.Bool
	lockc := make(chan pgx.Tx, 1)
	hook := withFoldHook(func(pool string, seq uint64) {
		// b folds the gap's first event (p01, just loaded): the next,
		// p02's pool, is loaded while the administrator holds a table
		// every load reads.
		r := rig.Load()
		if r == nil || seq < r.gapFrom || seq > r.gapTo || !locked.CompareAndSwap(false, true) {
			return
		}
		ctx := context.Background()
		tx, err := admin.Load().Begin(ctx)
		if err == nil {
			_, err = tx.Exec(ctx, `LOCK TABLE allocation_history IN ACCESS EXCLUSIVE MODE`)
		}
		if err != nil {
			t.Errorf("lock allocation_history: %v", err)
			return
		}
		lockc <- tx
	})
	r, b := newGapRig(t, 156, []string{"p01", "p02", "p01", "p02"}, &logs, hook)
	admin.Store(testdb.Pool(t, r.d.Admin))
	rig.Store(r)
	r.unpin()
	r.m.randomEvents(r.rng, "p05", r.plan, r.leaves, 2, 1) // b's first: after the gap

	// b waits on the lock, loading p02.
	var lockTx pgx.Tx
	select {
	case lockTx = <-lockc:
	case <-time.After(30 * time.Second):
		t.Fatalf("b did not fold the gap\n%s", logs.String())
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var waiting int
		if err := admin.Load().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND usename = $1 AND wait_event_type = 'Lock'`, migrations.RoleProjector).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b did not wait on the lock loading a pool of the gap\n%s", logs.String())
		}
	}
	b.cancel()
	time.Sleep(300 * time.Millisecond)
	if err := lockTx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-b.done; err != nil {
		t.Fatalf("instance b stopped while loading a pool of a gap: Run returned %v, want nil\n%s", err, logs.String())
	}

	// The next instance goes on from what b committed.
	var cLogs syncLog
	c := start(New(asProjector(t, r.js), r.db, partitionOpts(&cLogs)...))
	r.waitWaiting(1)
	r.unpin()
	for range 20 {
		r.m.randomEvents(r.rng, poolName(r.rng.IntN(8)), r.plan, r.leaves, 2, 1)
	}
	if err := c.waitFor(t, r.m); err != nil {
		t.Fatalf("%v\n%s", err, cLogs.String())
	}
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
	checkAgainstModel(t, r.db, r.m)
}
