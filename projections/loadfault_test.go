package projections

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/migrations"
)

// syncLog is a projector's log, read while it is written.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *syncLog) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// loadFaults makes the projector's loads of pools from PostgreSQL fail,
// as PostgreSQL does when it restarts, drops a connection or runs a
// statement past statement_timeout: an administrator locks
// ownership_history (which every pool load reads and these pools'
// batches never write) for a moment, and each load that waits on it is
// cancelled (SQLSTATE 57014, what statement_timeout raises) or its
// session ended (57P01, what a restart or a dropped connection does), in
// turn; now and then every session of the projector's role is ended at
// once, the projector lock's included. It runs until stop (or the
// test's end) and counts the loads it failed.
type loadFaults struct {
	cancelled, terminated, sweeps atomic.Int64
	quit, done                    chan struct{}
	once                          sync.Once
}

// stop ends the faults and waits until they have.
func (f *loadFaults) stop() {
	f.once.Do(func() { close(f.quit) })
	<-f.done
}

// sqlWaitingLoads finds the projector's sessions of this database
// waiting on a lock with a pool load (sqlOpenOwnHistory, loadPools).
const sqlWaitingLoads = `SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND usename = $1 AND wait_event_type = 'Lock' AND query LIKE '%FROM ownership o%'`

func startLoadFaults(t *testing.T, admin *pgxpool.Pool) *loadFaults {
	t.Helper()
	f := &loadFaults{quit: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(f.stop)
	go func() {
		defer close(f.done)
		ctx := context.Background()
		for round := 0; ; round++ {
			select {
			case <-f.quit:
				return
			case <-time.After(200 * time.Millisecond): // a load retried after its backoff may go through
			}
			if round%10 == 9 {
				var n int64
				if err := admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
					WHERE datname = current_database() AND usename = $1`, migrations.RoleProjector).Scan(&n); err != nil {
					t.Errorf("end the projector's sessions: %v", err)
					return
				}
				f.sweeps.Add(1)
				continue
			}
			err := pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `LOCK TABLE ownership_history IN ACCESS EXCLUSIVE MODE`); err != nil {
					return err
				}
				for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
					// On another session: a transaction sees one snapshot
					// of pg_stat_activity.
					rows, _ := admin.Query(ctx, sqlWaitingLoads, migrations.RoleProjector)
					pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
					if err != nil {
						return err
					}
					if len(pids) == 0 {
						continue
					}
					fn, count := "pg_cancel_backend", &f.cancelled
					if (f.cancelled.Load()+f.terminated.Load())%2 == 1 {
						fn, count = "pg_terminate_backend", &f.terminated
					}
					for _, pid := range pids {
						var ok bool
						if err := admin.QueryRow(ctx, `SELECT `+fn+`($1)`, pid).Scan(&ok); err != nil {
							return err
						}
						if ok {
							count.Add(1)
						}
					}
					return nil
				}
				return nil
			})
			if err != nil {
				t.Errorf("fail the projector's loads: %v", err)
				return
			}
		}
	}()
	return f
}

// TestTemporaryLoadFailuresRetried: while events of 60 pools flow for
// 10 s and the projector (its PostgreSQL role and NATS identity) keeps 4
// of them in memory, so that most batches take pools up again from
// PostgreSQL, those loads fail over and over as they do while PostgreSQL
// restarts, drops connections or times statements out (loadFaults). The
// projector retries them with its backoff and goes on: it is still
// running at the end, every event is projected exactly once, none is
// refused for it, and the tables equal the model's fold of the log and a
// projection made without faults.
func TestTemporaryLoadFailuresRetried(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	d, db := newRoleDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(25, 343))
	const pools = 60
	publishTreePools(m, rng, pools, 0)
	plan, leaves := treePlan(events.ReclaimShareRatio, 2, 3)

	var logs syncLog
	r := start(New(asProjector(t, js), db, WithLogger(logs.logger()), WithResidentPools(4), WithBatchSize(10), WithSnapshotEvery(50)))
	faults := startLoadFaults(t, testdb.Pool(t, d.Admin))
	for begin := time.Now(); time.Since(begin) < 10*time.Second; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-r.done:
			t.Fatalf("the projector stopped under temporary load failures: %v\n%s", err, logs.String())
		default:
		}
		for range 5 {
			m.randomEvents(rng, poolName(rng.IntN(pools)), plan, leaves, 2, 1)
		}
	}
	faults.stop()
	if err := r.waitFor(t, m); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	faults.report(t, m, pools, &logs)
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v\n%s", err, logs.String())
	}
	checkAgainstModel(t, db, m)
	ref := newDB(t)
	project(t, New(asProjector(t, js), ref, WithLogger(quietLog()), WithBatchSize(10), WithSnapshotEvery(50)), m)
	diffDumps(t, dump(t, ref), dump(t, db))
}

// report logs what the faults did, and fails the test when they hit too
// few loads to prove anything or the projector logged no load retried.
func (f *loadFaults) report(t *testing.T, m *model, pools int, logs *syncLog) {
	t.Helper()
	t.Logf("%d events on %d pools; loads cancelled %d times, their sessions ended %d times, every session of the projector ended %d times; %d load retries logged",
		m.n, pools, f.cancelled.Load(), f.terminated.Load(), f.sweeps.Load(), strings.Count(logs.String(), "load pools failed; retrying"))
	if f.cancelled.Load() < 3 || f.terminated.Load() < 3 || !strings.Contains(logs.String(), "load pools failed; retrying") {
		t.Fatalf("the faults hit too few loads (cancelled %d, ended %d): the test proved nothing\n%s", f.cancelled.Load(), f.terminated.Load(), logs.String())
	}
}

func poolName(i int) string { return fmt.Sprintf("p%02d", i) }

// TestTemporaryLoadFailuresRetriedPartitioned is
// TestTemporaryLoadFailuresRetried for partitioned instances: two
// instances share 4 partitions, one is stopped and another started while
// events flow, so partitions move and their gaps are filled from the
// stream, every pool of a fill or a batch taken up again from PostgreSQL
// while the loads fail.
func TestTemporaryLoadFailuresRetriedPartitioned(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	d, db := newRoleDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(25, 344))
	const pools = 60
	publishTreePools(m, rng, pools, 0)
	plan, leaves := treePlan(events.ReclaimShareRatio, 2, 3)

	var logs syncLog
	opts := []Option{WithLogger(logs.logger()), WithResidentPools(2), WithSnapshotEvery(50)}
	a := startGroupWith(t, js, db, 4, "a", opts...)
	b := startGroupWith(t, js, db, 4, "b", opts...)
	faults := startLoadFaults(t, testdb.Pool(t, d.Admin))
	var c *group
	running := func() {
		t.Helper()
		for _, g := range []*group{a, b, c} {
			if g == nil {
				continue
			}
			select {
			case err := <-g.done:
				g.done <- err
				t.Fatalf("an instance stopped under temporary load failures: %v\n%s", err, logs.String())
			default:
			}
		}
	}
	for begin := time.Now(); time.Since(begin) < 12*time.Second; time.Sleep(10 * time.Millisecond) {
		running()
		if a != nil && time.Since(begin) > 4*time.Second {
			a.stop(t)
			a = nil
		}
		if c == nil && time.Since(begin) > 7*time.Second {
			c = startGroupWith(t, js, db, 4, "c", opts...)
		}
		for range 5 {
			m.randomEvents(rng, poolName(rng.IntN(pools)), plan, leaves, 2, 1)
		}
	}
	faults.stop()
	waitProjected(t, db, m, 90*time.Second)
	running()
	faults.report(t, m, pools, &logs)
	checkAgainstModel(t, db, m)
}
