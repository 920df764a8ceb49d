package projections

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// keepAliveAckWait is the unpartitioned consumer's ack wait in the tests
// below (30 s in production): what they hold, they hold for three.
const keepAliveAckWait = 2 * time.Second

// checkDeliveredOnce fails unless the unpartitioned projector's consumer
// delivered each stream sequence once: nothing was delivered again.
func checkDeliveredOnce(t *testing.T, m *model, held time.Duration) {
	t.Helper()
	cons, err := m.js.Consumer(context.Background(), stream.Name, DefaultName)
	if err != nil {
		t.Fatal(err)
	}
	info := cons.CachedInfo()
	t.Logf("%d deliveries (%d redelivered) for %d events; messages held %v with an ack wait of %v",
		info.Delivered.Consumer, info.NumRedelivered, m.lastSeq, held.Round(time.Millisecond), keepAliveAckWait)
	if info.Delivered.Consumer != m.lastSeq || info.NumRedelivered != 0 {
		t.Errorf("%d deliveries (%d redelivered) for %d events: the projector was delivered again what it was working on",
			info.Delivered.Consumer, info.NumRedelivered, m.lastSeq)
	}
}

// TestSlowFoldNotDeliveredAgain: the unpartitioned projector (its own
// identities on NATS and PostgreSQL) holds a fetched batch three ack
// waits in a fold (a large pool's, say) while events keep coming. It
// tells NATS it is still working on it (in-progress acks, inflight.go),
// so nothing is delivered again, and the projection equals the log's
// fold: nothing lost, nothing twice. Without the in-progress acks the
// held batch came again after the stall.
func TestSlowFoldNotDeliveredAgain(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(21, 22))
	publishMix(m, rng, 120)
	stallAt := m.lastSeq / 2
	var stall sync.Once
	stalled, resumed := make(chan struct{}), make(chan struct{})
	var held time.Duration
	hook := func(pool string, seq uint64) {
		if seq >= stallAt {
			stall.Do(func() {
				began := time.Now()
				close(stalled)
				time.Sleep(3 * keepAliveAckWait)
				held = time.Since(began)
				close(resumed)
			})
		}
	}
	p := New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(20), withFoldHook(hook))
	p.cfg.ackWait = keepAliveAckWait
	r := start(p)
	<-stalled
	plan, leaves := treePlan(events.ReclaimShareRatio, 3, 3, 4)
	for range 10 { // traffic while the fold stalls
		m.randomEvents(rng, "tree", plan, leaves, 4, 5)
		time.Sleep(300 * time.Millisecond)
	}
	<-resumed
	finishHeld(t, r, db, m, held)
}

// TestSlowCommitNotDeliveredAgain: PostgreSQL holds the unpartitioned
// projector's commits for three ack waits (an administrator's lock on
// projector_offsets: a slow or locked database) while events keep
// coming. What the projector folded and fetched meanwhile is kept alive,
// not delivered again, and everything is projected once.
func TestSlowCommitNotDeliveredAgain(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	roles, db := newRoleDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(23, 24))
	publishMix(m, rng, 60)
	p := New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(20))
	p.cfg.ackWait = keepAliveAckWait
	r := start(p)
	if err := r.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, roles.Admin) // the lock: an administrator's doing
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE projector_offsets IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	locked := time.Now()
	before := p.committedSeq.Load()
	plan, leaves := treePlan(events.ReclaimShareRatio, 3, 3, 4)
	for time.Since(locked) < 3*keepAliveAckWait { // traffic while commits wait
		m.randomEvents(rng, "tree", plan, leaves, 4, 10)
		time.Sleep(200 * time.Millisecond)
	}
	if got := p.committedSeq.Load(); got != before {
		t.Fatalf("committed %d while PostgreSQL held the offset row (from %d): the lock did not hold the commits", got, before)
	}
	if n := p.inflight.held(); n == 0 {
		t.Fatal("the projector held no message while its commits waited")
	} else {
		t.Logf("%d messages held unacknowledged while the commits waited", n)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	held := time.Since(locked)
	finishHeld(t, r, db, m, held)
}

// finishHeld waits for the projector to catch up, then long enough for a
// redelivery to come, stops it, and checks that every event was delivered
// once after being held for held, and the tables against the model.
func finishHeld(t *testing.T, r *running, db *pgxpool.Pool, m *model, held time.Duration) {
	t.Helper()
	if err := r.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	time.Sleep(keepAliveAckWait + time.Second) // a redelivery would come by now
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	checkDeliveredOnce(t, m, held)
	checkAgainstModel(t, db, m)
}
