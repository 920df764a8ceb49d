package test

import (
	"context"
	"time"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/projections/query"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/pgdump"
)

// auditorEnv is the environment an operator runs the audit tools with,
// as `ledger dev` prints it: the auditor's NATS identity and the
// reporting role.
func auditorEnv(t *testing.T, s *stack) []string {
	return append(os.Environ(), "NATS_URL="+s.natsURL, "LEDGER_NATS_CREDS="+testenv.Creds(t, s.natsURL, natsauth.Auditor), "DATABASE_URL="+s.roles.Reporting)
}

// TestReplayIntoAndVerifyCommands drives the operator's commands as a user
// would: `ledger replay --into` rebuilds a projection equal to the live
// one (and refuses a non-empty database), `ledger audit verify` passes,
// then fails with status 1 naming the sequence once a decision row is
// changed.
func TestReplayIntoAndVerifyCommands(t *testing.T) {
	s := newStack(t)
	for _, f := range []string{"scenarios/seed/seed-000-priority-reclaim.yaml", "scenarios/rules/max-lowered-plan.yaml"} {
		s.publishScenario(t, f, poolFor(f))
	}
	s.project(t, s.db)
	bin := ledgerBinary(t)
	env := auditorEnv(t, s)
	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		return outputAndStatus(t, cmd)
	}

	// An empty database, given as its owner's URL (the rebuild migrates it).
	into := testdb.Empty(t)
	rebuilt := testdb.Pool(t, into.Owner)
	if out, code := run("replay", "--into", into.Owner); code != 0 {
		t.Fatalf("replay --into: exit %d\n%s", code, out)
	}
	live, _ := pgdump.Tables(context.Background(), s.db)
	got, _ := pgdump.Tables(context.Background(), rebuilt)
	if d := pgdump.Diff(live, got); d != "" {
		t.Fatalf("replay --into differs from the live projection at %s", d)
	}
	if out, code := run("replay", "--into", into.Owner); code == 0 || !strings.Contains(out, "empty database") {
		t.Fatalf("replay --into a non-empty database: exit %d\n%s", code, out)
	}

	if out, code := run("audit", "verify"); code != 0 || !strings.Contains(out, "ok:") {
		t.Fatalf("audit verify on an intact projection: exit %d\n%s", code, out)
	}
	pool := poolFor("scenarios/seed/seed-000-priority-reclaim.yaml")
	var seq int64
	if err := s.db.QueryRow(context.Background(), `SELECT event_seq FROM decisions WHERE pool = $1 AND kind = 'reclaim'`, pool).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	execSQL(t, s.db, `UPDATE decisions SET consumer = '/A' WHERE pool = $1 AND event_seq = $2`, pool, seq)
	out, code := run("audit", "verify")
	if code != 1 || !strings.Contains(out, "DIVERGENCE") || !strings.Contains(out, "sequence "+strconv.FormatInt(seq, 10)) {
		t.Fatalf("audit verify after a changed decision: exit %d\n%s", code, out)
	}
}

// TestDevReplayIntoKilledMidwayGoesOn: `ledger replay --into` of a site of
// 2,000 pools (a `ledger dev`, its printed auditor identity), killed
// (SIGKILL) once it committed part of the log, is run again with the same
// command: it says it goes on with the rebuild that stopped, and the
// database then equals the live projection, every secondary index built
// again (the ones dropped before the kill too), no offset row of its own
// left. Before, the second run was refused ("already holds a
// projection") and the dropped indexes were lost (decision 423).
func TestDevReplayIntoKilledMidwayGoesOn(t *testing.T) {
	const pools = 2000
	bin := ledgerBinary(t)
	dev := startDev(t, bin, testenv.DataDir(t), freeAddr(t), freeAddr(t))
	defer dev.stop(t)
	devToken = dev.env["LEDGER_TOKEN"]
	loadPools(t, dev.env["LEDGER_URL"], pools)
	const total = 3 * pools
	live := testdb.Pool(t, dev.env["DATABASE_URL"])
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if n, err := query.ProjectorOffset(context.Background(), live, ""); err == nil && n >= total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the live projection did not reach the log's end")
		}
	}

	into := testdb.Empty(t)
	rebuilt := testdb.Pool(t, into.Owner)
	indexes := func() int {
		t.Helper()
		var n int
		if err := rebuilt.QueryRow(context.Background(), `SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	offset := func() (n int64) {
		_ = rebuilt.QueryRow(context.Background(), `SELECT coalesce(max(stream_seq), 0) FROM projector_offsets`).Scan(&n)
		return n
	}
	rebuild := exec.Command(bin, "replay", "--into", into.Owner)
	rebuild.Env = dev.environ()
	if err := rebuild.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(120 * time.Second); offset() == 0; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the rebuild committed nothing in 120s")
		}
	}
	_ = rebuild.Process.Kill()
	_ = rebuild.Wait()
	killedAt := offset()
	if killedAt >= total {
		t.Fatalf("the rebuild finished (offset %d) before it was killed: nothing tried", killedAt)
	}
	t.Logf("rebuild killed at offset %d of %d, %d indexes in the database", killedAt, total, indexes())

	cmd := exec.Command(bin, "replay", "--into", into.Owner)
	cmd.Env = dev.environ()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "going on with the rebuild that stopped") || !strings.Contains(string(out), "rebuilt the projection") {
		t.Fatalf("replay --into run again: %v\n%s", err, out)
	}
	want, err := pgdump.Tables(context.Background(), live)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgdump.Tables(context.Background(), rebuilt)
	if err != nil {
		t.Fatal(err)
	}
	if d := pgdump.Diff(want, got); d != "" {
		t.Fatalf("the rebuild that went on differs from the live projection at %s", d)
	}
	var liveIndexes int
	if err := live.QueryRow(context.Background(), `SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema()`).Scan(&liveIndexes); err != nil {
		t.Fatal(err)
	}
	if n := indexes(); n != liveIndexes {
		t.Fatalf("the rebuilt database has %d indexes, the live one %d", n, liveIndexes)
	}
	if n := offset(); n != 0 {
		t.Fatalf("the rebuild left its offset row (%d)", n)
	}
	// Done, it is a projection like any other: a third run is refused.
	cmd = exec.Command(bin, "replay", "--into", into.Owner)
	cmd.Env = dev.environ()
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "empty database") {
		t.Fatalf("replay --into a finished rebuild: %v\n%s", err, out)
	}
}

// TestPoolFlagIsAPoolName: `--pool` of audit verify, replay and explain,
// run with the identities `ledger dev` prints (the auditor, the
// reporting role), is checked as a pool name before it becomes the
// subject filter of the log: "*" and ">" are NATS wildcards, and
// `audit verify --pool '*'` read every pool's events as one pool's and
// reported a DIVERGENCE ("a checkpoint was changed or removed") on an
// intact projection, `replay --pool '*'` printed every pool's decisions
// and `explain --pool '*'` explained whichever pool came last (decision
// 427). Each is refused, exit 1, naming the flag; the projection then
// still verifies.
func TestPoolFlagIsAPoolName(t *testing.T) {
	s := newStack(t)
	for _, f := range []string{"scenarios/seed/seed-000-priority-reclaim.yaml", "scenarios/rules/max-lowered-plan.yaml"} {
		s.publishScenario(t, f, poolFor(f))
	}
	s.project(t, s.db)
	bin := ledgerBinary(t)
	env := auditorEnv(t, s)
	for _, pool := range []string{"*", ">", "a.b", "a b", "a*"} {
		for _, args := range [][]string{{"audit", "verify", "--pool", pool}, {"replay", "--pool", pool}, {"explain", "--pool", pool, "--consumer", "/A"}} {
			cmd := exec.Command(bin, args...)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err == nil || strings.Contains(string(out), "DIVERGENCE") || !strings.Contains(string(out), "--pool: invalid pool name") {
				t.Errorf("ledger %s: %v, want a refusal of the pool name\n%s", strings.Join(args, " "), err, out)
			}
		}
	}
	cmd := exec.Command(bin, "audit", "verify")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "ok:") {
		t.Fatalf("audit verify: %v\n%s", err, out)
	}
}

// TestAuditVerifyExitStatus: a script runs `ledger audit verify` and acts
// on its status; 1 must mean a divergence, nothing else. NATS or
// PostgreSQL unreachable, a pool name that is none, an unknown flag: each
// is status 3, "could not verify", with the reason (decision 430); an
// intact projection is 0 and a changed decision 1.
func TestAuditVerifyExitStatus(t *testing.T) {
	s := newStack(t)
	f := "scenarios/seed/seed-000-priority-reclaim.yaml"
	s.publishScenario(t, f, poolFor(f))
	s.project(t, s.db)
	bin := ledgerBinary(t)
	env := auditorEnv(t, s)
	verify := func(extraEnv []string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"audit", "verify"}, args...)...)
		cmd.Env = append(append([]string{}, env...), extraEnv...)
		return outputAndStatus(t, cmd)
	}
	if out, code := verify(nil); code != 0 {
		t.Fatalf("audit verify of an intact projection: exit %d\n%s", code, out)
	}
	for what, c := range map[string]struct {
		env  []string
		args []string
		says string
	}{
		"NATS unreachable":         {env: []string{"NATS_URL=nats://127.0.0.1:1"}, says: "no servers available"},
		"PostgreSQL unreachable":   {env: []string{"DATABASE_URL=postgres://ledger_reporting:x@127.0.0.1:1/ledger?sslmode=disable"}, says: "PostgreSQL"},
		"a pool name that is none": {args: []string{"--pool", "*"}, says: "invalid pool name"},
		"an unknown flag":          {args: []string{"--bogus"}, says: "unknown flag"},
	} {
		if out, code := verify(c.env, c.args...); code != 3 || !strings.Contains(out, c.says) || strings.Contains(out, "DIVERGENCE") {
			t.Errorf("audit verify with %s: exit %d, want 3 saying %q\n%s", what, code, c.says, out)
		}
	}
	execSQL(t, s.db, `UPDATE decisions SET slots = slots + 1 WHERE pool = $1 AND ordinal = 0 AND event_seq = (SELECT min(event_seq) FROM decisions WHERE pool = $1)`, poolFor(f))
	if out, code := verify(nil); code != 1 || !strings.Contains(out, "DIVERGENCE") {
		t.Fatalf("audit verify after a changed decision: exit %d, want 1\n%s", code, out)
	}
}

// TestNATSErrorsSayWhatToDo: an operator whose NATS_URL names no server,
// or who runs `ledger nats inbox` without an identity, is told which
// variable or flag to set, as a wrong LEDGER_URL is ("is the ledger
// running, and is LEDGER_URL right?"), not only the client library's
// "no servers available for connection" or "stat : no such file or
// directory" (decision 463). Each runs with the auditor's identity that
// `ledger dev` prints.
func TestNATSErrorsSayWhatToDo(t *testing.T) {
	s := newStack(t)
	bin := ledgerBinary(t)
	env := auditorEnv(t, s)
	run := func(extraEnv []string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(append([]string{}, env...), extraEnv...)
		return outputAndStatus(t, cmd)
	}
	unreachable := []string{"NATS_URL=nats://127.0.0.1:1"}
	for _, args := range [][]string{{"audit", "verify"}, {"replay", "--from", "1"}, {"explain", "--pool", "p", "--consumer", "/A"}, {"nats", "setup"}} {
		out, code := run(unreachable, args...)
		if code == 0 || !strings.Contains(out, "is NATS running, and is NATS_URL") {
			t.Errorf("ledger %s with NATS_URL naming no server: exit %d, want it to say to check NATS and NATS_URL\n%s", strings.Join(args, " "), code, out)
		}
	}
	out, code := run([]string{"LEDGER_NATS_CREDS="}, "nats", "inbox")
	if code == 0 || !strings.Contains(out, "--nats-creds") || !strings.Contains(out, "LEDGER_NATS_CREDS") || strings.Contains(out, "stat :") {
		t.Errorf("ledger nats inbox without an identity: exit %d, want it to name --nats-creds and LEDGER_NATS_CREDS\n%s", code, out)
	}
	if out, code := run(nil, "nats", "inbox"); code != 0 || !strings.HasPrefix(out, "_INBOX.") {
		t.Errorf("ledger nats inbox with the auditor's identity: exit %d\n%s", code, out)
	}
}
