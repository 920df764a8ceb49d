package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestBackupRestoreRoundTrip: back the stream up (auditor identity),
// restore it on a fresh server (admin), rebuild the projection from it
// into an empty database, and audit verify passes with the ledger's
// trusted key; the rebuilt allocations are those of the live projection.
func TestBackupRestoreRoundTrip(t *testing.T) {
	svc := startService(t)
	seed, _ := filepath.Glob("../../test/scenarios/seed/*.yaml")
	if out, errOut, err := runLedger(t, "", append([]string{"load", "--fresh-pool", "--check", "--url", svc.ledgerURL, "--ledger-token", svc.token, "--database-url", svc.dbURL}, seed...)...); err != nil {
		t.Fatalf("load: %v\n%s\n%s", err, out, errOut)
	}
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	out, _, err := runLedger(t, "", "backup", "--nats-url", svc.natsURL, "--nats-creds", testenv.Creds(t, svc.natsURL, natsauth.Auditor), "--out", file)
	if err != nil || !strings.Contains(out, "backed up") {
		t.Fatalf("backup: %v\n%s", err, out)
	}

	fresh := testenv.NATS(t)
	// A reader may not restore.
	if _, _, err := runLedger(t, "", "restore", "--nats-url", fresh, "--nats-creds", testenv.Creds(t, fresh, natsauth.Auditor), "--in", file); err == nil {
		t.Fatal("the auditor restored a backup")
	}
	out, _, err = runLedger(t, "", "restore", "--nats-url", fresh, "--nats-creds", testenv.Creds(t, fresh, natsauth.Admin), "--in", file)
	if err != nil || !strings.Contains(out, "restored") {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	// A second restore onto the now full stream is refused.
	if _, _, err := runLedger(t, "", "restore", "--nats-url", fresh, "--nats-creds", testenv.Creds(t, fresh, natsauth.Admin), "--in", file); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("restore onto a full stream: %v", err)
	}

	rebuilt := testenv.Postgres(t)
	reader := testenv.Creds(t, fresh, natsauth.Auditor)
	if out, errOut, err := runLedger(t, "", "replay", "--into", rebuilt, "--nats-url", fresh, "--nats-creds", reader, "--trusted-keys", svc.trustedKeys); err != nil {
		t.Fatalf("replay --into: %v\n%s\n%s", err, out, errOut)
	}
	out, errOut, err := runLedger(t, "", "audit", "verify", "--nats-url", fresh, "--nats-creds", reader, "--trusted-keys", svc.trustedKeys, "--database-url", rebuilt)
	if err != nil || !strings.HasPrefix(out, "ok: ") || strings.Contains(out, "UNAUTHENTICATED") {
		t.Fatalf("audit verify of the rebuilt projection: %v\n%s\n%s", err, out, errOut)
	}
	if a, b := allocations(t, svc.dbURL), allocations(t, rebuilt); a != b || a == "" {
		t.Fatalf("allocations differ:\nlive    %s\nrebuilt %s", a, b)
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
	err = conn.QueryRow(ctx, `SELECT coalesce(string_agg(pool || ' ' || consumer || ' ' || host || '=' || slots, ', ' ORDER BY pool, consumer, host), '') FROM allocations`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
