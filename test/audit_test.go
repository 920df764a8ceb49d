package test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/pgdump"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/jackc/pgx/v5/pgxpool"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// auditStack publishes every seed and rule scenario into its own pool and
// projects them with a snapshot every 3 events per pool.
func auditStack(t *testing.T) *stack {
	t.Helper()
	s := newStack(t)
	for _, f := range scenarioFiles(t) {
		s.publishScenario(t, f, poolFor(f))
	}
	s.project(t, s.db, projections.WithSnapshotEvery(3))
	return s
}

func TestAudit(t *testing.T) {
	s := auditStack(t)
	ctx := context.Background()
	t.Run("verify from the beginning", func(t *testing.T) {
		rep, err := audit.Verify(ctx, s.js, s.db, nil, 1, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Events == 0 || rep.Pools < 40 {
			t.Fatalf("verified %d events of %d pools; expected every scenario's pool", rep.Events, rep.Pools)
		}
	})
	t.Run("replay from mid offsets reproduces the recorded decisions", func(t *testing.T) {
		testReplayFromOffsets(t, s)
	})
	t.Run("tampering is detected at its sequence", func(t *testing.T) {
		testTampering(t, s)
	})
	t.Run("rebuild into an empty database equals the live projection", func(t *testing.T) {
		rebuilt := newDB(t)
		s.rebuild(t, rebuilt, "rebuild", projections.WithSnapshotEvery(3))
		live, err := pgdump.Tables(ctx, s.db)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgdump.Tables(ctx, rebuilt)
		if err != nil {
			t.Fatal(err)
		}
		if d := pgdump.Diff(live, got); d != "" {
			t.Fatalf("rebuilt projection differs from the live one at %s", d)
		}
	})
}

// testReplayFromOffsets replays one busy pool from several offsets, with
// its snapshots (database given) and without (from the beginning), and
// requires exactly the decisions the projection recorded.
func testReplayFromOffsets(t *testing.T, s *stack) {
	ctx := context.Background()
	pool := poolFor("scenarios/rules/max-lowered-plan.yaml")
	seqs := poolSeqs(t, s.db, pool)
	usedSnapshot := false
	for _, k := range []uint64{seqs[0], seqs[len(seqs)/3], seqs[len(seqs)/2], seqs[len(seqs)-1]} {
		for _, db := range []*pgxpool.Pool{s.db, nil} {
			r := audit.NewReplayer(db, k)
			from, err := r.ReadFrom(ctx, pool)
			if err != nil {
				t.Fatal(err)
			}
			usedSnapshot = usedSnapshot || from > seqs[0]
			got := map[uint64][]domain.Decision{}
			err = audit.ReadLog(ctx, s.js, from, stream.PoolFilter(pool), func(m audit.Message) error {
				ev, ok, err := r.Fold(ctx, m)
				if ok && m.Stored.Seq >= k {
					got[m.Stored.Seq] = ev.Result.Decisions
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			want := recordedDecisions(t, s.db, pool, k)
			if len(got) == 0 || !sameDecisions(got, want) {
				t.Fatalf("replay of %s from %d (snapshots %t): decisions differ from the projection", pool, k, db != nil)
			}
		}
	}
	if !usedSnapshot {
		t.Fatal("no replay started from a snapshot")
	}
}

func poolSeqs(t *testing.T, db *pgxpool.Pool, pool string) []uint64 {
	rows, err := db.Query(context.Background(), `SELECT seq FROM events WHERE pool = $1 ORDER BY seq`, pool)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for rows.Next() {
		var s int64
		_ = rows.Scan(&s)
		out = append(out, uint64(s))
	}
	if len(out) < 6 {
		t.Fatalf("pool %s has %d events; the test needs a longer one", pool, len(out))
	}
	return out
}

func recordedDecisions(t *testing.T, db *pgxpool.Pool, pool string, from uint64) map[uint64][]domain.Decision {
	rows, err := db.Query(context.Background(), `
		SELECT event_seq, ordinal, kind, consumer, coalesce(from_consumer, ''), host, slots, rule, deadline
		FROM decisions WHERE pool = $1 AND event_seq >= $2 ORDER BY event_seq, ordinal`, pool, int64(from))
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64][]domain.Decision{}
	for rows.Next() {
		var d domain.Decision
		var seq int64
		var kind string
		if err := rows.Scan(&seq, &d.Ordinal, &kind, &d.Consumer, &d.From, &d.Host, &d.Slots, &d.Rule, &d.Deadline); err != nil {
			t.Fatal(err)
		}
		d.Seq, d.Kind = uint64(seq), domain.Kind(kind)
		out[d.Seq] = append(out[d.Seq], d)
	}
	return out
}

func sameDecisions(got, want map[uint64][]domain.Decision) bool {
	for seq, ds := range want {
		if !slices.EqualFunc(got[seq], ds, func(a, b domain.Decision) bool {
			a.Deadline, b.Deadline = nil, nil // compared by audit verify; times round-trip through PostgreSQL
			return a == b
		}) {
			return false
		}
	}
	for seq, ds := range got {
		if len(ds) > 0 && len(want[seq]) == 0 {
			return false
		}
	}
	return true
}

// testTampering changes one row at a time and requires audit verify to
// name the sequence of the changed row.
func testTampering(t *testing.T, s *stack) {
	ctx := context.Background()
	pool := poolFor("scenarios/seed/seed-000-priority-reclaim.yaml")
	var reclaimSeq int64
	if err := s.db.QueryRow(ctx, `SELECT event_seq FROM decisions WHERE pool = $1 AND kind = 'reclaim'`, pool).Scan(&reclaimSeq); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, tamper, undo string
	}{
		{"event copy", `UPDATE events SET data = jsonb_set(data, '{demands,/C}', '2') WHERE pool = $1 AND seq = $2`,
			`UPDATE events SET data = jsonb_set(data, '{demands,/C}', '1') WHERE pool = $1 AND seq = $2`},
		{"decision row", `UPDATE decisions SET slots = slots + 1 WHERE pool = $1 AND event_seq = $2`,
			`UPDATE decisions SET slots = slots - 1 WHERE pool = $1 AND event_seq = $2`},
		{"allocation row", `UPDATE allocations SET slots = slots + 1 WHERE pool = $1 AND consumer = '/C' AND $2::bigint > 0`,
			`UPDATE allocations SET slots = slots - 1 WHERE pool = $1 AND consumer = '/C' AND $2::bigint > 0`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			execSQL(t, s.db, c.tamper, pool, reclaimSeq)
			_, err := audit.Verify(ctx, s.js, s.db, nil, 1, pool, nil)
			execSQL(t, s.db, c.undo, pool, reclaimSeq)
			var div *audit.Divergence
			if !errors.As(err, &div) {
				t.Fatalf("tampered %s, verify said %v", c.name, err)
			}
			if div.Seq != uint64(reclaimSeq) {
				t.Fatalf("tampered %s at sequence %d, verify named %d: %v", c.name, reclaimSeq, div.Seq, div)
			}
			if _, err := audit.Verify(ctx, s.js, s.db, nil, 1, pool, nil); err != nil {
				t.Fatalf("after undoing the change verify still fails: %v", err)
			}
		})
	}
}

func execSQL(t *testing.T, db *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	tag, err := db.Exec(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	if tag.RowsAffected() == 0 {
		t.Fatalf("%s changed no row", sql)
	}
}
