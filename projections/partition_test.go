package projections

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
	pq "github.com/cluster-ledger/ledger/projections/query"
)

func TestPartitionOfIsStableAndSpreads(t *testing.T) {
	// Part of the projection's format: these must never change.
	for pool, want := range map[string]int{"seed": 4, "tree": 5, "prio": 7, "gpu": 5} {
		if got := PartitionOf(pool, 8); got != want {
			t.Errorf("PartitionOf(%q, 8) = %d, want %d", pool, got, want)
		}
	}
	counts := make([]int, 8)
	for i := range 8000 {
		counts[PartitionOf(fmt.Sprintf("pool-%d", i), 8)]++
	}
	for k, c := range counts {
		if c < 800 || c > 1200 {
			t.Errorf("partition %d holds %d of 8000 pools, want about 1000", k, c)
		}
	}
}

func TestBadPartitionsRefused(t *testing.T) {
	for _, n := range []int{0, -1, MaxPartitions + 1} {
		if _, err := NewGroup(nil, nil, n); !errors.Is(err, ErrBadPartition) {
			t.Errorf("NewGroup(%d) = %v, want ErrBadPartition", n, err)
		}
	}
	err := New(nil, nil, WithPartition(4, 4)).Run(context.Background())
	if !errors.Is(err, ErrBadPartition) {
		t.Errorf("partition 4 of 4: %v, want ErrBadPartition", err)
	}
}

// group is a projector instance running in the background.
type group struct {
	g      *Group
	cancel context.CancelFunc
	done   chan error
}

// logsOnFailure is a logger whose lines the test prints if it fails.
func logsOnFailure(t *testing.T, instance string) *slog.Logger {
	var mu sync.Mutex
	var buf bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("instance %s logged:\n%s", instance, buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(b)
	}), nil))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func startGroup(t *testing.T, js jetstream.JetStream, db *pgxpool.Pool, n int, instance string) *group {
	t.Helper()
	return startGroupWith(t, js, db, n, instance)
}

func startGroupWith(t *testing.T, js jetstream.JetStream, db *pgxpool.Pool, n int, instance string, extra ...Option) *group {
	t.Helper()
	opts := append([]Option{WithLogger(logsOnFailure(t, instance)), WithBatchSize(20), WithInstance(instance), WithPinnedTTL(2 * time.Second)}, extra...)
	g, err := NewGroup(asProjector(t, js), db, n, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &group{g: g, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- g.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *group) stop(t *testing.T) {
	r.cancel()
	if err := <-r.done; err != nil {
		t.Errorf("group Run: %v", err)
	}
	r.done <- nil
}

// waitProjected waits until every pool of m is projected up to its last
// event and every partition's offset has reached the stream's end.
func waitProjected(t *testing.T, db *pgxpool.Pool, m *model, within time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	ctx := context.Background()
	for {
		seqs, err := pq.AllProjectedSeqs(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		done := true
		for pool, last := range m.last {
			done = done && seqs[pool] >= last
		}
		if at, err := pq.ProjectorOffset(ctx, db, ""); err != nil || at < m.lastSeq {
			done = false
		}
		if done {
			return time.Since(begin)
		}
		if time.Since(begin) > within {
			var behind []string
			for pool, last := range m.last {
				if seqs[pool] < last {
					behind = append(behind, fmt.Sprintf("%s(p%d) at %d of %d", pool, PartitionOf(pool, 4), seqs[pool], last))
				}
			}
			offs := column(t, db, `SELECT name || '=' || stream_seq || ' by ' || owner FROM projector_offsets ORDER BY name`)
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			var stacks []string
			for _, g := range strings.Split(string(buf[:n]), "\n\n") {
				if strings.Contains(g, "projections.(*") {
					stacks = append(stacks, g)
				}
			}
			t.Fatalf("not projected within %v: behind %v; offsets %v (stream at %d)\n%s", within, behind, offs, m.lastSeq, strings.Join(stacks, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func column(t *testing.T, db *pgxpool.Pool, sql string) []string {
	t.Helper()
	rows, _ := db.Query(context.Background(), sql)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func owners(t *testing.T, db *pgxpool.Pool) map[string]int {
	t.Helper()
	rows := column(t, db, `SELECT owner FROM projector_offsets WHERE partitions IS NOT NULL`)
	out := map[string]int{}
	for _, o := range rows {
		out[o]++
	}
	return out
}

// publishPools publishes the seed scenario on pools p0..p(n-1) and rounds
// of demand on each.
func publishPools(m *model, rng *rand.Rand, n, rounds int) {
	for i := range n {
		m.publishScenario(seedFile, fmt.Sprintf("p%d", i))
	}
	for range rounds {
		for i := range n {
			m.publish(fmt.Sprintf("p%d", i), &events.Demand{Demands: map[string]int64{"/A": rng.Int64N(100), "/B/B1": rng.Int64N(100)}})
		}
	}
}

// Two instances share 4 partitions; the tables equal the model's fold.
// One instance is stopped while events flow: the other folds its
// partitions within seconds. A third, started while events flow, is
// given part of the partitions.
func TestPartitionedInstancesShareAndTakeOver(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(3, 4))
	publishMix(m, rng, 100)
	publishPools(m, rng, 12, 2)

	a := startGroup(t, js, db, 4, "a")
	b := startGroup(t, js, db, 4, "b")
	took := waitProjected(t, db, m, 60*time.Second)
	t.Logf("two instances projected %d events in %v", m.n, took)
	checkAgainstModel(t, db, m)

	// Events keep flowing until both instances hold partitions.
	deadline := time.Now().Add(30 * time.Second)
	for o := owners(t, db); o["a"] == 0 || o["b"] == 0; o = owners(t, db) {
		if time.Now().After(deadline) {
			t.Fatalf("partitions by owner %v after 30s, want both a and b", o)
		}
		publishPools(m, rng, 12, 1)
		time.Sleep(200 * time.Millisecond)
	}
	waitProjected(t, db, m, 30*time.Second)
	t.Logf("partitions by owner: %v", owners(t, db))

	a.stop(t)
	stopped := time.Now()
	publishPools(m, rng, 12, 3)
	handover := waitProjected(t, db, m, 30*time.Second)
	t.Logf("after instance a stopped, b projected everything within %v of the stop", time.Since(stopped))
	if o := owners(t, db); o["b"] != 4 {
		t.Errorf("partitions by owner after a stopped: %v, want b 4", o)
	}
	if handover > 10*time.Second {
		t.Errorf("hand-over took %v, want under 10s (pinned TTL 2s)", handover)
	}
	checkAgainstModel(t, db, m)

	c := startGroup(t, js, db, 4, "c")
	added := time.Now()
	for o := owners(t, db); o["c"] == 0; o = owners(t, db) {
		if time.Since(added) > 30*time.Second {
			t.Fatalf("partitions by owner %v 30s after c started, want some for c", o)
		}
		publishPools(m, rng, 12, 1)
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("instance c folds partitions %v after it started: %v", time.Since(added), owners(t, db))
	waitProjected(t, db, m, 30*time.Second)
	checkAgainstModel(t, db, m)
	b.stop(t)
	c.stop(t)
}

// An unpartitioned projector refuses a database that partitioned
// projectors write, and the reverse: both would fold the same pools.
func TestOtherPartitioningRefused(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	m.publishScenario(seedFile, "seed")
	g := startGroup(t, js, db, 2, "a")
	waitProjected(t, db, m, 30*time.Second)
	g.stop(t)

	err := New(asProjector(t, js), db, WithLogger(quietLog())).Run(context.Background())
	if !errors.Is(err, ErrOtherPartitioning) {
		t.Fatalf("unpartitioned projector on a partitioned projection: %v, want ErrOtherPartitioning", err)
	}
	err = New(asProjector(t, js), db, WithLogger(quietLog()), WithPartition(0, 3)).Run(context.Background())
	if !errors.Is(err, ErrOtherPartitioning) {
		t.Fatalf("3 partitions on a projection of 2: %v, want ErrOtherPartitioning", err)
	}
	names := column(t, db, `SELECT name FROM projector_offsets ORDER BY name`)
	if want := []string{"projector-p0of2", "projector-p1of2"}; !slices.Equal(names, want) {
		t.Errorf("projector_offsets names %v, want %v", names, want)
	}
}

// withFoldHook runs h before each fold (tests: a panic halts the pool).
func withFoldHook(h func(pool string, seq uint64)) Option {
	return func(c *config) { c.foldHook = h }
}

// TestPartitionedHaltedPoolResumes: a partitioned projector halts a pool
// whose fold fails and goes on with the others; started again with the
// cause fixed (two instances at once), the instance that holds the
// pool's partition catches the pool up from its checkpoint and lifts the
// halt, once, and the projection is the log's.
func TestPartitionedHaltedPoolResumes(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(7, 8))
	badSeq, badLast, hook := publishBadPool(m, rng, 40)
	a := startGroupWith(t, js, db, 4, "a", withFoldHook(hook))
	waitProjected(t, db, m, 60*time.Second)
	if got := column(t, db, `SELECT seq::text FROM halted_pools WHERE pool = 'bad'`); len(got) != 1 || got[0] != fmt.Sprint(badSeq) {
		t.Fatalf("halted_pools for bad: %v, want seq %d", got, badSeq)
	}
	a.stop(t)

	m.last["bad"] = badLast
	m.publish("bad", &events.Demand{Demands: map[string]int64{"/z": 2}}) // wakes the pool's partition
	b := startGroupWith(t, js, db, 4, "b")
	c := startGroupWith(t, js, db, 4, "c")
	waitProjected(t, db, m, 60*time.Second)
	if got := column(t, db, `SELECT pool FROM halted_pools`); len(got) != 0 {
		t.Fatalf("halted_pools after the fixed restart: %v, want none", got)
	}
	b.stop(t)
	c.stop(t)
	checkAgainstModel(t, db, m)
}

// TestPartitionHolderSlowerThanAckWaitNotDeliveredAgain: an instance that
// holds what it was delivered longer than the partition consumers' ack
// wait (one pinned TTL), here a fold that stalls for three TTLs, is not
// delivered it again: it tells NATS it is still working on it
// (inflight.go). Before, NATS delivered the whole window again every
// TTL to the same instance (the cluster test: 3,691 deliveries for a
// 2,118-event log after a holder stalled in a request while the stream
// elected a leader).
func TestPartitionHolderSlowerThanAckWaitNotDeliveredAgain(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(9, 10))
	publishPools(m, rng, 8, 10)
	const ttl = 2 * time.Second
	var stall sync.Once
	stalled := make(chan struct{})
	hook := func(pool string, seq uint64) {
		if seq > m.lastSeq/3 {
			stall.Do(func() { time.Sleep(3 * ttl); close(stalled) })
		}
	}
	g := startGroupWith(t, js, db, 2, "a", withFoldHook(hook))
	<-stalled
	waitProjected(t, db, m, 60*time.Second)
	checkAgainstModel(t, db, m)
	g.stop(t)

	var delivered, redelivered uint64
	for k := range 2 {
		cons, err := js.Consumer(context.Background(), stream.Name, PartitionName(DefaultName, k, 2))
		if err != nil {
			t.Fatal(err)
		}
		info := cons.CachedInfo()
		delivered += info.Delivered.Consumer
		redelivered += uint64(info.NumRedelivered)
	}
	t.Logf("%d deliveries for %d events, the fold stalled %v (ack wait %v)", delivered, m.lastSeq, 3*ttl, ttl)
	if delivered != m.lastSeq || redelivered != 0 {
		t.Errorf("%d deliveries (%d redelivered) for %d events: a live holder was delivered again what it held", delivered, redelivered, m.lastSeq)
	}
}
