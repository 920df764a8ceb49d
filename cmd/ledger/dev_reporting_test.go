package main

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cluster-ledger/ledger/internal/pgcluster"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// TestDevHoldsTheReportingRoleToItsBounds: the holder of the printed
// DATABASE_URL (the reporting role) lifts its own statement_timeout and
// idle_in_transaction_session_timeout with SET, which PostgreSQL 15
// cannot deny; ledger dev's guard holds its sessions to the bounds all
// the same (shortened here from 5 minutes, 1 and 15 to 2 s, 2 and 8):
// a statement is cancelled at its bound, one that catches the cancel
// ends with its session CancelGrace later, a session idle in a
// transaction is ended, and so is a transaction kept open by short
// statements (its snapshot would hold VACUUM back). A session that
// behaves is left alone. A session that SETs work_mem and
// hash_mem_multiplier sky-high and grows a hash table is ended at its
// memory bound (512 MiB, shortened here to 256), before the OOM killer
// would restart the server under every session; the server goes on
// (decision 394). A session that LISTENs and reads nothing while
// another fills the notification queue has every session of the role
// ended once the queue passes its bound (1% of its 8 GB, shortened here
// to 0.2%), and the queue is emptied (decision 395).
func TestDevHoldsTheReportingRoleToItsBounds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bounds := pgcluster.SessionBounds{Statement: 2 * time.Second, IdleInTransaction: 2 * time.Second, Transaction: 8 * time.Second, Memory: 256 << 20, NotifyQueue: 0.002}
	env, data := startDevWithPostgres(t, ctx, cancel, "dev-reporting-", bounds)
	reporting := env["DATABASE_URL"]

	// session connects as the reporting role and lifts both timeouts.
	session := func(t *testing.T) *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, reporting)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		var user string
		if err := c.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil || user != "ledger_reporting" {
			t.Fatalf("DATABASE_URL is %s (%v), want ledger_reporting", user, err)
		}
		for _, q := range []string{"SET statement_timeout = 0", "SET idle_in_transaction_session_timeout = 0"} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v (PostgreSQL lets any role do it)", q, err)
			}
		}
		return c
	}
	code := func(err error) string {
		var pg *pgconn.PgError
		if errors.As(err, &pg) {
			return pg.Code
		}
		return ""
	}
	// within says how long f took, and fails unless it was from lo to hi.
	within := func(t *testing.T, what string, lo, hi time.Duration, f func() error) error {
		t.Helper()
		start := time.Now()
		err := f()
		took := time.Since(start)
		t.Logf("%s: ended after %v: %v", what, took.Round(10*time.Millisecond), err)
		if took < lo || took > hi {
			t.Errorf("%s ended after %v, want %v to %v", what, took, lo, hi)
		}
		return err
	}
	const slack = 2 * time.Second // the guard looks every 250 ms; the machine is shared

	t.Run("group", func(t *testing.T) {
		t.Run("a statement is cancelled at its bound", func(t *testing.T) {
			t.Parallel()
			c := session(t)
			err := within(t, "pg_sleep(60)", bounds.Statement, bounds.Statement+slack, func() error {
				_, err := c.Exec(ctx, "SELECT pg_sleep(60)")
				return err
			})
			if code(err) != "57014" { // query_canceled
				t.Errorf("pg_sleep(60): %v, want the statement cancelled", err)
			}
			if _, err := c.Exec(ctx, "SELECT 1"); err != nil {
				t.Errorf("the session after its statement was cancelled: %v", err)
			}
		})
		t.Run("a statement that catches the cancel ends with its session", func(t *testing.T) {
			t.Parallel()
			c := session(t)
			within(t, "a DO block catching query_canceled", bounds.Statement+pgcluster.CancelGrace, bounds.Statement+pgcluster.CancelGrace+slack, func() error {
				_, err := c.Exec(ctx, `DO $$ BEGIN LOOP BEGIN PERFORM pg_sleep(60); EXCEPTION WHEN query_canceled THEN NULL; END; END LOOP; END $$`)
				return err
			})
			if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
				t.Error("the session that caught the cancel still runs")
			}
		})
		t.Run("a session idle in a transaction is ended", func(t *testing.T) {
			t.Parallel()
			c := session(t)
			if _, err := c.Exec(ctx, "BEGIN"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Exec(ctx, "SELECT count(*) FROM events"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(bounds.IdleInTransaction + slack)
			if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
				t.Errorf("a session idle in a transaction for %v still runs", bounds.IdleInTransaction+slack)
			}
		})
		t.Run("a session that takes transaction IDs is ended", func(t *testing.T) {
			// A role that only reads never needs a transaction ID; a loop
			// of txid_current() (or NOTIFY) and COMMIT takes 100,000 a
			// second, and 200 million bring every table's anti-wraparound
			// VACUUM, 2 billion stop every write (decision 466).
			t.Parallel()
			c := session(t)
			var before int64
			if err := c.QueryRow(ctx, "SELECT txid_current()").Scan(&before); err != nil {
				t.Fatal(err)
			}
			within(t, "a loop of txid_current() and COMMIT", 0, bounds.Statement, func() error {
				_, err := c.Exec(ctx, `DO $$ BEGIN LOOP PERFORM txid_current(); COMMIT; END LOOP; END $$`)
				return err
			})
			if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
				t.Error("the session taking transaction IDs still runs")
			}
		})
		t.Run("a long transaction of short statements is ended", func(t *testing.T) {
			t.Parallel()
			c := session(t)
			if _, err := c.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
				t.Fatal(err)
			}
			within(t, "a transaction of a statement every 0.5 s", bounds.Transaction, bounds.Transaction+slack, func() error {
				for {
					if _, err := c.Exec(ctx, "SELECT count(*) FROM consumer_state"); err != nil {
						return err
					}
					time.Sleep(500 * time.Millisecond)
				}
			})
		})
		t.Run("a session past its memory bound is ended", func(t *testing.T) {
			t.Parallel()
			c := session(t)
			for _, q := range []string{"SET work_mem = '100GB'", "SET hash_mem_multiplier = 1000"} {
				if _, err := c.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v (PostgreSQL lets any role do it)", q, err)
				}
			}
			// 900 values of a MiB gathered into one array: 900 MiB of the
			// backend's memory, then as much again for the array, when
			// nothing stops it. The guard ended it after 1.5 to 2 s at load
			// average 5 (three runs); a hash aggregate of five million
			// small groups grew too slowly there, and the statement bound,
			// two seconds, ended it first. Values of 100 MiB were not
			// ended by the guard in time either.
			// The guard, not the statement bound, ends it: the code says
			// which (57P01, not 57014), so on a loaded machine the time may
			// run past the statement bound by the guard's look.
			var values int64
			err := within(t, "an array of 900 values of 1 MiB in memory", 0, bounds.Statement+slack, func() error {
				return c.QueryRow(ctx, "SELECT cardinality(array_agg(v)) FROM (SELECT repeat('x', 1048576) || g AS v FROM generate_series(1, 900) g) t").Scan(&values)
			})
			if code(err) != "57P01" { // admin_shutdown: pg_terminate_backend
				t.Errorf("the array: %d values, %v; want its session ended at %d MiB", values, err, bounds.Memory>>20)
			}
			// The server went on: another session of the role works.
			other := session(t)
			if _, err := other.Exec(ctx, "SELECT count(*) FROM events"); err != nil {
				t.Errorf("another session after the memory bound: %v", err)
			}
		})
		t.Run("a session that behaves is left alone", func(t *testing.T) {
			t.Parallel()
			c := session(t)
			for range 10 { // 10 s of statements of 1 s, each its own transaction
				if _, err := c.Exec(ctx, "SELECT pg_sleep(1)"); err != nil {
					t.Fatalf("a 1 s statement: %v", err)
				}
			}
		})
	})
	// After the group: past the queue's bound every session of the role
	// is ended, the group's too.
	t.Run("a listener holding the notification queue is ended", func(t *testing.T) {
		usage := func() float64 {
			var u float64
			c := session(t)
			if err := c.QueryRow(ctx, "SELECT pg_notification_queue_usage()").Scan(&u); err != nil {
				t.Fatal(err)
			}
			c.Close(ctx)
			return u
		}
		listener := session(t)
		if _, err := listener.Exec(ctx, "LISTEN flood"); err != nil {
			t.Fatalf("LISTEN: %v (PostgreSQL lets any role do it)", err)
		}
		// The listener now reads nothing; another session sends 40 MB of
		// notifications (0.5% of the queue), which stay on disk for it.
		// It is the owner's: a session of the reporting role that sends
		// them holds a transaction ID while it commits them, and may be
		// ended for it first (decision 466).
		ownerPassword, err := os.ReadFile(filepath.Join(data, "pg-auth", "ledger.password"))
		if err != nil {
			t.Fatal(err)
		}
		ownerURL, err := url.Parse(reporting)
		if err != nil {
			t.Fatal(err)
		}
		ownerURL.User = url.UserPassword("ledger", strings.TrimSpace(string(ownerPassword)))
		sender, err := pgx.Connect(ctx, ownerURL.String())
		if err != nil {
			t.Fatal(err)
		}
		defer sender.Close(context.Background())
		start := time.Now()
		if _, err := sender.Exec(ctx, `DO $$ BEGIN FOR i IN 1..5000 LOOP PERFORM pg_notify('flood', i || repeat('x', 7990)); END LOOP; END $$`); err != nil {
			t.Fatalf("pg_notify: %v (PostgreSQL lets any role do it)", err)
		}
		// Any statement of the listener would read the notifications and
		// free the queue: it is left alone until the guard has looked.
		time.Sleep(slack + time.Second)
		u := usage()
		if _, err := listener.Exec(ctx, "SELECT 1"); err == nil {
			t.Errorf("the listener holding %.3f%% of the notification queue still runs after %v", u*100, time.Since(start))
		}
		if u > bounds.NotifyQueue {
			t.Errorf("the notification queue is %.3f%% full %v after it was filled, want at most %.3f%%", u*100, time.Since(start), bounds.NotifyQueue*100)
		}
	})
}

// startDevWithPostgres runs ledger dev in process, in a directory
// PostgreSQL's user can reach (t.TempDir()'s parent is 0700), with the
// reporting role's session bounds shortened where bounds says, and
// returns the environment it prints and its data directory; the test's
// end cancels it (cancel) and waits for it to stop.
func startDevWithPostgres(t *testing.T, ctx context.Context, cancel context.CancelFunc, prefix string, bounds pgcluster.SessionBounds) (map[string]string, string) {
	t.Helper()
	parent, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := devConfig{data: filepath.Join(parent, "data"), httpAddr: "127.0.0.1:0", natsAddr: "127.0.0.1:0", natsCluster: 1,
		duplicateWindow: stream.DuplicateWindow, snapshotEvery: 100, reportingBounds: bounds}
	cfg.natsSync.Always = true
	env, done := startDevInProcess(t, ctx, cfg)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
	})
	return env, cfg.data
}
