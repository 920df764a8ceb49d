package test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestDevRestoreIntoNewDeployment does what an operator does, with two
// `ledger dev` and the lines each prints: back the first up (its
// auditor's identity and trusted keys), restore into the second (other
// signing key; its admin identity); the second's projector folds the
// restored log by itself, its allocations are the first's, and audit
// verify with the second's printed lines says ok.
func TestDevRestoreIntoNewDeployment(t *testing.T) {
	bin := ledgerBinary(t)
	run := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ledger %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	first := startDev(t, bin, testenv.DataDir(t), freeAddr(t), freeAddr(t))
	defer first.stop(t)
	devToken = first.env["LEDGER_TOKEN"]
	base := first.env["LEDGER_URL"]
	for _, ev := range []string{
		`{"id":"p1","type":"plan","data":{"plan":{"consumers":[{"path":"/A","priority":3},{"path":"/B","priority":1}]}}}`,
		`{"id":"h1","type":"host_up","data":{"host":"h1","slots":12}}`,
		`{"id":"d1","type":"demand","data":{"demands":{"/A":8,"/B":8}}}`,
		`{"id":"d2","type":"demand","data":{"demands":{"/A":2}}}`,
	} {
		if code, body := post(t, base+"/v1/pools/demo/events", ev); code != 200 {
			t.Fatalf("append: %d %s", code, body)
		}
	}
	before := waitAllocations(t, base, "demo", 4)
	file := filepath.Join(t.TempDir(), "backup.jsonl")
	out := run(first.environ(), "backup", "--out", file)
	if !strings.Contains(out, "with 1 signing key(s)") {
		t.Fatalf("backup: %s", out)
	}

	data := testenv.DataDir(t)
	second := startDev(t, bin, data, freeAddr(t), freeAddr(t))
	defer second.stop(t)
	if second.env["LEDGER_TRUSTED_KEYS"] == first.env["LEDGER_TRUSTED_KEYS"] {
		t.Fatal("the two deployments share their keys")
	}
	out = run(append(second.environ(), "LEDGER_NATS_CREDS="+filepath.Join(data, "nats-auth", "admin.nk")), "restore", "--in", file)
	t.Logf("restore:\n%s", out)
	devToken = second.env["LEDGER_TOKEN"]
	if after := waitAllocations(t, second.env["LEDGER_URL"], "demo", 4); strip(after) != strip(before) {
		t.Fatalf("restored allocations differ:\noriginal %s\nrestored %s", before, after)
	}
	if out := run(second.environ(), "audit", "verify"); !strings.HasPrefix(out, "ok: ") || strings.Contains(out, "UNAUTHENTICATED") {
		t.Fatalf("audit verify of the restored deployment:\n%s", out)
	}
	// The new deployment appends on, signing with its own key.
	if code, body := post(t, second.env["LEDGER_URL"]+"/v1/pools/demo/events", `{"id":"d3","type":"demand","data":{"demands":{"/B":1}}}`); code != 200 {
		t.Fatalf("append after the restore: %d %s", code, body)
	}
	waitAllocations(t, second.env["LEDGER_URL"], "demo", 5)
	if out := run(second.environ(), "audit", "verify"); !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("audit verify after a new event:\n%s", out)
	}
}
