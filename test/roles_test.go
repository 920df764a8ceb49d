package test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cluster-ledger/ledger/internal/pgcluster"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// dirModes records the mode of dir and of every directory above it.
func dirModes(t *testing.T, dir string) map[string]os.FileMode {
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

func uidOf(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// TestDevAsRootAndItsRoles runs `ledger dev` as root (as the tests run
// here) and checks what issue 21 asks of it: no directory above its data
// changed mode; PostgreSQL runs as its own system user, never nobody,
// which cannot read the superuser's password; and the printed
// DATABASE_URL, used as whoever holds it would, reads the documented
// tables and nothing else, and changes nothing.
func TestDevAsRootAndItsRoles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test checks `ledger dev` started as root: run the tests as root (make test does, in CI)")
	}
	bin := ledgerBinary(t)
	data := testenv.DataDir(t)
	before := dirModes(t, filepath.Dir(data))
	dev := startDev(t, bin, data, freeAddr(t), freeAddr(t))
	defer dev.stop(t)
	devToken = dev.env["LEDGER_TOKEN"]
	base := dev.env["LEDGER_URL"]
	for _, ev := range []string{
		`{"id":"p1","type":"plan","data":{"plan":{"consumers":[{"path":"/A"},{"path":"/B"}]}}}`,
		`{"id":"h1","type":"host_up","data":{"host":"h1","slots":10}}`,
		`{"id":"d1","type":"demand","data":{"demands":{"/A":4}}}`,
	} {
		if code, body := post(t, base+"/v1/pools/demo/events", ev); code != 200 {
			t.Fatalf("append: %d %s", code, body)
		}
	}
	waitAllocations(t, base, "demo", 3)

	after := dirModes(t, filepath.Dir(data))
	for p, m := range before {
		if after[p] != m {
			t.Errorf("ledger dev changed the mode of %s from %v to %v", p, m, after[p])
		}
	}
	pidFile, err := os.ReadFile(filepath.Join(data, "pg", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _, _ := strings.Cut(string(pidFile), "\n")
	status, err := os.ReadFile("/proc/" + strings.TrimSpace(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var uid int
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
			uid, _ = strconv.Atoi(f[1])
		}
	}
	out, err := exec.Command("id", "-u", pgcluster.SystemUser).Output()
	if err != nil {
		t.Fatalf("id -u %s: %v", pgcluster.SystemUser, err)
	}
	want, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	nobody, _ := exec.Command("id", "-u", "nobody").Output()
	if uid != want || uid == 0 || strconv.Itoa(uid) == strings.TrimSpace(string(nobody)) {
		t.Errorf("PostgreSQL runs as uid %d; want %s (uid %d)", uid, pgcluster.SystemUser, want)
	}
	superPW := filepath.Join(data, "pg-auth", pgcluster.SuperuserPasswordFile)
	if fi, err := os.Stat(superPW); err != nil || uidOf(t, superPW) != 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("the superuser's password %s: %v, want root's, mode 0600", superPW, err)
	}
	// PostgreSQL's user cannot read it: try, as that user.
	cat := exec.Command("cat", superPW)
	cat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(want), Gid: uint32(want), Groups: []uint32{}}}
	if out, err := cat.CombinedOutput(); err == nil {
		t.Errorf("%s read the superuser's password: %s", pgcluster.SystemUser, out)
	}

	// The printed DATABASE_URL, as its holder would use it.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dev.env["DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var user string
	if err := conn.QueryRow(ctx, `SELECT current_user`).Scan(&user); err != nil || user != "ledger_reporting" {
		t.Errorf("the printed DATABASE_URL is role %q (%v), want ledger_reporting", user, err)
	}
	for _, sql := range []string{
		`UPDATE allocations SET slots = 10 WHERE pool = 'demo'`,
		`UPDATE checkpoints SET last_seq = 0`,
		`DELETE FROM decisions`,
		`INSERT INTO halted_pools (pool, seq, reason) VALUES ('demo', 1, 'x')`,
		`TRUNCATE events`,
		`CREATE TABLE mine (v int)`,
		`CREATE TEMP TABLE mine (v int)`,
		`SELECT * FROM schema_migrations`,
	} {
		_, err := conn.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s with the printed DATABASE_URL: %v, want permission denied", sql, err)
		}
	}
	var slots int64
	if err := conn.QueryRow(ctx, `SELECT slots FROM allocations_as_of('demo', 3) WHERE consumer = '/A'`).Scan(&slots); err != nil || slots != 4 {
		t.Errorf("a reporting query with the printed DATABASE_URL: %d, %v (want /A's 4)", slots, err)
	}
	// The auditor's tools with the printed lines work as they are.
	verify := exec.Command(bin, "audit", "verify")
	verify.Env = dev.environ()
	if out, err := verify.CombinedOutput(); err != nil {
		t.Errorf("audit verify with the printed lines: %v\n%s", err, out)
	}
}

// TestDevRefusesUntrustedDataDir: a data directory another user made,
// one anyone may write, or one holding a key file of another user, is
// refused before anything starts, naming the path and why; as is one
// under a directory PostgreSQL's user may not enter, whose mode is left
// as it was.
func TestDevRefusesUntrustedDataDir(t *testing.T) {
	bin := ledgerBinary(t)
	run := func(data string) (string, error) {
		cmd := exec.Command(bin, "dev", "--data", data, "--http", freeAddr(t), "--nats", freeAddr(t))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	foreign := 4242
	// A data directory `ledger dev` made and stopped: keys, seeds, tokens.
	made := testenv.DataDir(t)
	dev := startDev(t, bin, made, freeAddr(t), freeAddr(t))
	dev.stop(t)

	for _, tc := range []struct {
		name  string
		spoil func(data string) (path string)
		says  string
	}{
		{"another user's directory", func(data string) string {
			must(t, os.MkdirAll(data, 0o755))
			must(t, os.Chown(data, foreign, foreign))
			return data
		}, "owned by uid 4242"},
		{"mode 0777", func(data string) string {
			must(t, os.MkdirAll(data, 0o755))
			must(t, os.Chmod(data, 0o777))
			return data
		}, "mode 0777"},
		{"a key file of another user", func(string) string {
			key := filepath.Join(made, "signing", "ledger.key")
			must(t, os.Chown(key, foreign, foreign))
			return key
		}, "owned by uid 4242"},
		{"a seed others may read", func(string) string {
			must(t, os.Chown(filepath.Join(made, "signing", "ledger.key"), 0, 0))
			seed := filepath.Join(made, "nats-auth", "admin.nk")
			must(t, os.Chmod(seed, 0o644))
			return seed
		}, "mode 0644"},
		{"a token of another user", func(string) string {
			must(t, os.Chmod(filepath.Join(made, "nats-auth", "admin.nk"), 0o600))
			token := filepath.Join(made, "admin.token")
			must(t, os.Chown(token, foreign, foreign))
			return token
		}, "owned by uid 4242"},
	} {
		data := made
		if !strings.HasPrefix(tc.name, "a ") {
			data = testenv.DataDir(t)
		}
		path := tc.spoil(data)
		out, err := run(data)
		if err == nil || !strings.Contains(out, path+" ") || !strings.Contains(out, tc.says) || !strings.Contains(out, "not trusted") {
			t.Errorf("%s: %v\n%s\nwant a refusal naming %s and saying %q", tc.name, err, out, path, tc.says)
		}
		if _, err := os.Stat(filepath.Join(data, "nats")); err == nil && data != made {
			t.Errorf("%s: dev started NATS in a refused directory", tc.name)
		}
	}

	// Under a directory PostgreSQL's own user may not enter (t.TempDir()'s
	// parent is 0700): refused, naming it; its mode unchanged.
	if os.Geteuid() == 0 {
		data := filepath.Join(t.TempDir(), "data")
		before := dirModes(t, filepath.Dir(data))
		out, err := run(data)
		if err == nil || !strings.Contains(out, "may not enter") || !strings.Contains(out, pgcluster.SystemUser) {
			t.Errorf("dev under a 0700 directory: %v\n%s", err, out)
		}
		for p, m := range before {
			if after := dirModes(t, filepath.Dir(data))[p]; after != m {
				t.Errorf("the refused dev changed the mode of %s from %v to %v", p, m, after)
			}
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
