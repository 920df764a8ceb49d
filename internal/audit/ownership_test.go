package audit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestVerifyComparesOwnership projects the ownership worked example
// (docs/rules.md#ownership-example; rules
// version 3), verifies it, then changes the ownership
// rows and consumer_state's ownership columns one at a time: each change
// is a divergence naming what differs.
func TestVerifyComparesOwnership(t *testing.T) {
	ctx := context.Background()
	js := testenv.JetStream(t, testenv.NATS(t))
	// Each with its role: the projector writes, the auditor reads (the
	// URL `ledger dev` prints), the tampering is an administrator's.
	roles := testdb.New(t)
	db := testdb.Pool(t, roles.Admin)

	last := publishScenario(t, js, "../scenario/testdata/ownership/own-lend-return.yaml", "own")
	project(t, js, testdb.Pool(t, roles.Projector), last)

	auditor := testenv.As(t, js, natsauth.Auditor) // what `ledger audit verify` holds
	reporting := testdb.Pool(t, roles.Reporting)   // the DATABASE_URL it is given
	verify := func() error {
		_, err := audit.Verify(ctx, auditor, reporting, nil, 1, "", nil)
		return err
	}
	if err := verify(); err != nil {
		t.Fatalf("verify an intact projection: %v", err)
	}
	for _, c := range []struct {
		name, change, undo, what string
	}{
		{"an ownership row changed", `UPDATE ownership SET slots = 3 WHERE consumer = '/B'`, `UPDATE ownership SET slots = 4 WHERE consumer = '/B'`, "ownership of /B on h2"},
		{"an ownership row missing", `DELETE FROM ownership WHERE consumer = '/A'`, `INSERT INTO ownership VALUES ('own', '/A', 'h1', 4)`, "ownership of /A on h1"},
		{"an ownership row too many", `INSERT INTO ownership VALUES ('own', '/A', 'h3', 1)`, `DELETE FROM ownership WHERE host = 'h3'`, "ownership of /A on h3"},
		{"lent_out changed", `UPDATE consumer_state SET lent_out = 2 WHERE consumer = '/B'`, `UPDATE consumer_state SET lent_out = 0 WHERE consumer = '/B'`, "consumer_state of /B (owned, own_used, lent_out)"},
		{"sources changed", `UPDATE consumer_state SET sources = '[{"pool": "own", "slots": 5}]' WHERE consumer = '/B'`, ``, "consumer_state of /B (sources)"},
	} {
		exec(t, db, c.change)
		err := verify()
		var d *audit.Divergence
		if !errors.As(err, &d) || d.Pool != "own" || !strings.Contains(d.What, c.what) {
			t.Errorf("%s: verify = %v, want a divergence of pool own about %s", c.name, err, c.what)
		}
		if c.undo != "" {
			exec(t, db, c.undo)
		}
	}
}

func exec(t *testing.T, db *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// publishScenario appends a scenario's events to the stream as the ledger
// would (a plan naming no version stamped with the newest)
// and returns the last sequence.
func publishScenario(t *testing.T, js jetstream.JetStream, file, pool string) uint64 {
	t.Helper()
	s, err := scenario.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	evs := s.Events()
	at := scenario.Epoch
	var last uint64
	for i, ev := range evs {
		p := domain.StampRules(ev.Payload)
		env, err := events.New(fmt.Sprintf("ev-%d", i), pool, "test", at, p)
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := js.Publish(context.Background(), stream.Subject(pool, p.EventType()), data, jetstream.WithMsgID(env.ID))
		if err != nil {
			t.Fatal(err)
		}
		last, at = ack.Sequence, at.Add(time.Second)
	}
	return last
}

// project runs a projector until it has
// applied seq.
func project(t *testing.T, js jetstream.JetStream, db *pgxpool.Pool, seq uint64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() {
		done <- projections.New(testenv.As(t, js, natsauth.Projector), db, projections.WithLogger(quiet)).Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := query.ProjectorOffset(context.Background(), db, "")
		if err != nil {
			t.Fatal(err)
		}
		if got >= seq {
			return
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("projector stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the projector did not reach %d", seq)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
