package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/migrations"
)

// roleURL is the printed reporting URL with another role of dev's
// PostgreSQL and its password (DATA/pg-auth): what whoever holds that
// role's password (a compromised API host, say) connects with.
func roleURL(t *testing.T, dev *devProcess, data, role string) string {
	t.Helper()
	pw, err := os.ReadFile(filepath.Join(data, "pg-auth", role+".password"))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dev.env["DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, strings.TrimSpace(string(pw)))
	return u.String()
}

func withPassword(t *testing.T, raw, pw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	return u.String()
}

func pgCode(err error) string {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code
	}
	return ""
}

// waitConnects waits until url connects (true) or not (false) within d.
func waitConnects(url string, want bool, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		conn, err := pgx.Connect(context.Background(), url)
		if err == nil {
			conn.Close(context.Background())
		}
		if (err == nil) == want {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// TestStoreAttacks runs, against `ledger dev`, the red team's attacks on
// the PostgreSQL store, each as the identity the attacker held: the
// printed reporting URL (and the API's role, as a compromised API host
// would hold it), a standalone projector started with its defaults, and
// a look at status while PostgreSQL is down (F6, F7, F8, F10, F16/F24).
func TestStoreAttacks(t *testing.T) {
	bin, projector := ledgerBinary(t), projectorBinary(t)
	data := testenv.DataDir(t)
	dev := startDev(t, bin, data, freeAddr(t), freeAddr(t))
	defer dev.stop(t)
	base := dev.env["LEDGER_URL"]
	devToken = dev.env["LEDGER_TOKEN"]
	ctx := context.Background()
	reporting := dev.env["DATABASE_URL"]
	apiURL := roleURL(t, dev, data, migrations.RoleAPI)
	seq := 0
	appendProjected := func(what string) {
		t.Helper()
		seq++
		ev := fmt.Sprintf(`{"id":"d%d","type":"demand","data":{"demands":{"/A":%d}}}`, seq, seq%10)
		if seq == 1 {
			ev = `[{"id":"p1","type":"plan","data":{"plan":{"consumers":[{"path":"/A"},{"path":"/B"}]}}},{"id":"h1","type":"host_up","data":{"host":"h1","slots":10}},` + ev + `]`
			seq = 3
		}
		if code, body := post(t, base+"/v1/pools/demo/events", ev); code != 200 {
			t.Fatalf("%s: append: %d %s", what, code, body)
		}
		waitAllocations(t, base, "demo", seq)
	}
	appendProjected("at start")

	conn, err := pgx.Connect(ctx, reporting)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	t.Run("F6 roles cannot keep a changed password or setting", func(t *testing.T) {
		for _, tc := range []struct{ role, url string }{{migrations.RoleReporting, reporting}, {migrations.RoleAPI, apiURL}} {
			c, err := pgx.Connect(ctx, tc.url)
			if err != nil {
				t.Fatal(err)
			}
			// PostgreSQL 15 lets a login role do these two to itself.
			for _, q := range []string{"ALTER ROLE CURRENT_USER PASSWORD 'attacker'", "ALTER ROLE CURRENT_USER SET statement_timeout = 0",
				"ALTER ROLE CURRENT_USER IN DATABASE ledger SET work_mem = '2GB'"} {
				if _, err := c.Exec(ctx, q); err != nil {
					t.Logf("%s: %s: %v", tc.role, q, err)
				}
			}
			// These no role may do to itself.
			for _, q := range []string{"ALTER ROLE CURRENT_USER CONNECTION LIMIT -1", "ALTER ROLE CURRENT_USER SET temp_file_limit = -1",
				"ALTER ROLE CURRENT_USER VALID UNTIL 'infinity'", "ALTER ROLE CURRENT_USER CREATEROLE",
				"GRANT " + tc.role + " TO " + migrations.RoleProjector} {
				if _, err := c.Exec(ctx, q); pgCode(err) != "42501" {
					t.Errorf("%s: %s: %v, want permission denied", tc.role, q, err)
				}
			}
			c.Close(ctx)
			if !waitConnects(tc.url, true, 5*time.Second) {
				t.Errorf("%s: its URL still refused 5s after it changed its own password", tc.role)
			}
			if !waitConnects(withPassword(t, tc.url, "attacker"), false, 5*time.Second) {
				t.Errorf("%s: the password it set itself still works after 5s", tc.role)
			}
			c, err = pgx.Connect(ctx, tc.url)
			if err != nil {
				t.Fatal(err)
			}
			var timeout, workMem string
			if err := c.QueryRow(ctx, "SELECT current_setting('statement_timeout'), current_setting('work_mem')").Scan(&timeout, &workMem); err != nil {
				t.Fatal(err)
			}
			want := "0"
			if tc.role == migrations.RoleReporting {
				want = migrations.ReportingSettings["statement_timeout"]
			}
			if timeout != want || workMem == "2GB" {
				t.Errorf("%s: a new session has statement_timeout %s, work_mem %s after the role changed them; want %s and the default", tc.role, timeout, workMem, want)
			}
			c.Close(ctx)
		}
		if !strings.Contains(dev.stderr.String(), "PostgreSQL role changed by its holder") {
			t.Errorf("dev did not say it restored a role:\n%s", dev.stderr)
		}
		appendProjected("after the API's role changed its password")

		// The holder races the guard, changing its password again and
		// again (an outside attack stopped the guard for good so, and
		// found the restored password in PostgreSQL's log): the guard
		// goes on, the printed URL works again once the holder stops, and
		// the log holds no password.
		c, err := pgx.Connect(ctx, reporting)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			if _, err := c.Exec(ctx, fmt.Sprintf("ALTER ROLE CURRENT_USER PASSWORD 'race%d'", i)); err != nil {
				t.Logf("race %d: %v", i, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close(ctx)
		if strings.Contains(dev.stderr.String(), "guard stopped") {
			t.Errorf("the role guard stopped:\n%s", dev.stderr)
		}
		if !waitConnects(reporting, true, 5*time.Second) {
			t.Errorf("reporting: the printed URL still refused 5s after the race")
		}
		pw := urlPassword(t, reporting)
		logs, _ := filepath.Glob(filepath.Join(data, "pg", "*.log"))
		logs2, _ := filepath.Glob(filepath.Join(data, "pg", "log", "*"))
		for _, f := range append(logs, logs2...) {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), pw) {
				t.Errorf("%s holds the reporting role's password", f)
			}
		}
	})

	t.Run("F7 no large objects, no other database, no advisory locks", func(t *testing.T) {
		for _, q := range []string{"SELECT lo_creat(-1)", "SELECT lo_create(0)", "SELECT lo_from_bytea(0, 'x')",
			"SELECT lo_import('/etc/hostname')", "SET lo_compat_privileges = on",
			"SELECT pg_try_advisory_lock(1)", "SELECT pg_advisory_lock_shared(1)", "SELECT pg_try_advisory_xact_lock(1)"} {
			if _, err := conn.Exec(ctx, q); pgCode(err) != "42501" {
				t.Errorf("reporting: %s: %v, want permission denied", q, err)
			}
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_largeobject_metadata").Scan(&n); err != nil || n != 0 {
			t.Errorf("large objects: %d, %v", n, err)
		}
		for _, db := range []string{"postgres", "template1"} {
			u, _ := url.Parse(reporting)
			u.Path = "/" + db
			if c, err := pgx.Connect(ctx, u.String()); err == nil || pgCode(err) != "42501" {
				if c != nil {
					c.Close(ctx)
				}
				t.Errorf("reporting connects to database %s: %v", db, err)
			}
		}
		var limit string
		if err := conn.QueryRow(ctx, "SELECT current_setting('temp_file_limit')").Scan(&limit); err != nil || limit != "1GB" {
			t.Errorf("reporting's temp_file_limit %q, %v; want 1GB", limit, err)
		}
		if _, err := conn.Exec(ctx, "SET temp_file_limit = -1"); pgCode(err) != "42501" {
			t.Errorf("reporting lifts its temp_file_limit: %v", err)
		}
	})

	t.Run("F8 reporting at its connection limit", func(t *testing.T) {
		var idle string
		if err := conn.QueryRow(ctx, "SELECT current_setting('idle_in_transaction_session_timeout')").Scan(&idle); err != nil || idle != "1min" {
			t.Errorf("reporting's idle_in_transaction_session_timeout %q, %v", idle, err)
		}
		var held []*pgx.Conn
		defer func() {
			for _, c := range held {
				c.Close(ctx)
			}
		}()
		var refused error
		for i := 0; i < 100 && refused == nil; i++ {
			c, err := pgx.Connect(ctx, reporting)
			if err != nil {
				refused = err
				break
			}
			held = append(held, c)
		}
		limit := migrations.ConnLimits[migrations.RoleReporting]
		if pgCode(refused) != "53300" || len(held)+1 != limit {
			t.Fatalf("reporting held %d connections (+1) and then: %v; want %d in all, then too many connections", len(held), refused, limit)
		}
		// The projector and the API go on: an append is projected and read.
		appendProjected("with reporting at its connection limit")
		if c, err := pgx.Connect(ctx, apiURL); err != nil {
			t.Errorf("the API's role cannot connect while reporting is at its limit: %v", err)
		} else {
			c.Close(ctx)
		}
	})

	t.Run("F10 a second projector of the same name", func(t *testing.T) {
		cmd := exec.Command(projector)
		cmd.Env = append(os.Environ(), "NATS_URL="+dev.env["NATS_URL"],
			"LEDGER_NATS_CREDS="+filepath.Join(data, "nats-auth", "projector.nk"),
			"LEDGER_NATS_HEAL_CREDS="+filepath.Join(data, "nats-auth", "ledger.nk"),
			"LEDGER_TRUSTED_KEYS="+dev.env["LEDGER_TRUSTED_KEYS"],
			"DATABASE_URL="+roleURL(t, dev, data, migrations.RoleProjector))
		done := make(chan struct{})
		var out []byte
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("the second projector did not stop within 60s:\n%s", out)
		}
		t.Logf("the second projector: %v: %s", err, lastLine(string(out)))
		if err == nil || !strings.Contains(string(out), "another projector of this name runs") || !strings.Contains(string(out), `named "projector"`) {
			t.Errorf("the second projector: %v\n%s\nwant a refusal saying another projector of this name runs", err, out)
		}
		if dev.cmd.ProcessState != nil {
			t.Fatalf("ledger dev exited:\n%s", dev.stderr)
		}
		appendProjected("after a second projector was refused")
		if strings.Contains(dev.stderr.String(), "same name is writing") {
			t.Errorf("dev's projector saw another writing its offsets:\n%s", dev.stderr)
		}
	})

	t.Run("F16 status with PostgreSQL down", func(t *testing.T) {
		pidFile, err := os.ReadFile(filepath.Join(data, "pg", "postmaster.pid"))
		if err != nil {
			t.Fatal(err)
		}
		line, _, _ := strings.Cut(string(pidFile), "\n")
		pid, _ := strconv.Atoi(strings.TrimSpace(line))
		port := strings.Split(string(pidFile), "\n")[3]
		conn.Close(ctx)
		must(t, syscall.Kill(pid, syscall.SIGINT)) // fast shutdown, as an outage
		for deadline := time.Now().Add(30 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("PostgreSQL still runs 30s after SIGINT")
			}
		}
		status := exec.Command(bin, "status")
		status.Env = dev.environ()
		out, err := status.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(out), "status: down") ||
			!strings.Contains(string(out), "appends: ok, reads: DOWN") || !strings.Contains(string(out), "PostgreSQL does not answer") ||
			strings.Contains(string(out), "none has committed") || !strings.Contains(string(out), "projectors: unknown") {
			t.Errorf("ledger status with PostgreSQL down: %v\n%s\nwant exit 3, down, appends ok, reads down, PostgreSQL named, the projectors unknown", err, out)
		}
		t.Logf("ledger status with PostgreSQL down: %v\n%s", err, out)
		rq, _ := http.NewRequest(http.MethodGet, base+"/v1/status", nil)
		rq.Header.Set("Authorization", "Bearer "+devToken)
		resp, err := http.DefaultClient.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var res api.StatusResponse
		if err := json.Unmarshal(body, &res); err != nil || resp.StatusCode != 200 || res.Status != "down" || res.Appends != "ok" || res.Reads != "down" {
			t.Errorf("/v1/status: %d %s", resp.StatusCode, body)
		}
		for _, leak := range []string{"dial", "failed to connect", "connect:", "user=", "ledger_api", "127.0.0.1:" + strings.TrimSpace(port), "SQLSTATE", "database="} {
			if strings.Contains(string(out), leak) || strings.Contains(string(body), leak) {
				t.Errorf("status shows the driver's text (%q):\n%s\n%s", leak, out, body)
			}
		}
		// Liveness is about appends, which go on.
		resp, err = http.Get(base + "/healthz")
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("/healthz with PostgreSQL down: %v %v", resp, err)
		}
		if code, body := post(t, base+"/v1/pools/demo/events", `{"id":"while-down","type":"demand","data":{"demands":{"/A":1}}}`); code != 200 {
			t.Errorf("append with PostgreSQL down: %d %s", code, body)
		}
		resp, err = http.Get(base + "/readyz")
		if err != nil || resp.StatusCode != 503 {
			t.Errorf("/readyz with PostgreSQL down: %v %v", resp, err)
		}
	})
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestDevRefusesPlantedCluster: `ledger dev` refuses a data directory
// whose PostgreSQL cluster (DATA/pg) another user owns, or whose
// configuration lets clients in without a password or runs what
// pgcluster never set, naming the path and why, before PostgreSQL
// starts on it (F9).
func TestDevRefusesPlantedCluster(t *testing.T) {
	bin := ledgerBinary(t)
	run := func(data string) (string, error) {
		out, err := exec.Command(bin, "dev", "--data", data, "--http", freeAddr(t), "--nats", freeAddr(t)).CombinedOutput()
		return string(out), err
	}
	// Another user's cluster directory in a data directory of one's own.
	data := testenv.DataDir(t)
	pg := filepath.Join(data, "pg")
	must(t, os.MkdirAll(pg, 0o700))
	must(t, os.Chown(pg, 4242, 4242))
	if out, err := run(data); err == nil || !strings.Contains(out, pg+" is owned by uid 4242") || !strings.Contains(out, "not trusted") {
		t.Errorf("a cluster directory of uid 4242: %v\n%s", err, out)
	}

	made := testenv.DataDir(t)
	dev := startDev(t, bin, made, freeAddr(t), freeAddr(t))
	dev.stop(t)
	for _, tc := range []struct{ file, line, says string }{
		{"pg_hba.conf", "host all all 127.0.0.1/32 trust", "method trust"},
		{"pg_hba.conf", "local all all peer", "method peer"},
		{"postgresql.conf", "shared_preload_libraries = '/tmp/evil.so'", "sets shared_preload_libraries"},
		{"postgresql.auto.conf", "archive_command = 'sh /tmp/x'", "sets archive_command"},
		{"postgresql.conf", "include '/tmp/theirs.conf'", "sets include"},
	} {
		path := filepath.Join(made, "pg", tc.file)
		orig, err := os.ReadFile(path)
		must(t, err)
		must(t, os.WriteFile(path, append([]byte(tc.line+"\n"), orig...), 0o600))
		out, err := run(made)
		t.Logf("%s planted: %s", tc.line, lastLine(out))
		if err == nil || !strings.Contains(out, path+" line 1") || !strings.Contains(out, tc.says) {
			t.Errorf("%s planted in %s: %v\n%s\nwant a refusal naming the file and saying %q", tc.line, tc.file, err, out, tc.says)
		}
		if strings.Contains(out, "pg_ctl start") {
			t.Errorf("%s planted: PostgreSQL was started", tc.line)
		}
		must(t, os.WriteFile(path, orig, 0o600))
	}
	// Mended, it starts again.
	dev = startDev(t, bin, made, freeAddr(t), freeAddr(t))
	dev.stop(t)
}

// urlPassword is the password of a PostgreSQL URL.
func urlPassword(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" {
		t.Fatalf("no password in the URL")
	}
	return pw
}
