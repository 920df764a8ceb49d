package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-ledger/ledger/internal/backup"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testdb"
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

	// The restored deployment backed up and restored into a third: its
	// backup names the first's key for the sequences it restored, so
	// the second's trusted keys alone are refused, saying which keys
	// are missing and how to give them; the two files together restore
	// it, and the third verifies (decision 425).
	second2 := filepath.Join(t.TempDir(), "second.jsonl")
	run(second.environ(), "backup", "--out", second2)
	data3 := testenv.DataDir(t)
	third := startDev(t, bin, data3, freeAddr(t), freeAddr(t))
	defer third.stop(t)
	admin3 := append(third.environ(), "LEDGER_NATS_CREDS="+filepath.Join(data3, "nats-auth", "admin.nk"))
	cmd := exec.Command(bin, "restore", "--in", second2, "--trusted-keys", second.env["LEDGER_TRUSTED_KEYS"])
	cmd.Env = admin3
	refusal, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(refusal), "a log the deployment was itself restored from") || !strings.Contains(string(refusal), "concatenated") {
		t.Fatalf("restore of a restored deployment's backup with its own keys only: %v\n%s", err, refusal)
	}
	both := filepath.Join(t.TempDir(), "trusted.pub")
	var keys []byte
	for _, f := range []string{first.env["LEDGER_TRUSTED_KEYS"], second.env["LEDGER_TRUSTED_KEYS"]} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, b...)
	}
	if err := os.WriteFile(both, keys, 0o600); err != nil {
		t.Fatal(err)
	}
	run(admin3, "restore", "--in", second2, "--trusted-keys", both)
	devToken = third.env["LEDGER_TOKEN"]
	waitAllocations(t, third.env["LEDGER_URL"], "demo", 5)
	if out := run(third.environ(), "audit", "verify"); !strings.HasPrefix(out, "ok: ") || strings.Contains(out, "UNAUTHENTICATED") {
		t.Fatalf("audit verify of the third deployment:\n%s", out)
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
				msg := nats.NewMsg(stream.Published(m.Subject)) // signed as published, stored with its partition
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

// TestDevRestoreKilledMidwayGoesOn: a site of 2,000 pools, backed up as
// its auditor; `ledger restore` into a fresh `ledger dev` (its admin
// identity) is killed (SIGKILL) half way, and the same command run again
// goes on after the last message restored: the stream then holds every
// message of the backup once, at its sequence, as in the original (none
// lost, none doubled), the new deployment's projection equals the
// original's allocations, and audit verify says ok. A backup of another
// log onto that stream is refused, naming the first sequence that
// differs, and so is any restore once the new deployment appended
// (decision 422). (The forged backup is signed again whole by another
// key, so its first message already differs.)
func TestDevRestoreKilledMidwayGoesOn(t *testing.T) {
	const pools = 2000
	bin := ledgerBinary(t)
	run := func(env []string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	first := startDev(t, bin, testenv.DataDir(t), freeAddr(t), freeAddr(t))
	defer first.stop(t)
	devToken = first.env["LEDGER_TOKEN"]
	base := first.env["LEDGER_URL"]
	loadPools(t, base, pools)
	const total = 3 * pools
	file := filepath.Join(t.TempDir(), "backup.jsonl")
	// On a terminal (script(1) gives it one) backup and restore show
	// their progress.
	onTerminal := func(env []string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command("script", "-qec", bin+" "+strings.Join(args, " "), "/dev/null")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := onTerminal(first.environ(), "backup", "--out", file); err != nil || !strings.Contains(out, fmt.Sprintf("backed up %d messages", total)) ||
		!strings.Contains(out, fmt.Sprintf("backed up 3000 of %d", total)) {
		t.Fatalf("backup: %v\n%q", err, out)
	}

	data := testenv.DataDir(t)
	second := startDev(t, bin, data, freeAddr(t), freeAddr(t))
	defer second.stop(t)
	admin := append(second.environ(), "LEDGER_NATS_CREDS="+filepath.Join(data, "nats-auth", "admin.nk"))
	nc, err := natsauth.Connect(second.env["NATS_URL"], second.env["LEDGER_NATS_CREDS"])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	streamLast := func() uint64 {
		t.Helper()
		seq, err := stream.LastSeq(context.Background(), nc)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}

	restore := exec.Command(bin, "restore", "--in", file, "--trusted-keys", first.env["LEDGER_TRUSTED_KEYS"])
	restore.Env = admin
	if err := restore.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); streamLast() < total/10; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("restore published nothing in 60s")
		}
	}
	_ = restore.Process.Kill()
	_ = restore.Wait()
	killedAt := streamLast()
	if killedAt >= total {
		t.Fatalf("restore finished (%d messages) before it was killed: nothing tried", killedAt)
	}
	t.Logf("restore killed with %d of %d messages in the stream", killedAt, total)

	// Another log's backup (the same events, one edited and the whole
	// signed again by another key, trusted on the operator's word) is
	// refused on that stream, naming the sequence, and changes nothing.
	forged := forgeBackup(t, file, 3, signing.Generate())
	out, err := run(admin, "restore", "--in", forged, "--trust-backup-keys")
	if err == nil || !strings.Contains(out, "sequence 1 is not the backup's (another signature)") {
		t.Fatalf("restore of another log onto a partly restored stream: %v\n%s", err, out)
	}
	if got := streamLast(); got != killedAt {
		t.Fatalf("a refused restore changed the stream: %d messages, %d before", got, killedAt)
	}

	out, err = onTerminal(admin, "restore", "--in", file, "--trusted-keys", first.env["LEDGER_TRUSTED_KEYS"])
	if err != nil || !strings.Contains(out, fmt.Sprintf("the stream held sequences 1 to %d", killedAt)) || !strings.Contains(out, fmt.Sprintf("restored %d messages", total)) ||
		!strings.Contains(out, fmt.Sprintf("restored 5000 of %d", total)) {
		t.Fatalf("restore run again: %v\n%s", err, out)
	}
	t.Logf("restore run again:\n%s", out)
	if got := streamLast(); got != total {
		t.Fatalf("the stream holds %d messages after the restore went on, want %d", got, total)
	}
	// Every message once, at its sequence, with the original's body.
	want := backupBodies(t, file)
	copyFile := filepath.Join(t.TempDir(), "copy.jsonl")
	if out, err := run(second.environ(), "backup", "--out", copyFile); err != nil {
		t.Fatalf("backup of the restored deployment: %v\n%s", err, out)
	}
	got := backupBodies(t, copyFile)
	if len(got) != len(want) {
		t.Fatalf("the restored stream holds %d messages, the original %d", len(got), len(want))
	}
	for seq, body := range want {
		if got[seq] != body {
			t.Fatalf("sequence %d differs from the original's after the restore went on", seq)
		}
	}

	// The new deployment's projector folds it all; its allocations are
	// the original's and audit verify says ok.
	allocations := func(url string) string {
		t.Helper()
		db := testdb.Pool(t, url)
		deadline := time.Now().Add(120 * time.Second)
		for {
			var last int64
			_ = db.QueryRow(context.Background(), `SELECT coalesce(max(stream_seq), 0) FROM projector_offsets`).Scan(&last)
			if last >= total {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("projection at %d of %d", last, total)
			}
			time.Sleep(100 * time.Millisecond)
		}
		var s string
		if err := db.QueryRow(context.Background(), `SELECT string_agg(pool || consumer || host || slots, ',' ORDER BY pool, consumer, host) FROM allocations`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if a, b := allocations(first.env["DATABASE_URL"]), allocations(second.env["DATABASE_URL"]); a != b || a == "" {
		t.Fatalf("the restored deployment's allocations differ from the original's")
	}
	if out, err := run(second.environ(), "audit", "verify"); err != nil || !strings.Contains(out, fmt.Sprintf("ok: %d events of %d pools", total, pools)) {
		t.Fatalf("audit verify of the restored deployment: %v\n%s", err, out)
	}

	// Once the new deployment appended, its stream is its own log.
	devToken = second.env["LEDGER_TOKEN"]
	if code, body := post(t, second.env["LEDGER_URL"]+"/v1/pools/p0001/events", `{"type":"demand","data":{"demands":{"/B":1}}}`); code != 200 {
		t.Fatalf("append after the restore: %d %s", code, body)
	}
	if out, err := run(admin, "restore", "--in", file, "--trusted-keys", first.env["LEDGER_TRUSTED_KEYS"]); err == nil || !strings.Contains(out, "not the start of this backup") {
		t.Fatalf("restore onto a stream the deployment appended to: %v\n%s", err, out)
	}
}

// loadPools appends to pools pools p0000, p0001 ... of the `ledger dev`
// at base a plan, a host and a demand each (3 events, one request), 8
// requests at a time, with the token of devToken.
func loadPools(t *testing.T, base string, pools int) {
	t.Helper()
	var wg sync.WaitGroup
	work := make(chan int)
	failed := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				body := fmt.Sprintf(`[{"type":"plan","data":{"plan":{"consumers":[{"path":"/A","priority":3},{"path":"/B","priority":1}]}}},`+
					`{"type":"host_up","data":{"host":"h1","slots":%d}},{"type":"demand","data":{"demands":{"/A":8,"/B":8}}}]`, 4+i%13)
				if err := appendAs(devToken, fmt.Sprintf("%s/v1/pools/p%04d/events", base, i), body); err != nil {
					select {
					case failed <- err.Error():
					default:
					}
				}
			}
		}()
	}
	for i := range pools {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case f := <-failed:
		t.Fatalf("append: %s", f)
	default:
	}
}

// appendAs posts body to url with token, from any goroutine.
func appendAs(token, url, body string) error {
	rq, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	rq.Header.Set("Content-Type", "application/json")
	rq.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, answer)
	}
	return nil
}

// backupBodies reads a backup file's messages: sequence -> the published
// subject and the body.
func backupBodies(t *testing.T, file string) map[uint64]string {
	t.Helper()
	in, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 4<<20)
	out := map[uint64]string{}
	for first := true; sc.Scan(); first = false {
		if first {
			continue
		}
		var l struct {
			Seq     uint64 `json:"seq"`
			Subject string `json:"subject"`
			Data    []byte `json:"data"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if _, twice := out[l.Seq]; twice {
			t.Fatalf("%s holds sequence %d twice", file, l.Seq)
		}
		out[l.Seq] = stream.Published(l.Subject) + " " + string(l.Data)
	}
	return out
}
