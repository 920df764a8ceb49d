package test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/pgcluster"
	"github.com/cluster-ledger/ledger/internal/pgdump"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/migrations"
)

// TestPostgresKilledUnderAsynchronousCommit: the projector commits
// asynchronously (the default, docs/decisions.md #305). Its PostgreSQL is
// killed with SIGKILL twice while the projector process works through a
// backlog in small batches (each written in one pipelined round trip),
// with the WAL writer slowed down so that the kill loses batches
// PostgreSQL had acknowledged. PostgreSQL is started again on the same
// data; the same projector process, never restarted, finds the offset
// behind what it committed, starts again from what PostgreSQL holds and
// finishes: every table equals an uninterrupted projection of the same
// log, so nothing was lost or written twice.
func TestPostgresKilledUnderAsynchronousCommit(t *testing.T) {
	postgresKilledUnderAsynchronousCommit(t)
}

// TestPostgresKilledUnderAsynchronousCommitOverlapped is the same with
// every batch written by COPY (--pipeline-rows 0), each one's rows
// appended while the batch before commits (docs/decisions.md #439): the
// batch begun beside a lost one finds the offset behind too.
func TestPostgresKilledUnderAsynchronousCommitOverlapped(t *testing.T) {
	postgresKilledUnderAsynchronousCommit(t, "--pipeline-rows", "0")
}

func postgresKilledUnderAsynchronousCommit(t *testing.T, extra ...string) {
	s := newStack(t)
	publishRandomPools(t, s.js, 8, 600)
	want := newDB(t)
	s.project(t, want)
	info, err := mustStream(t, s.js).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	last := info.State.LastSeq

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// As root PostgreSQL runs as its own user, which must pass through
	// the data directory's parents: t.TempDir()'s are 0700.
	parent, err := os.MkdirTemp("", "pgkill-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(parent, "pg")
	port := freePort(t)
	authDir := filepath.Join(parent, "pg-auth")
	pg := startPrivatePG(t, ctx, dataDir, authDir, port)
	if err := migrations.Up(ctx, pg.URL()); err != nil {
		t.Fatal(err)
	}
	// Asynchronous commits stay in PostgreSQL's memory until the WAL
	// writer flushes them: at most 10 s here (200 ms by default), so a
	// kill loses the last batches for sure.
	if _, err := pgxExec(ctx, pg.URLFor(pgcluster.DefaultDatabase), `ALTER SYSTEM SET wal_writer_delay = '10s'`, `SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	got, err := pgxpool.New(ctx, pg.URL()) // the owner: the test reads every table
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()

	var stderr lockedBuffer
	cmd := exec.Command(projectorBinary(t), append([]string{"--nats-url", s.natsURL, "--nats-creds", testenv.Creds(t, s.natsURL, natsauth.Projector),
		"--database-url", pg.URLAs(migrations.RoleProjector), "--batch", "20", "--connect-timeout", "0"}, extra...)...) // as deployed: the projector's role
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			os.Stderr.WriteString(stderr.String())
		}
	}()
	for kill := range 2 {
		waitOffsetAbove(t, got, uint64(1200*(kill+1)))
		before := offset(t, got)
		killPostgres(t, dataDir)
		if before >= last {
			t.Fatalf("kill %d came after the projector had finished (offset %d of %d): nothing was interrupted", kill+1, before, last)
		}
		pg = startPrivatePG(t, ctx, dataDir, authDir, port)
		got.Reset()
		t.Logf("kill %d: the projector had committed %d; after the restart PostgreSQL holds %d", kill+1, before, offset(t, got))
	}
	deadline := time.Now().Add(3 * time.Minute)
	for offset(t, got) < last {
		if time.Now().After(deadline) {
			t.Fatalf("the projector did not finish after the kills: at %d of %d", offset(t, got), last)
		}
		if cmd.ProcessState != nil {
			t.Fatal("the projector exited")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(stderr.String(), "PostgreSQL lost committed batches") {
		t.Errorf("no kill lost a batch PostgreSQL had acknowledged: the test did not test what it says\n%s", stderr.String())
	}
	w, err := pgdump.Tables(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	g, err := pgdump.Tables(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	if d := pgdump.Diff(w, g); d != "" {
		t.Fatalf("after two SIGKILLs of PostgreSQL the projection differs from an uninterrupted one at %s", d)
	}
}

// startPrivatePG starts (again) the private cluster in dataDir on port,
// with the ledger's roles (their passwords in authDir), as ledger dev does.
func startPrivatePG(t *testing.T, ctx context.Context, dataDir, authDir string, port int) *pgcluster.Cluster {
	t.Helper()
	c, err := pgcluster.Start(ctx, pgcluster.WithDataDir(dataDir), pgcluster.WithAuthDir(authDir), pgcluster.WithRoles(migrations.Roles...),
		pgcluster.WithPort(port), pgcluster.WithLog(&bytes.Buffer{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// killPostgres kills the cluster's postmaster with SIGKILL and waits
// until it and its children are gone.
func killPostgres(t *testing.T, dataDir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(pid, 0) == nil && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
}

func pgxExec(ctx context.Context, url string, stmts ...string) (int, error) {
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	for i, q := range stmts {
		if _, err := db.Exec(ctx, q); err != nil {
			return i, err
		}
	}
	return len(stmts), nil
}
