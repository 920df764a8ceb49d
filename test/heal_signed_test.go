package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestRecoverAppendsOnlySignedEvents: the heal appends the events rows
// beyond the stream's end with the ledger's NATS identity into a log
// that never deletes, and those rows are the projector's PostgreSQL
// role's to write. Whoever held that role could add a row of their own
// after the projection's end and move the offset to it (both within the
// role's rights): with the ledger's trusted keys, `ledger recover` (and
// the projector's own heal, the same code) now refuses, naming the
// sequence, and appends nothing; a tail the ledger signed is recovered
// as before (decision 497). Before, the planted message was stored in
// the log for good.
func TestRecoverAppendsOnlySignedEvents(t *testing.T) {
	bin := ledgerBinary(t)
	ctx := context.Background()
	signer := signing.Generate()
	keys := filepath.Join(t.TempDir(), "trusted.pub")
	if err := os.WriteFile(keys, signing.PublicPEM(signer.Public()), 0o644); err != nil {
		t.Fatal(err)
	}
	nats := newCrashNATS(t)
	roles := testdb.New(t)
	db, err := pgxpool.New(ctx, roles.Projector) // the projector's own role, as deployed
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)

	// Project a signed pool, lose the stream's tail (as projectThenLoseTail).
	signedPool(t, nats.js, signer, "r", 0, 10)
	project := runProjectorInProcess(t, nats.js, db)
	early := nats.lastSeq(t)
	waitOffsetAbove(t, db, early-1)
	_ = project.stop()
	nats.stop()
	synced := nats.snapshot()
	nats.start()
	signedPool(t, nats.js, signer, "r", 10, 25)
	project = runProjectorInProcess(t, nats.js, db)
	full := nats.lastSeq(t)
	waitOffsetAbove(t, db, full-1)
	_ = project.stop()
	nats.stop()
	nats.restore(synced)
	nats.start()

	recover := func() (string, error) {
		cmd := exec.Command(bin, "recover", "--nats-url", nats.srv.URL(), "--nats-creds", testenv.Creds(t, nats.srv.URL(), natsauth.Ledger),
			"--trusted-keys", keys)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+roles.Reporting)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// As the projector's role: a row of one's own after the end, and the
	// offset moved to it.
	planted := full + 1
	if _, err := db.Exec(ctx, `INSERT INTO events (pool, seq, id, type, v, time, producer, data, prev_hash, hash, subject, headers, body)
		VALUES ('r', $1, 'planted', 'demand', 1, now(), 'nobody', '{"demands":{"/x":12}}', '\x00', '\x00', 'ledger.r.demand', '{}', convert_to('{"planted":true}', 'UTF8'))`, int64(planted)); err != nil {
		t.Fatal(err)
	}
	if tag, err := db.Exec(ctx, `UPDATE projector_offsets SET stream_seq = $1 WHERE stream_seq = $2`, int64(planted), int64(full)); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("move the offset: %v %v", tag, err)
	}
	out, err := recover()
	if err == nil || !strings.Contains(out, fmt.Sprintf("sequence %d", planted)) || !strings.Contains(out, "signed by no trusted key") {
		t.Errorf("ledger recover with a planted row: %v\n%s", err, out)
	}
	if got := nats.lastSeq(t); got != early {
		t.Fatalf("after ledger recover refused, the stream ends at %d, want %d (nothing appended)", got, early)
	}

	// The planted row gone (as the owner: the projector's role may not
	// delete), the signed tail is recovered.
	owner, err := pgxpool.New(ctx, roles.Owner)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	if _, err := owner.Exec(ctx, `DELETE FROM events WHERE seq = $1`, int64(planted)); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `UPDATE projector_offsets SET stream_seq = $1 WHERE stream_seq = $2`, int64(full), int64(planted)); err != nil {
		t.Fatal(err)
	}

	// A copy of a genuine signed event (the pool's first, stored in the
	// stream that survived) planted after the end: it passed the
	// signature check and was stored again for good, to be refused as a
	// duplicate by the fold (decision 508). Refused, nothing appended.
	if _, err := db.Exec(ctx, `INSERT INTO events (pool, seq, id, type, v, time, producer, data, prev_hash, hash, subject, headers, body)
		SELECT pool, $1, id, type, v, time, producer, data, prev_hash, hash, subject, headers, body FROM events WHERE pool = 'r' ORDER BY seq LIMIT 1`, int64(planted)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE projector_offsets SET stream_seq = $1 WHERE stream_seq = $2`, int64(planted), int64(full)); err != nil {
		t.Fatal(err)
	}
	out, err = recover()
	if err == nil || !strings.Contains(out, fmt.Sprintf("the message at sequence %d in PostgreSQL is event", planted)) || !strings.Contains(out, "which the stream already holds at sequence") {
		t.Errorf("ledger recover with a planted copy of a signed event: %v\n%s", err, out)
	}
	if got := nats.lastSeq(t); got != early {
		t.Fatalf("after ledger recover refused the copy, the stream ends at %d, want %d (nothing appended)", got, early)
	}
	if _, err := owner.Exec(ctx, `DELETE FROM events WHERE seq = $1`, int64(planted)); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `UPDATE projector_offsets SET stream_seq = $1 WHERE stream_seq = $2`, int64(full), int64(planted)); err != nil {
		t.Fatal(err)
	}
	out, err = recover()
	if want := fmt.Sprintf("recovered %d events: the stream ended at %d, it now ends at %d", full-early, early, full); err != nil || !strings.Contains(out, want) {
		t.Fatalf("ledger recover of a signed tail: %v\n%s\nwant %q", err, out, want)
	}
	if got := nats.lastSeq(t); got != full {
		t.Fatalf("after ledger recover the stream ends at %d, want %d", got, full)
	}
}
