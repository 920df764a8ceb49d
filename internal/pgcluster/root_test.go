//go:build unix

package pgcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func fileOwner(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// modes records the mode of dir and of every directory above it.
func modes(t *testing.T, dir string) map[string]os.FileMode {
	t.Helper()
	m := map[string]os.FileMode{}
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		m[p] = fi.Mode()
		if filepath.Dir(p) == p {
			return m
		}
	}
}

// processUID is the real uid of a running process.
func processUID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
			uid, _ := strconv.Atoi(f[1])
			return uid
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return -1
}

// TestRootRunsPostgresAsItsOwnUser (the tests run as root here, so every
// Start takes this path): the server runs as SystemUser, created when
// missing, never as nobody; its data directory is that user's; no
// directory above it changed mode; and the superuser's password is not
// readable by that user.
func TestRootRunsPostgresAsItsOwnUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatalf("this test exercises the root path: run the tests as root (make test does, in CI)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dataDir := filepath.Join(reachableDir(t), "data")
	before := modes(t, filepath.Dir(dataDir))
	log := &syncBuffer{}
	c := startCluster(t, ctx, dataDir, log)
	after := modes(t, filepath.Dir(dataDir))
	for p, m := range before {
		if after[p] != m {
			t.Errorf("Start changed the mode of %s from %v to %v", p, m, after[p])
		}
	}
	u, err := lookupUser(SystemUser)
	if err != nil {
		t.Fatalf("the system user: %v\nlog:\n%s", err, log)
	}
	nobody, _ := lookupUser("nobody")
	pid := postmasterPID(t, dataDir)
	uid := processUID(t, pid)
	if uid != int(u.uid) || (nobody != nil && uid == int(nobody.uid)) || uid == 0 {
		t.Fatalf("the postmaster (pid %d) runs as uid %d, want %s", pid, uid, u)
	}
	if fileOwner(t, dataDir) != int(u.uid) {
		t.Errorf("the data directory is not %s's", SystemUser)
	}
	for _, f := range []string{SuperuserPasswordFile, AppPasswordFile} {
		path := filepath.Join(c.AuthDir(), f)
		if fileOwner(t, path) != 0 {
			t.Errorf("%s is not root's", path)
		}
	}
	// The system user can read nothing of the auth directory.
	out, err := c.run(ctx, "postgres", "-C", "data_directory", "-D", dataDir) // runs as the system user: a smoke test of run
	if err != nil {
		t.Fatalf("postgres -C as %s: %v %s", SystemUser, err, out)
	}
	if fi, _ := os.Stat(c.AuthDir()); fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("auth directory mode %v: others may read it", fi.Mode().Perm())
	}
}

// TestUnreachableDataDirRefused: a data directory under a directory
// PostgreSQL's user may not enter is refused with the directory's name,
// and its mode is left as it was.
func TestUnreachableDataDirRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatalf("this test exercises the root path: run the tests as root")
	}
	closed := filepath.Join(reachableDir(t), "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	before := modes(t, closed)
	_, err := Start(context.Background(), WithDataDir(filepath.Join(closed, "pg")), WithFsync(false))
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), closed+" (mode 0700") || !strings.Contains(err.Error(), SystemUser) {
		t.Fatalf("Start under a 0700 directory: %v; want ErrUnreachable naming %s and %s", err, closed, SystemUser)
	}
	after := modes(t, closed)
	for p, m := range before {
		if after[p] != m {
			t.Errorf("the refused Start changed the mode of %s from %v to %v", p, m, after[p])
		}
	}
	if _, err := os.Stat(filepath.Join(closed, "pg")); err == nil {
		t.Errorf("the refused Start created the data directory")
	}
}

// TestLegacyPasswordsMoved: a cluster that kept its passwords in its data
// directory (readable by PostgreSQL's user) gets new ones, in the auth
// directory, and the old files are removed; the old passwords no longer
// work, the data is kept.
func TestLegacyPasswordsMoved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dataDir := filepath.Join(reachableDir(t), "data")
	c := startCluster(t, ctx, dataDir, &syncBuffer{})
	exec1(t, ctx, c.URL(), "CREATE TABLE kept AS SELECT 7 AS v")
	oldSuper, oldApp := c.URLFor("postgres"), c.URL()
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// As a cluster of before: the passwords in the data directory.
	for from, to := range map[string]string{SuperuserPasswordFile: legacySuperuserPasswordFile, AppPasswordFile: legacyAppPasswordFile} {
		if err := os.Rename(filepath.Join(c.AuthDir(), from), filepath.Join(dataDir, to)); err != nil {
			t.Fatal(err)
		}
	}
	log := &syncBuffer{}
	c2 := startCluster(t, ctx, dataDir, log)
	for _, f := range []string{legacySuperuserPasswordFile, legacyAppPasswordFile} {
		if _, err := os.Stat(filepath.Join(dataDir, f)); err == nil {
			t.Errorf("%s is still in the data directory", f)
		}
	}
	for _, old := range []string{oldSuper, oldApp} {
		if conn, err := pgx.Connect(ctx, old); err == nil {
			conn.Close(ctx)
			t.Errorf("an old password still works")
		}
	}
	conn, err := pgx.Connect(ctx, c2.URL())
	if err != nil {
		t.Fatalf("new application password: %v\nlog:\n%s", err, log)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 7 {
		t.Fatalf("data after the move: %d %v", v, err)
	}
}

// TestLoginRoles: WithRoles creates login roles with passwords of their
// own, not superusers; a second Start keeps their passwords.
func TestLoginRoles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dataDir := filepath.Join(reachableDir(t), "data")
	c, err := Start(ctx, WithDataDir(dataDir), WithFsync(false), WithRoles("reader_one", "reader_two"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	first := c.URLAs("reader_one")
	for _, role := range []string{"reader_one", "reader_two"} {
		conn, err := pgx.Connect(ctx, c.URLAs(role))
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		var super, createRole bool
		if err := conn.QueryRow(ctx, "SELECT rolsuper, rolcreaterole FROM pg_roles WHERE rolname = current_user").Scan(&super, &createRole); err != nil || super || createRole {
			t.Errorf("%s: superuser %v, createrole %v, %v", role, super, createRole, err)
		}
		conn.Close(ctx)
	}
	if c.URLAs("unknown") != "" {
		t.Error("URLAs of an unknown role")
	}
	c2, err := Start(ctx, WithDataDir(dataDir), WithFsync(false), WithRoles("reader_one", "reader_two"))
	if err != nil {
		t.Fatal(err)
	}
	if c2.URLAs("reader_one") != first {
		t.Error("a second Start changed a role's password")
	}
}
