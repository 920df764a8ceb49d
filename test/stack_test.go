package test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/testdb"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/contract"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/migrations"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
)

func TestMain(m *testing.M) { testenv.Main(m, contract.InstallDefault) }

// stack is a real NATS with the LEDGER stream and a migrated PostgreSQL.
type stack struct {
	js      jetstream.JetStream
	db      *pgxpool.Pool // the superuser: tests stage, tamper and restore with it
	roles   testdb.DB     // the database's roles, for the commands run as users run them
	natsURL string
}

func newStack(t *testing.T) *stack {
	t.Helper()
	natsURL := testenv.NATS(t)
	js := testenv.JetStream(t, natsURL)
	roles := testdb.New(t)
	return &stack{js: js, db: testdb.Pool(t, roles.Admin), roles: roles, natsURL: natsURL}
}

// newDB returns a fresh, migrated database.
func newDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	url := testenv.Postgres(t)
	if err := migrations.Up(context.Background(), url); err != nil {
		t.Fatal(err)
	}
	db, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

// publishScenario appends a scenario's events to the stream as the ledger
// would (stamped times and rules versions, one message id each), refused
// ones included: the engine records them as refused. A plan naming a rules
// version the ledger does not implement is left out: the ledger refuses it
// at append, and a stored one stops the projector.
func (s *stack) publishScenario(t *testing.T, file, pool string) {
	t.Helper()
	sc, err := scenario.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tl := scenario.NewTimeline()
	evs := sc.Events()
	for i, ev := range evs {
		at := tl.At(ev.Time)
		if domain.StampRules(ev.Payload) == ev.Payload && isPlan(ev.Payload) && !domain.RulesOf(ev.Payload.(*events.PlanChange).Plan).Released() {
			continue
		}
		env, err := events.New(fmt.Sprintf("%s-%d", pool, i), pool, "test", at, domain.StampRules(ev.Payload))
		if err != nil {
			t.Fatal(err)
		}
		data, _ := jsonMarshal(env)
		if _, err := s.js.Publish(context.Background(), stream.Subject(pool, env.Type), data, jetstream.WithMsgID(env.ID)); err != nil {
			t.Fatal(err)
		}
	}
}

// project runs a projector into db until it has committed everything the
// stream holds now.
func (s *stack) project(t *testing.T, db *pgxpool.Pool, opts ...projections.Option) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	info, err := mustStream(t, s.js).Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	// As the projector identity, the one a projector process holds.
	pjs := testenv.As(t, s.js, natsauth.Projector)
	go func() { done <- projections.New(pjs, db, append(opts, projections.WithLogger(quiet))...).Run(runCtx) }()
	stopped := false
	defer func() {
		stop()
		if !stopped {
			<-done
		}
	}()
	for {
		seq, err := query.ProjectorOffset(ctx, db, "")
		if err != nil {
			t.Fatal(err)
		}
		if seq >= info.State.LastSeq {
			return
		}
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("projector stopped: %v", err)
		case <-ctx.Done():
			t.Fatalf("projector did not catch up to %d (at %d)", info.State.LastSeq, seq)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// rebuild projects the whole stream into db as `ledger replay --into`
// does: up to the stream's end (projections.WithUntil), with the
// auditor's identity, which holds no consumer.
func (s *stack) rebuild(t *testing.T, db *pgxpool.Pool, name string, opts ...projections.Option) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	info, err := mustStream(t, s.js).Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ajs := testenv.As(t, s.js, natsauth.Auditor)
	opts = append(opts, projections.WithLogger(quiet), projections.WithName(name), projections.WithUntil(info.State.LastSeq))
	if err := projections.New(ajs, db, opts...).Run(ctx); err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if seq, err := query.ProjectorOffset(ctx, db, name); err != nil || seq < info.State.LastSeq {
		t.Fatalf("rebuild reached %d (%v), want %d", seq, err, info.State.LastSeq)
	}
}

func isPlan(p events.Payload) bool { _, ok := p.(*events.PlanChange); return ok }

func mustStream(t *testing.T, js jetstream.JetStream) jetstream.Stream {
	t.Helper()
	s, err := js.Stream(context.Background(), stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var nonToken = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// poolFor names a pool after a scenario file.
func poolFor(file string) string {
	return nonToken.ReplaceAllString(strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)), "_")
}
