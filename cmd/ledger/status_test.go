package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// ledger status prints the summary (exit 0 when ok), --json the API's
// JSON, and exits 2 naming the problem when a pool is halted.
func TestStatusCommand(t *testing.T) {
	svc := startService(t)
	url, tok := "--ledger-url="+svc.ledgerURL, "--ledger-token="+svc.token
	batch := `[{"type":"plan","data":{"plan":{"consumers":[{"path":"/A"}]}}},{"type":"host_up","data":{"host":"h1","slots":4}}]`
	if _, errOut, err := runLedger(t, batch, "publish", url, tok, "--pool", "p", "--file", "-"); err != nil {
		t.Fatalf("publish: %v %s", err, errOut)
	}
	// The projector runs: wait until it has caught up.
	var doc map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, errOut, err := runLedger(t, "", "status", url, tok, "--json")
		if jerr := json.Unmarshal([]byte(out), &doc); jerr != nil {
			t.Fatalf("status --json: %v (%v, %s): %q", jerr, err, errOut, out)
		}
		ps, _ := doc["projectors"].([]any)
		if len(ps) == 1 && ps[0].(map[string]any)["lag_events"] == float64(0) && err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("projector not caught up after 30s: %s (%v)", out, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st := doc["stream"].(map[string]any)
	for _, k := range []string{"name", "replicas", "leader", "messages", "first_seq", "last_seq", "replicas_detail"} {
		if _, ok := st[k]; !ok {
			t.Errorf("stream lacks %q: %v", k, st)
		}
	}
	for _, k := range []string{"status", "projectors", "halted", "postgres", "nats"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("status lacks %q: %v", k, doc)
		}
	}

	out, _, err := runLedger(t, "", "status", url, tok)
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	for _, want := range []string{"status: ok", "stream LEDGER: 1 replica(s), leader test", "2 messages, sequences 1..2",
		"projector  all pools", "halted pools: none", "postgres: reachable", "nats: connected to"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	t.Logf("ledger status:\n%s", out)

	conn, err := pgx.Connect(context.Background(), svc.adminURL) // a halt, staged
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `INSERT INTO halted_pools (pool, seq, reason) VALUES ('bad', 7, 'fold failed: boom')`); err != nil {
		t.Fatal(err)
	}
	out, _, err = runLedger(t, "", "status", url, tok)
	if exitCode(err) != exitDegraded || !strings.Contains(out, "status: degraded") || !strings.Contains(out, "! pool bad halted at sequence 7") ||
		!strings.Contains(out, "bad at sequence 7") {
		t.Errorf("with a halted pool: exit %d\n%s", exitCode(err), out)
	}

	// The container healthchecks: no token needed. Liveness: 0 while it
	// can append; readiness: 0 while the projection is current (a halted
	// pool degrades it, the others' reads are current).
	out, _, err = runLedger(t, "", "status", url, "--healthz")
	if err != nil || !strings.HasPrefix(out, "ok (nats ok, stream ok)") {
		t.Errorf("status --healthz: %v %q", err, out)
	}
	out, _, err = runLedger(t, "", "status", url, "--readyz")
	if err != nil || !strings.HasPrefix(out, "degraded (postgres ok, projection current, lag ") || !strings.Contains(out, "1 halted pools") {
		t.Errorf("status --readyz: %v %q", err, out)
	}
	_, _, err = runLedger(t, "", "status", "--ledger-url=http://"+freePort(t), "--healthz")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "no ledger listening") {
		t.Errorf("status --healthz with no ledger: %v", err)
	}

	// Without a token: refused, exit 1, saying what to set.
	_, _, err = runLedger(t, "", "status", url)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "LEDGER_TOKEN") {
		t.Errorf("status without a token: %v", err)
	}
}

// The pools view (a token limited to some pools, docs/decisions.md 252)
// prints whether appends and reads work, the problems, NATS connected
// or not, its halted pools and PostgreSQL, and says why the stream and
// the projectors are not shown (not "none has committed yet").
func TestStatusPrintsThePoolsView(t *testing.T) {
	var b strings.Builder
	res := api.StatusResponse{View: api.ViewPools, Status: "degraded", Appends: "ok", Reads: "ok", Time: time.Now(),
		Problems: []string{"pool p halted at sequence 7 (fix the cause and restart the projector)"},
		Halted:   []api.HaltedStatus{{Pool: "p", Seq: 7, Reason: "boom", HaltedAt: time.Now()}},
		Postgres: api.PostgresStatus{Reachable: true}, NATS: api.NATSStatus{Connected: true}}
	if err := printStatus(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"status: degraded", "! pool p halted", "nats: connected\n", "shown to a token that reads every pool", "p at sequence 7", "postgres: reachable"} {
		if !strings.Contains(out, want) {
			t.Errorf("pools view lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "projectors:") || strings.Contains(out, "stream ") {
		t.Errorf("pools view prints the stream or the projectors:\n%s", out)
	}
}

// TestStatusRefusesNonPositiveTimeout: --timeout 0 (or less) is refused
// as a bad flag, naming it; before, the deadline already past failed the
// request with "context deadline exceeded", as if the ledger were down.
func TestStatusRefusesNonPositiveTimeout(t *testing.T) {
	for _, v := range []string{"0", "-1s"} {
		_, _, err := runLedger(t, "", "status", "--ledger-url", "http://127.0.0.1:1", "--timeout", v)
		if err == nil || !strings.Contains(err.Error(), "--timeout") || !strings.Contains(err.Error(), "want a positive duration") {
			t.Errorf("status --timeout %s: %v", v, err)
		}
	}
}

// TestStatusProbesPrintJSON: `ledger status --json --healthz` (and
// --readyz) prints the probe's JSON answer, as README's `[--json]
// [--healthz|--readyz]` reads; it printed the text line before, --json
// ignored. A failing probe (503: this API's NATS connection closed)
// prints its JSON too, naming the part, and exits 1 as without --json.
func TestStatusProbesPrintJSON(t *testing.T) {
	svc := startService(t)
	url := "--ledger-url=" + svc.ledgerURL
	for _, probe := range []string{"--healthz", "--readyz"} {
		out, errOut, err := runLedger(t, "", "status", url, probe, "--json")
		var doc map[string]any
		if err != nil || json.Unmarshal([]byte(out), &doc) != nil || doc["status"] == nil {
			t.Fatalf("status %s --json: %v %s: want the probe's JSON, got %q", probe, err, errOut, out)
		}
		if probe == "--healthz" && (doc["nats"] != "ok" || doc["stream"] != "ok") {
			t.Errorf("status --healthz --json: %v", doc)
		}
		if probe == "--readyz" && doc["postgres"] != "ok" {
			t.Errorf("status --readyz --json: %v", doc)
		}
	}

	// An API of its own, as ledger serve holds it, whose NATS connection
	// then closes: /healthz answers 503.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nc := testenv.Connect(t, svc.natsURL, natsauth.Ledger)
	js, _ := jetstream.New(nc)
	db, err := pgxpool.New(ctx, svc.roles.API)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, tokens := testenv.AdminToken(t)
	srv, err := api.New(ctx, js, db, api.WithTokens(tokens))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	nc.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _, err := runLedger(t, "", "status", "--ledger-url="+hs.URL, "--healthz", "--json")
		var doc map[string]any
		jerr := json.Unmarshal([]byte(out), &doc)
		if exitCode(err) == 1 {
			if jerr != nil || doc["status"] == "ok" || doc["nats"] == "ok" {
				t.Fatalf("failing status --healthz --json: %v: want the probe's JSON naming NATS, got %q", err, out)
			}
			var ee exitError
			if !errors.As(err, &ee) {
				t.Errorf("failing status --healthz --json: %v: want exit 1 without a message (the JSON says it)", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz still live 20s after NATS closed: %v %q", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// No ledger: an error, as without --json.
	if _, _, err := runLedger(t, "", "status", "--ledger-url=http://"+freePort(t), "--readyz", "--json"); exitCode(err) != 1 || !strings.Contains(err.Error(), "no ledger listening") {
		t.Errorf("status --readyz --json with no ledger: %v", err)
	}
}
