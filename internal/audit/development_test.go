package audit_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/migrations"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestReplayRulesDevelopment: a log whose plan names the rules version in
// development (rules 4, d-pin-1) is re-folded by a Replayer made
// WithDevelopmentRules (as the console of ledger dev --rules-development
// does) with the decisions the scenario states; without it the replay
// stops at the plan, naming the version, and a projector without the switch
// halts the pool there.
func TestReplayRulesDevelopment(t *testing.T) {
	ctx := context.Background()
	js := testenv.JetStream(t, testenv.NATS(t))
	last := publishScenario(t, js, "../../test/development/v4/d-pin-1-leaf-under-preemptable-parent.yaml", "v4")

	replay := func(opts ...audit.Option) (map[uint64][]domain.Decision, error) {
		r := audit.NewReplayer(nil, 1, opts...)
		got := map[uint64][]domain.Decision{}
		err := audit.ReadLog(ctx, js, 1, stream.PoolFilter("v4"), func(m audit.Message) error {
			ev, ok, err := r.Fold(ctx, m)
			if ok {
				got[m.Stored.Seq] = ev.Result.Decisions
			}
			return err
		})
		return got, err
	}
	got, err := replay(audit.WithDevelopmentRules())
	if err != nil {
		t.Fatal(err)
	}
	var step2 []string
	for _, d := range got[4] {
		step2 = append(step2, string(d.Kind)+" "+d.Consumer+"<-"+d.From)
	}
	if strings.Join(step2, ", ") != "grant /B<-, reclaim /B<-/A/q" || len(got) != int(last) {
		t.Errorf("replay under rules 4 in development: step 2 decides %v (%d events)", step2, len(got))
	}
	if _, err := replay(); !errors.Is(err, projections.ErrNeedsNewer) || !strings.Contains(err.Error(), "rules version 4") {
		t.Errorf("replay without the switch: %v, want it to stop at the plan naming rules 4", err)
	}

	// The projector likewise: without the switch it stops there.
	url := testenv.Postgres(t)
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	runCtx, cancel := context.WithCancel(ctx)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	proj := projections.New(js, db, projections.WithLogger(quiet))
	done := make(chan error, 1)
	go func() { done <- proj.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	// A projector without the switch halts the pool alone at the plan
	// (decision #206), naming the sequence and the version it lacks.
	var seq int64
	var reason string
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := db.QueryRow(ctx, `SELECT seq, reason FROM halted_pools WHERE pool = 'v4'`).Scan(&seq, &reason)
		if err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the projector stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("a projector without the switch did not halt the pool: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if seq != 1 || !strings.Contains(reason, "rules version 4") {
		t.Errorf("a projector without the switch halted the pool at %d: %q, want sequence 1 naming rules version 4", seq, reason)
	}
}
