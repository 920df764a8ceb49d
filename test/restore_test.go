package test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/cluster-ledger/ledger/internal/backup"
	"github.com/cluster-ledger/ledger/internal/signing"
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
	admin := append(second.environ(), "LEDGER_NATS_CREDS="+filepath.Join(data, "nats-auth", "admin.nk"))
	// The red team's F2, as an operator meets it: a backup with an edited
	// event is refused, naming it; one edited and signed again with the
	// attacker's key, which it names in its header, is refused given the
	// first deployment's trusted keys; without those keys or leave to
	// trust the backup's own, restore refuses; none restores anything
	// (the real restore below needs an empty stream).
	refused := func(file, says string, extra ...string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"restore", "--in", file}, extra...)...)
		cmd.Env = admin
		out, err := cmd.CombinedOutput()
		t.Logf("restore of a forged backup: %v\n%s", err, out)
		if err == nil || !strings.Contains(string(out), says) {
			t.Fatalf("restore of a forged backup: %v\n%s\nwant a refusal saying %q", err, out, says)
		}
	}
	refused(file, "--trust-backup-keys")
	refused(forgeBackup(t, file, 3, nil), "UNAUTHENTICATED sequence 3", "--trust-backup-keys")
	attacker := signing.Generate()
	refused(forgeBackup(t, file, 3, attacker), "names key "+attacker.ID(), "--trusted-keys", first.env["LEDGER_TRUSTED_KEYS"])
	out = run(admin, "restore", "--in", file, "--trusted-keys", first.env["LEDGER_TRUSTED_KEYS"])
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

// forgeBackup writes a copy of the backup file with the event of
// sequence victim edited (its producer changed), as whoever could write
// the file would; with resign, every event is signed again with that key
// and the header names it instead of the deployment's keys.
func forgeBackup(t *testing.T, file string, victim uint64, resign *signing.Signer) string {
	t.Helper()
	in, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out strings.Builder
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 4<<20)
	for first := true; sc.Scan(); first = false {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		switch {
		case first && resign != nil:
			l["keys"] = []backup.Key{{ID: resign.ID(), PublicKey: resign.Public()}}
		case !first:
			var m struct {
				Seq     uint64            `json:"seq"`
				Subject string            `json:"subject"`
				Headers map[string]string `json:"headers"`
				Data    []byte            `json:"data"`
			}
			raw, _ := json.Marshal(l)
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			if m.Seq == victim {
				var env map[string]any
				if err := json.Unmarshal(m.Data, &env); err != nil {
					t.Fatal(err)
				}
				env["producer"] = "someone-else"
				m.Data, _ = json.Marshal(env)
			}
			if resign != nil {
				msg := nats.NewMsg(m.Subject)
				msg.Data = m.Data
				for k, v := range m.Headers {
					msg.Header.Set(k, v)
				}
				resign.Sign(msg)
				for k := range msg.Header {
					m.Headers[k] = msg.Header.Get(k)
				}
			}
			l["data"], l["headers"] = m.Data, m.Headers
		}
		b, _ := json.Marshal(l)
		out.Write(append(b, '\n'))
	}
	path := filepath.Join(t.TempDir(), "forged.jsonl")
	if err := os.WriteFile(path, []byte(out.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
