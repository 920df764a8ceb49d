package test

import (
	"context"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/pgdump"
)

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
	env := append(os.Environ(), "NATS_URL="+s.natsURL, "LEDGER_NATS_CREDS="+testenv.Creds(t, s.natsURL, natsauth.Auditor), "DATABASE_URL="+s.roles.Reporting) // as `ledger dev` prints it
	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
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
