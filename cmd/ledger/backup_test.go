package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/backup"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
)

// loadSeeds loads the seed scenarios into svc and checks them.
func loadSeeds(t *testing.T, svc service) {
	t.Helper()
	seed, _ := filepath.Glob("../../test/scenarios/seed/*.yaml")
	if out, errOut, err := runLedger(t, "", append([]string{"load", "--fresh-pool", "--check", "--url", svc.ledgerURL, "--ledger-token", svc.token, "--database-url", svc.dbURL}, seed...)...); err != nil {
		t.Fatalf("load: %v\n%s\n%s", err, out, errOut)
	}
}

// backupOf backs svc's stream up as its auditor, with its trusted keys.
func backupOf(t *testing.T, svc service) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	out, errOut, err := runLedger(t, "", "backup", "--nats-url", svc.natsURL, "--nats-creds", testenv.Creds(t, svc.natsURL, natsauth.Auditor),
		"--trusted-keys", svc.trustedKeys, "--out", file)
	if err != nil || !strings.Contains(out, "backed up") || !strings.Contains(out, "with 1 signing key(s)") {
		t.Fatalf("backup: %v\n%s\n%s", err, out, errOut)
	}
	return file
}

// waitProjected waits until the projector of svc committed seq.
func waitProjected(t *testing.T, svc service, seq uint64) {
	t.Helper()
	db := testdb.Pool(t, svc.dbURL)
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := query.ProjectorOffset(context.Background(), db, "")
		if err == nil && got >= seq {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the projector reached %d (%v), not %d", got, err, seq)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func lastSeq(t *testing.T, natsURL string) uint64 {
	t.Helper()
	seq, err := stream.LastSeq(context.Background(), testenv.Connect(t, natsURL, natsauth.Auditor))
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// TestBackupRestoreIntoNewDeployment: a backup (auditor identity, with
// the keys in force) restored into a new deployment with keys of its own
// (admin identity): the new deployment's projector, running all along,
// folds the restored log by itself, its allocations equal the original's,
// and audit verify with the new deployment's printed identities and keys
// says ok. A rebuild of it leaves no offset row, so partitioned
// projectors start on it; a second restore is refused.
func TestBackupRestoreIntoNewDeployment(t *testing.T) {
	t0 := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(t0).Seconds(), what) }
	old := startService(t)
	loadSeeds(t, old)
	step("loaded")
	file := backupOf(t, old)
	last := lastSeq(t, old.natsURL)

	fresh := startService(t) // other keys, other NATS, other database
	// A reader may not restore.
	if _, _, err := runLedger(t, "", "restore", "--nats-url", fresh.natsURL, "--nats-creds", testenv.Creds(t, fresh.natsURL, natsauth.Auditor), "--in", file, "--trusted-keys", old.trustedKeys); err == nil {
		t.Fatal("the auditor restored a backup")
	}
	// Without the keys of the deployment it comes from, or leave to trust
	// the keys it names, restore checks nothing and restores nothing.
	if _, _, err := runLedger(t, "", "restore", "--nats-url", fresh.natsURL, "--nats-creds", testenv.Creds(t, fresh.natsURL, natsauth.Admin), "--in", file); err == nil ||
		!strings.Contains(err.Error(), "--trust-backup-keys") || !strings.Contains(err.Error(), "nothing restored") {
		t.Fatalf("restore without --trusted-keys: %v, want a refusal naming the two ways", err)
	}
	if n := lastSeq(t, fresh.natsURL); n != 0 {
		t.Fatalf("a refused restore left %d messages", n)
	}
	out, _, err := runLedger(t, "", "restore", "--nats-url", fresh.natsURL, "--nats-creds", testenv.Creds(t, fresh.natsURL, natsauth.Admin), "--in", file, "--trusted-keys", old.trustedKeys)
	if err != nil || !strings.Contains(out, fmt.Sprintf("verified %d events", last)) || !strings.Contains(out, "restored") {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	t.Logf("restore:\n%s", out)
	step("restored")
	waitProjected(t, fresh, last)
	step("projected")
	if a, b := allocations(t, old.dbURL), allocations(t, fresh.dbURL); a != b || a == "" {
		t.Fatalf("allocations differ:\noriginal %s\nrestored %s", a, b)
	}
	if n := unauthenticatedRows(t, fresh.dbURL); n != 0 {
		t.Fatalf("the new deployment's projector refused %d restored events as unauthenticated", n)
	}
	auditor := testenv.Creds(t, fresh.natsURL, natsauth.Auditor)
	out, errOut, err := runLedger(t, "", "audit", "verify", "--nats-url", fresh.natsURL, "--nats-creds", auditor, "--trusted-keys", fresh.trustedKeys, "--database-url", fresh.dbURL)
	if err != nil || !strings.HasPrefix(out, "ok: ") || strings.Contains(out, "UNAUTHENTICATED") {
		t.Fatalf("audit verify of the restored deployment: %v\n%s\n%s", err, out, errOut)
	}
	step("verified")
	// New events, signed with the new key, go on.
	publishOne(t, fresh, "after-restore")

	// A second restore onto the now full stream is refused.
	if _, _, err := runLedger(t, "", "restore", "--nats-url", fresh.natsURL, "--nats-creds", testenv.Creds(t, fresh.natsURL, natsauth.Admin), "--in", file, "--trusted-keys", old.trustedKeys); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("restore onto a full stream: %v", err)
	}

	// replay --into an empty database (its owner's URL), with the new
	// deployment's keys: rebuilt, exit 0, and no offset row of its own.
	into := testdb.Empty(t)
	if out, errOut, err := runLedger(t, "", "replay", "--into", into.Owner, "--nats-url", fresh.natsURL, "--nats-creds", auditor, "--trusted-keys", fresh.trustedKeys); err != nil {
		t.Fatalf("replay --into: %v\n%s\n%s", err, out, errOut)
	}
	if a, b := allocations(t, fresh.dbURL), allocations(t, into.Reporting); a != b {
		t.Fatalf("rebuilt allocations differ:\nlive    %s\nrebuilt %s", a, b)
	}
	step("rebuilt")
	// Partitioned projectors start on the rebuilt projection (no row to
	// delete by hand) and fold what comes next.
	pjs, _ := jetstream.New(testenv.Connect(t, fresh.natsURL, natsauth.Projector))
	g, err := projections.NewGroup(pjs, testdb.Pool(t, into.Projector), 3, projections.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		projections.WithTrustedKeys(mustKeyring(t, fresh.trustedKeys)), projections.WithPinnedTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	seq := publishOne(t, fresh, "after-rebuild")
	deadline := time.Now().Add(60 * time.Second)
	rebuilt := testdb.Pool(t, into.Reporting)
	for {
		var n int
		if err := rebuilt.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE seq = $1`, seq).Scan(&n); err == nil && n == 1 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("partitioned projectors on the rebuilt projection stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("partitioned projectors on the rebuilt projection did not fold a new event")
		}
		time.Sleep(50 * time.Millisecond)
	}
	step("partitioned projectors folded")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("partitioned projectors: %v", err)
	}
}

func mustKeyring(t *testing.T, path string) *signing.Keyring {
	t.Helper()
	k, err := signing.LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// publishOne appends a host_up through svc's API and returns its sequence.
func publishOne(t *testing.T, svc service, host string) uint64 {
	t.Helper()
	out, errOut, err := runLedger(t, "", "publish", "--ledger-url", svc.ledgerURL, "--ledger-token", svc.token, "--pool", "extra", "--type", "host_up",
		"--data", `{"host":"`+host+`","slots":1}`)
	if err != nil {
		t.Fatalf("publish: %v\n%s\n%s", err, out, errOut)
	}
	return lastSeq(t, svc.natsURL)
}

func unauthenticatedRows(t *testing.T, url string) int {
	t.Helper()
	list, err := query.Unauthenticated(context.Background(), testdb.Pool(t, url), "", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// editBackup rewrites the backup's line of sequence seq with edit.
func editBackup(t *testing.T, file string, seq uint64, edit func(l map[string]any)) string {
	t.Helper()
	in, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out := filepath.Join(t.TempDir(), "edited.jsonl")
	var b strings.Builder
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 4<<20)
	edited := false
	for sc.Scan() {
		line := sc.Text()
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err == nil && l["seq"] == float64(seq) {
			edit(l)
			nb, _ := json.Marshal(l)
			line, edited = string(nb), true
		}
		b.WriteString(line + "\n")
	}
	if !edited {
		t.Fatalf("no line of sequence %d in %s", seq, file)
	}
	if err := os.WriteFile(out, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRestoreRefusesTamperedBackup: a backup with an edited event, or an
// unsigned one, is refused (non-zero exit, naming the sequence) and
// nothing reaches the stream; --allow-unauthenticated restores the
// unsigned event, which the projectors then refuse.
func TestRestoreRefusesTamperedBackup(t *testing.T) {
	svc := startService(t)
	loadSeeds(t, svc)
	file := backupOf(t, svc)
	restore := func(file string, extra ...string) (string, string, error, string) {
		fresh := testenv.NATS(t)
		out, errOut, err := runLedger(t, "", append([]string{"restore", "--nats-url", fresh, "--nats-creds", testenv.Creds(t, fresh, natsauth.Admin), "--in", file, "--trust-backup-keys"}, extra...)...)
		return out, errOut, err, fresh
	}
	const victim = 5
	edited := editBackup(t, file, victim, func(l map[string]any) {
		// A demand made larger: the body no longer matches its signature.
		var env map[string]any
		raw, _ := json.Marshal(l["data"])
		var b64 string
		_ = json.Unmarshal(raw, &b64)
		body := decode64(t, b64)
		_ = json.Unmarshal(body, &env)
		env["producer"] = "someone-else"
		nb, _ := json.Marshal(env)
		l["data"] = nb
	})
	unsigned := editBackup(t, file, victim, func(l map[string]any) {
		h := l["headers"].(map[string]any)
		delete(h, signing.HeaderSignature)
		delete(h, signing.HeaderKeyID)
	})
	for name, f := range map[string]string{"edited": edited, "unsigned": unsigned} {
		out, errOut, err, fresh := restore(f)
		if err == nil || exitCode(err) == 0 || !strings.Contains(err.Error(), fmt.Sprintf("sequence %d", victim)) || !strings.Contains(out, fmt.Sprintf("UNAUTHENTICATED sequence %d", victim)) {
			t.Errorf("%s backup: %v\n%s\n%s", name, err, out, errOut)
		}
		if n := lastSeq(t, fresh); n != 0 {
			t.Errorf("%s backup: the refused restore stored %d messages", name, n)
		}
	}
	out, errOut, err, _ := restore(unsigned, "--allow-unauthenticated")
	if err != nil || !strings.Contains(out, fmt.Sprintf("restored UNAUTHENTICATED (the projectors refuse it): sequence %d", victim)) {
		t.Errorf("unsigned backup with --allow-unauthenticated: %v\n%s\n%s", err, out, errOut)
	}
}

func decode64(t *testing.T, s string) []byte {
	t.Helper()
	var b []byte
	if err := json.Unmarshal([]byte(`"`+s+`"`), &b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFoldingCommandsRefuseUnauthenticated: every command that folds the
// log exits non-zero, naming the events, when it refused events as
// unauthenticated: replay, replay --into (which still rebuilds), explain,
// audit verify; and load --check fails a step whose events the projector
// refused (a projector that trusts another key than the ledger's).
func TestFoldingCommandsRefuseUnauthenticated(t *testing.T) {
	svc := startService(t)
	loadSeeds(t, svc)
	// A pool with a plan, then an event published around the ledger
	// (admin identity, unsigned).
	if out, errOut, err := runLedger(t, "", "publish", "--ledger-url", svc.ledgerURL, "--ledger-token", svc.token, "--pool", "forged", "--type", "plan",
		"--data", `{"plan":{"consumers":[{"path":"/x"}]}}`); err != nil {
		t.Fatalf("publish: %v\n%s\n%s", err, out, errOut)
	}
	js, _ := jetstream.New(testenv.Connect(t, svc.natsURL, natsauth.Admin))
	forged, _ := json.Marshal(events.Envelope{ID: "forged", Type: events.TypeHostUp, V: events.Version, Pool: "forged",
		Time: time.Now().UTC(), Producer: "ledger", Data: json.RawMessage(`{"host":"h9","slots":100}`)})
	ack, err := js.Publish(context.Background(), stream.Subject("forged", events.TypeHostUp), forged)
	if err != nil {
		t.Fatal(err)
	}
	waitProjected(t, svc, ack.Sequence)
	auditor := testenv.Creds(t, svc.natsURL, natsauth.Auditor)
	logArgs := []string{"--nats-url", svc.natsURL, "--nats-creds", auditor, "--trusted-keys", svc.trustedKeys}
	into := testdb.Empty(t)
	for _, args := range [][]string{
		append([]string{"replay", "--pool", "forged"}, logArgs...),
		append([]string{"replay", "--into", into.Owner}, logArgs...),
		append([]string{"explain", "--pool", "forged", "--consumer", "/x"}, logArgs...),
		append([]string{"audit", "verify", "--database-url", svc.dbURL}, logArgs...),
	} {
		out, errOut, err := runLedger(t, "", args...)
		if exitCode(err) != 2 || !strings.Contains(out+errOut, "UNAUTHENTICATED") || !strings.Contains(out+errOut, fmt.Sprintf("sequence %d", ack.Sequence)) {
			t.Errorf("ledger %s: exit %d (%v)\n%s\n%s", args[0]+" "+args[1], exitCode(err), err, out, errOut)
		}
	}

	// The ledger signs with its key; this projector trusts another.
	wrong := startServiceCfg(t, serviceCfg{projectorTrusts: signing.NewKeyring(signing.Generate().Public())})
	seed, _ := filepath.Glob("../../test/scenarios/seed/*.yaml")
	out, _, err := runLedger(t, "", "load", "--fresh-pool", "--check", "--url", wrong.ledgerURL, "--ledger-token", wrong.token, "--database-url", wrong.dbURL, seed[0])
	if exitCode(err) != 1 || !strings.Contains(out, "refused as unauthenticated") {
		t.Errorf("load --check against a projector that trusts another key: exit %d\n%s", exitCode(err), out)
	}
}

func allocations(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s string
	err = conn.QueryRow(ctx, `SELECT coalesce(string_agg(pool || ' ' || consumer || ' ' || host || '=' || slots, ', ' ORDER BY pool, consumer, host), '') FROM allocations WHERE pool <> 'extra'`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// changingFile is a backup file that another process rewrites while
// restore reads it: the first read (the verification) sees first, every
// read after restore seeks back to its start sees then.
type changingFile struct {
	r     *bytes.Reader
	then  []byte
	seeks int
}

func (f *changingFile) Read(p []byte) (int, error) { return f.r.Read(p) }

func (f *changingFile) Seek(off int64, whence int) (int64, error) {
	if off == 0 && whence == io.SeekStart {
		if f.seeks++; f.seeks == 1 {
			f.r = bytes.NewReader(f.then)
		}
	}
	return f.r.Seek(off, whence)
}

// TestRestoreRefusesBackupChangedMidway: restore verifies the whole
// file, then reads it again to publish it; a file edited between the two
// reads (a victim's body changed, or a message added after the header's
// last) must publish nothing the first read did not verify. Before the
// second read verified each line again, the edited event was published
// unverified, and so was a message past the header's last sequence.
func TestRestoreRefusesBackupChangedMidway(t *testing.T) {
	svc := startService(t)
	loadSeeds(t, svc)
	file := backupOf(t, svc)
	orig, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const victim = 5
	edited := editBackup(t, file, victim, func(l map[string]any) {
		var b64 string
		raw, _ := json.Marshal(l["data"])
		_ = json.Unmarshal(raw, &b64)
		var env map[string]any
		_ = json.Unmarshal(decode64(t, b64), &env)
		env["producer"] = "someone-else"
		nb, _ := json.Marshal(env)
		l["data"] = nb
	})
	editedBytes, err := os.ReadFile(edited)
	if err != nil {
		t.Fatal(err)
	}
	// A message after the header's last: the last line again, one
	// sequence further.
	lines := strings.Split(strings.TrimSpace(string(orig)), "\n")
	var extra map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &extra); err != nil {
		t.Fatal(err)
	}
	last := uint64(extra["seq"].(float64))
	extra["seq"] = float64(last + 1)
	nb, _ := json.Marshal(extra)
	longer := append(append([]byte{}, orig...), append(nb, '\n')...)

	for name, c := range map[string]struct {
		then   []byte
		stored uint64
	}{
		"an event edited": {editedBytes, victim - 1},
		"a message added": {longer, last},
	} {
		fresh := testenv.NATS(t)
		js, err := jetstream.New(testenv.Connect(t, fresh, natsauth.Admin))
		if err != nil {
			t.Fatal(err)
		}
		f := &changingFile{r: bytes.NewReader(orig), then: c.then}
		_, err = backup.Restore(context.Background(), js, f, backup.RestoreOptions{TrustBackupKeys: true})
		if err == nil {
			t.Errorf("%s between the two reads: restore succeeded", name)
		}
		if f.seeks == 0 {
			t.Fatalf("%s: restore never read the file again", name)
		}
		if n := lastSeq(t, fresh); n != c.stored {
			t.Errorf("%s between the two reads: the stream holds sequences up to %d, want %d (nothing past what the first read verified): %v", name, n, c.stored, err)
		}
	}
}

// TestBackupStoppedMidwayLeavesNoFile: a backup that stops before its
// end (here its context cancelled; a lost connection or a kill does the
// same) leaves no file under the name asked for, which a later restore
// would take for a backup, and nothing of its own; run again, it writes
// the backup (decision 494). Before, the truncated file had that name and
// the second run refused it as existing.
func TestBackupStoppedMidwayLeavesNoFile(t *testing.T) {
	svc := startService(t)
	if _, errOut, err := runLedger(t, "", "publish", "--ledger-url", svc.ledgerURL, "--ledger-token", svc.token, "--pool", "big", "--type", "plan",
		"--data", `{"plan":{"consumers":[{"path":"/A"},{"path":"/B"}]}}`); err != nil {
		t.Fatalf("plan: %v\n%s", err, errOut)
	}
	// Enough messages that the backup takes a while.
	for b := 0; b < 40; b++ {
		var evs []string
		for i := 0; i < 100; i++ {
			evs = append(evs, fmt.Sprintf(`{"type":"demand","data":{"demands":{"/A":%d,"/B":%d}}}`, (b+i)%7, i%5))
		}
		rq, _ := http.NewRequest(http.MethodPost, svc.ledgerURL+"/v1/pools/big/events", strings.NewReader("["+strings.Join(evs, ",")+"]"))
		rq.Header.Set("Authorization", "Bearer "+svc.token)
		rq.Header.Set("Content-Type", "application/json")
		rs, err := http.DefaultClient.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(rs.Body)
		rs.Body.Close()
		if rs.StatusCode != http.StatusOK {
			t.Fatalf("append: %d %s", rs.StatusCode, body)
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "ledger.jsonl")
	creds := testenv.Creds(t, svc.natsURL, natsauth.Auditor)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runBackup(ctx, io.Discard, io.Discard, svc.natsURL, creds, svc.trustedKeys, file)
	}()
	// Stopped once it has written something.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if written(t, dir) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the backup wrote nothing in 30 s")
		}
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the backup stopped midway succeeded (it was too fast to stop: give it more messages)")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a backup stopped midway left %d file(s), want none: %v", len(ents), ents)
	}
	out, errOut, err := runLedger(t, "", "backup", "--nats-url", svc.natsURL, "--nats-creds", creds, "--trusted-keys", svc.trustedKeys, "--out", file)
	if err != nil || !strings.Contains(out, "backed up 4001 messages") {
		t.Fatalf("backup run again: %v\n%s\n%s", err, out, errOut)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("a backup left %v, want only %s", ents, file)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("backup file: %v, mode %v, want 0600", err, fi.Mode())
	}
	// Never written over.
	if _, _, err := runLedger(t, "", "backup", "--nats-url", svc.natsURL, "--nats-creds", creds, "--trusted-keys", svc.trustedKeys, "--out", file); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("backup onto an existing file: %v, want refused", err)
	}
}

// written is how many bytes the files of dir hold.
func written(t *testing.T, dir string) int64 {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// TestRestoreOfAnotherLogChangesNothing: restore onto a stream that holds
// another log's messages is refused, naming the first that differs, and
// changes nothing. Before, it recorded the backup's keys in the stream as
// historical keys, trusted up to the backup's last sequence, before it
// compared the messages there: the refused stream then trusted the
// other deployment's key for sequences it had not stored yet, so that
// deployment's signed events, appended there later, counted as its own.
func TestRestoreOfAnotherLogChangesNothing(t *testing.T) {
	first, other := startService(t), startService(t)
	loadSeeds(t, first)
	loadSeeds(t, other)
	if _, errOut, err := runLedger(t, "", "publish", "--ledger-url", other.ledgerURL, "--ledger-token", other.token, "--pool", "more", "--type", "plan",
		"--data", `{"plan":{"consumers":[{"path":"/A"}]}}`); err != nil {
		t.Fatalf("publish: %v\n%s", err, errOut)
	}
	mine, theirs := backupOf(t, first), backupOf(t, other)
	fresh := testenv.NATS(t)
	admin := testenv.Creds(t, fresh, natsauth.Admin)
	if out, errOut, err := runLedger(t, "", "restore", "--nats-url", fresh, "--nats-creds", admin, "--in", mine, "--trusted-keys", first.trustedKeys); err != nil {
		t.Fatalf("restore: %v\n%s\n%s", err, out, errOut)
	}
	held := lastSeq(t, fresh)
	out, errOut, err := runLedger(t, "", "restore", "--nats-url", fresh, "--nats-creds", admin, "--in", theirs, "--trusted-keys", other.trustedKeys)
	if !errors.Is(err, backup.ErrNotEmpty) || !strings.Contains(err.Error(), "sequence 1 is not the backup's") {
		t.Fatalf("restore of another log: %v\n%s\n%s", err, out, errOut)
	}
	if n := lastSeq(t, fresh); n != held {
		t.Errorf("the refused restore left the stream at %d, want %d", n, held)
	}
	theirKeys, err := signing.LoadKeyring(other.trustedKeys)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(testenv.Connect(t, fresh, natsauth.Auditor))
	if err != nil {
		t.Fatal(err)
	}
	history, err := stream.HistorySource(js)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for id := range theirKeys.Public() {
		if h, ok := history[id]; ok {
			t.Errorf("the refused restore left the stream trusting the other log's key %s up to sequence %d (it holds %d)", id, h.UpTo, held)
		}
	}
}
