package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// syncBuffer is a log writer safe to read while Start writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// reachableDir is a temporary directory PostgreSQL's user can reach
// when the tests run as root: under os.TempDir(), which every user may
// enter, mode 0755 (its own, set by this test), removed when the test
// ends. t.TempDir() is not one: its parent is 0700.
func reachableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgcluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func startCluster(t *testing.T, ctx context.Context, dataDir string, log *syncBuffer) *Cluster {
	t.Helper()
	c, err := Start(ctx, WithDataDir(dataDir), WithFsync(false), WithLog(log))
	if err != nil {
		t.Fatalf("Start: %v\nlog:\n%s", err, log)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

func exec1(t *testing.T, ctx context.Context, url, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestStartStopRestartKeepsData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dataDir := filepath.Join(reachableDir(t), "pg data") // a space, to exercise quoting
	log := &syncBuffer{}

	t0 := time.Now()
	c := startCluster(t, ctx, dataDir, log)
	t.Logf("first start (initdb + start) took %v", time.Since(t0))
	if c.Reused() {
		t.Fatal("a fresh data directory reported a reused server")
	}
	wantPrefix := "postgres://ledger:"
	if !strings.HasPrefix(c.URL(), wantPrefix) || !strings.HasSuffix(c.URL(), "/ledger?sslmode=disable") {
		t.Fatalf("URL() = %q", c.URL())
	}
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); err != nil {
		t.Fatalf("no PG_VERSION after Start: %v", err)
	}
	exec1(t, ctx, c.URL(), "CREATE TABLE kept (v text)")
	exec1(t, ctx, c.URL(), "INSERT INTO kept VALUES ($1)", "still here")
	port := c.Port()

	if err := c.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := pgx.Connect(ctx, c.URL()); err == nil {
		t.Fatal("server still answers after Stop")
	}

	t0 = time.Now()
	c2 := startCluster(t, ctx, dataDir, log)
	t.Logf("restart took %v", time.Since(t0))
	t.Logf("log:\n%s", log)
	if c2.Port() != port {
		t.Errorf("restart used port %d, want the remembered %d", c2.Port(), port)
	}
	conn, err := pgx.Connect(ctx, c2.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "still here" {
		t.Fatalf("after restart: v=%q err=%v", v, err)
	}
	if strings.Count(log.String(), "pgcluster: initdb") != 1 {
		t.Errorf("initdb should run exactly once; log:\n%s", log)
	}

}

func TestStartReusesRunningServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dataDir := filepath.Join(reachableDir(t), "data")
	c := startCluster(t, ctx, dataDir, &syncBuffer{})
	c2, err := Start(ctx, WithDataDir(dataDir), WithFsync(false))
	if err != nil {
		t.Fatalf("second Start on a running cluster: %v", err)
	}
	if !c2.Reused() || c2.Port() != c.Port() {
		t.Fatalf("second Start: reused=%v port=%d, want reuse of port %d", c2.Reused(), c2.Port(), c.Port())
	}
	exec1(t, ctx, c2.URL(), "SELECT 1")
}

func TestExplicitPortAndDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(ctx, WithDataDir(filepath.Join(reachableDir(t), "data")), WithFsync(false), WithPort(port), WithDatabase("other"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	if c.Port() != port || !strings.Contains(c.URL(), "/other?") {
		t.Fatalf("port %d url %s", c.Port(), c.URL())
	}
	exec1(t, ctx, c.URL(), "SELECT 1")
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	_, err := Start(ctx)
	if !errors.Is(err, ErrNoDataDir) {
		t.Errorf("Start without data dir: %v", err)
	}
	_, err = Start(ctx, WithDataDir(t.TempDir()), WithBinDir("/nonexistent/bin"))
	if !errors.Is(err, ErrBinariesNotFound) {
		t.Fatalf("missing binaries: %v", err)
	}
	if !strings.Contains(err.Error(), "apt-get install postgresql") || !strings.Contains(err.Error(), "/nonexistent/bin") {
		t.Errorf("message should say where it looked and how to install: %v", err)
	}
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != ErrBinariesNotFound {
		t.Errorf("errors.As *Error: %#v", err)
	}
}

func TestFindBinDirFallbacks(t *testing.T) {
	ctx := context.Background()
	fake := t.TempDir()
	for _, name := range requiredBinaries {
		if err := os.WriteFile(filepath.Join(fake, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvBinDir, fake)
	if dir, err := FindBinDir(ctx, ""); err != nil || dir != fake {
		t.Errorf("with $%s: %q, %v", EnvBinDir, dir, err)
	}
	t.Setenv(EnvBinDir, "")
	t.Setenv("PATH", t.TempDir()) // no pg_config
	root := t.TempDir()
	for _, v := range []string{"9.6", "15", "10"} {
		dir := filepath.Join(root, v, "bin")
		os.MkdirAll(dir, 0o755)
		for _, name := range requiredBinaries {
			os.WriteFile(filepath.Join(dir, name), nil, 0o755)
		}
	}
	os.MkdirAll(filepath.Join(root, "16", "bin"), 0o755) // incomplete: skipped
	old := debianGlob
	debianGlob = filepath.Join(root, "*", "bin")
	defer func() { debianGlob = old }()
	if dir, err := FindBinDir(ctx, ""); err != nil || dir != filepath.Join(root, "15", "bin") {
		t.Errorf("glob fallback: %q, %v", dir, err)
	}
	debianGlob = filepath.Join(root, "none", "*", "bin")
	if _, err := FindBinDir(ctx, ""); !errors.Is(err, ErrBinariesNotFound) {
		t.Errorf("nothing anywhere: %v", err)
	}
}

func TestInitdbFailureCarriesOutput(t *testing.T) {
	ctx := context.Background()
	dataDir := reachableDir(t)
	if err := os.WriteFile(filepath.Join(dataDir, "stray"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Start(ctx, WithDataDir(dataDir), WithFsync(false))
	if !errors.Is(err, ErrInitdb) {
		t.Fatalf("want ErrInitdb, got %v", err)
	}
	if !strings.Contains(err.Error(), "not empty") {
		t.Errorf("the error should quote initdb's output: %v", err)
	}
}

// A server killed without a clean shutdown leaves postmaster.pid behind;
// the next Start must recover (pg_ctl and postgres handle the stale file)
// and keep the committed data.
func TestStartAfterCrash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dataDir := filepath.Join(reachableDir(t), "data")
	c := startCluster(t, ctx, dataDir, &syncBuffer{})
	exec1(t, ctx, c.URL(), "CREATE TABLE kept AS SELECT 42 AS v")

	pid := postmasterPID(t, dataDir)
	p, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	// The postmaster's children notice its death and exit.
	deadline := time.Now().Add(30 * time.Second)
	for processAlive(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "postmaster.pid")); err != nil {
		t.Fatalf("expected a stale postmaster.pid after the kill: %v", err)
	}

	log := &syncBuffer{}
	t0 := time.Now()
	c2, err := Start(ctx, WithDataDir(dataDir), WithFsync(false), WithLog(log))
	if err != nil {
		t.Fatalf("Start after crash: %v\nlog:\n%s", err, log)
	}
	t.Logf("restarted in %v; log:\n%s", time.Since(t0), log)
	t.Cleanup(func() { _ = c2.Stop(context.Background()) })
	if c2.Reused() {
		t.Fatal("a dead server was reported as reused")
	}
	conn, err := pgx.Connect(ctx, c2.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after crash recovery: %d, %v", v, err)
	}
}

func postmasterPID(t *testing.T, dataDir string) int {
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
	return pid
}

// TestPasswordsRequired: without the password nobody connects, not even
// as the superuser over the socket or TCP; the application role is no
// superuser but owns the database; the passwords and the socket
// directory are private.
func TestPasswordsRequired(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dataDir := filepath.Join(reachableDir(t), "data")
	c := startCluster(t, ctx, dataDir, &syncBuffer{})
	for _, u := range []string{
		fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port()),
		fmt.Sprintf("postgres://postgres:wrong@127.0.0.1:%d/postgres?sslmode=disable", c.Port()),
		fmt.Sprintf("postgres://ledger@127.0.0.1:%d/ledger?sslmode=disable", c.Port()),
		fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", c.sockDir, c.Port()),
	} {
		if conn, err := pgx.Connect(ctx, u); err == nil {
			conn.Close(ctx)
			t.Errorf("connected without the password: %s", u)
		}
	}
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var super bool
	var owner string
	if err := conn.QueryRow(ctx, `SELECT rolsuper, pg_get_userbyid(d.datdba) FROM pg_roles r, pg_database d
		WHERE r.rolname = current_user AND d.datname = current_database()`).Scan(&super, &owner); err != nil {
		t.Fatal(err)
	}
	if super || owner != AppRole {
		t.Errorf("application role: superuser %v, database owner %s; want false, %s", super, owner, AppRole)
	}
	if _, err := conn.Exec(ctx, "COPY (SELECT 1) TO PROGRAM 'true'"); err == nil {
		t.Error("the application role may run programs on the server")
	}
	for _, f := range []string{SuperuserPasswordFile, AppPasswordFile} {
		if st, err := os.Stat(filepath.Join(c.AuthDir(), f)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want mode 0600", f, err)
		} else if fileOwner(t, filepath.Join(c.AuthDir(), f)) != os.Geteuid() {
			t.Errorf("%s is not the calling user's", f)
		}
	}
	if st, err := os.Stat(c.AuthDir()); err != nil || st.Mode().Perm() != 0o700 || fileOwner(t, c.AuthDir()) != os.Geteuid() {
		t.Errorf("auth directory %s: %v %v, want the calling user's, mode 0700", c.AuthDir(), st.Mode(), err)
	}
	if strings.HasPrefix(c.AuthDir(), dataDir+string(filepath.Separator)) {
		t.Errorf("the passwords are inside the data directory, which PostgreSQL's user owns")
	}
	if st, err := os.Stat(c.sockDir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("socket directory: %v %v, want mode 0700", st.Mode(), err)
	}
}

// TestSecuresATrustCluster: a data directory initialised with trust (before
// passwords) requires them after the next Start, and its database and tables
// pass to the application role.
func TestSecuresATrustCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dataDir := filepath.Join(reachableDir(t), "data")
	c := startCluster(t, ctx, dataDir, &syncBuffer{})
	exec1(t, ctx, c.URLFor(DefaultDatabase), "CREATE TABLE old (v int)")
	// Make it look like a cluster of before: trust, no password files.
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dataDir, "pg_hba.conf"), []byte("local all all trust\nhost all all 127.0.0.1/32 trust\n"), 0o600)
	os.Remove(filepath.Join(c.AuthDir(), SuperuserPasswordFile))
	c2 := startCluster(t, ctx, dataDir, &syncBuffer{})
	if conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c2.Port())); err == nil {
		conn.Close(ctx)
		t.Fatal("still trusts connections after Start")
	}
	exec1(t, ctx, c2.URL(), "INSERT INTO old VALUES (1)")
	exec1(t, ctx, c2.URL(), "ALTER TABLE old ADD COLUMN w int") // owner
}

// TestServerGetsNoSecretOfTheEnvironment: initdb, pg_ctl and the server
// got the whole environment of the process starting them but PG*, the
// lines `ledger dev` prints among it once pasted (the admin token, a
// role's password), readable in /proc/PID/environ by PostgreSQL's user
// while the server runs. They get the locale, the time zone, PATH and
// TMPDIR only.
func TestServerGetsNoSecretOfTheEnvironment(t *testing.T) {
	t.Setenv("LEDGER_TOKEN", "ldg_not-for-postgres")
	t.Setenv("DATABASE_URL", "postgres://ledger_reporting:not-for-postgres@127.0.0.1:1/ledger")
	t.Setenv("LC_ALL", "C")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dataDir := filepath.Join(reachableDir(t), "pg")
	startCluster(t, ctx, dataDir, &syncBuffer{})
	pidFile, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(pidFile), "\n")
	environ, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(line), "environ"))
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Split(string(environ), "\x00")
	for _, kv := range env {
		if strings.Contains(kv, "not-for-postgres") {
			t.Errorf("the server's environment holds %q", kv)
		}
	}
	if !slices.Contains(env, "LC_ALL=C") {
		t.Errorf("the server's environment lacks the locale: %q", env)
	}
}
