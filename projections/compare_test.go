package projections

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/pgdump"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cluster-ledger/ledger/domain"
)

// dump returns every row of every table as text (internal/pgdump).
func dump(t testing.TB, db *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pgdump.Tables(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func diffDumps(t testing.TB, want, got []string) {
	t.Helper()
	if d := pgdump.Diff(want, got); d != "" {
		t.Fatalf("tables differ (%d vs %d rows) at %s", len(want), len(got), d)
	}
}

// checkAgainstModel compares the projection with the model's in-memory
// fold, table by table.
func checkAgainstModel(t *testing.T, db *pgxpool.Pool, m *model) {
	t.Helper()
	db = reader(db) // what a reporting tool reads
	for name, dp := range m.pools {
		checkConsumerState(t, db, name, dp)
		checkAllocations(t, db, name, dp)
		checkHosts(t, db, name, dp)
		checkCheckpoint(t, db, name, dp, m.last[name])
		checkAsOf(t, db, name, m.asOf[name])
	}
	checkDecisions(t, db, m.ds)
	checkEvents(t, db, m)
}

func query[T any](t *testing.T, db *pgxpool.Pool, sql string, args ...any) []T {
	t.Helper()
	rows, _ := db.Query(context.Background(), sql, args...)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[T])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

type stateRow struct {
	Path                                                    string
	Leaf                                                    bool
	Demand, Effective, Planned, Target, Allocated, Borrowed int64
	WaitingSince                                            *int64
}

func checkConsumerState(t *testing.T, db *pgxpool.Pool, pool string, dp *domain.Pool) {
	got := query[stateRow](t, db, `SELECT consumer, leaf, demand, effective, planned, target, allocated, borrowed, waiting_since
		FROM consumer_state WHERE pool = $1 ORDER BY consumer`, pool)
	var want []stateRow
	for _, c := range dp.Consumers() {
		var ws *int64
		if c.WaitingSince != 0 {
			w := int64(c.WaitingSince)
			ws = &w
		}
		want = append(want, stateRow{c.Path, c.Leaf, c.Demand, c.Effective, c.Planned, c.Target, c.Allocated, c.Borrowed, ws})
	}
	slices.SortFunc(want, func(a, b stateRow) int { return strings.Compare(a.Path, b.Path) })
	if fmt.Sprint(deref(got)) != fmt.Sprint(deref(want)) {
		t.Fatalf("pool %s consumer_state:\n got %v\nwant %v", pool, deref(got), deref(want))
	}
	type planRow struct {
		Path, Parent    string
		Leaf            bool
		Share, Priority int64
		Max             *string
	}
	plan := query[planRow](t, db, `SELECT path, parent, leaf, share, priority, max FROM consumers WHERE pool = $1 ORDER BY path`, pool)
	cs := dp.Consumers()
	if len(plan) != len(cs) {
		t.Fatalf("pool %s: %d consumers rows, want %d", pool, len(plan), len(cs))
	}
	for i, c := range cs {
		r := plan[i]
		if r.Path != c.Path || r.Parent != c.Parent || r.Leaf != c.Leaf || r.Share != c.Share || r.Priority != c.Priority || (r.Max == nil) != (c.Max == "") {
			t.Fatalf("pool %s consumers row %+v, want %+v", pool, r, c)
		}
	}
}

// deref prints waiting_since values rather than pointers.
func deref(rows []stateRow) []string {
	var out []string
	for _, r := range rows {
		ws := "null"
		if r.WaitingSince != nil {
			ws = fmt.Sprint(*r.WaitingSince)
		}
		out = append(out, fmt.Sprintf("%s leaf=%v d=%d e=%d p=%d t=%d a=%d b=%d ws=%s", r.Path, r.Leaf, r.Demand, r.Effective, r.Planned, r.Target, r.Allocated, r.Borrowed, ws))
	}
	return out
}

func checkAllocations(t *testing.T, db *pgxpool.Pool, pool string, dp *domain.Pool) {
	got := query[domain.Allocation](t, db, `SELECT consumer, host, slots FROM allocations WHERE pool = $1 ORDER BY consumer, host`, pool)
	want := dp.Allocations()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pool %s allocations:\n got %v\nwant %v", pool, got, want)
	}
}

func checkHosts(t *testing.T, db *pgxpool.Pool, pool string, dp *domain.Pool) {
	got := query[domain.HostView](t, db, `SELECT name, grp, slots, up, allocated FROM hosts WHERE pool = $1 ORDER BY name`, pool)
	if want := dp.Hosts(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pool %s hosts:\n got %v\nwant %v", pool, got, want)
	}
}

func checkCheckpoint(t *testing.T, db *pgxpool.Pool, pool string, dp *domain.Pool, last uint64) {
	var seq int64
	var sh, ch []byte
	err := db.QueryRow(context.Background(), `SELECT last_seq, state_hash, chain_hash FROM checkpoints WHERE pool = $1`, pool).Scan(&seq, &sh, &ch)
	if err != nil {
		t.Fatal(err)
	}
	var hash []byte
	if err := db.QueryRow(context.Background(), `SELECT hash FROM events WHERE pool = $1 AND seq = $2`, pool, seq).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	want := dp.StateHash()
	if uint64(seq) != last || string(sh) != string(want[:]) || string(ch) != string(hash) {
		t.Fatalf("pool %s checkpoint: seq %d (want %d), state hash match %v, chain = last event hash %v", pool, seq, last, string(sh) == string(want[:]), string(ch) == string(hash))
	}
}

// checkAsOf asks allocations_as_of for every sequence of the pool.
func checkAsOf(t *testing.T, db *pgxpool.Pool, pool string, asOf map[uint64]map[string]int64) {
	type row struct {
		Consumer string
		Slots    int64
	}
	for seq, want := range asOf {
		got := query[row](t, db, `SELECT consumer, slots FROM allocations_as_of($1, $2)`, pool, int64(seq))
		gotMap := map[string]int64{}
		for _, r := range got {
			gotMap[r.Consumer] = r.Slots
		}
		if fmt.Sprint(gotMap) != fmt.Sprint(want) {
			t.Fatalf("pool %s allocations_as_of(%d):\n got %v\nwant %v", pool, seq, gotMap, want)
		}
	}
}

type decisionRowT struct {
	Seq      int64
	Ordinal  int
	Kind     string
	Consumer string
	From     *string
	Host     string
	Slots    int64
	Rule     string
	Deadline *time.Time
}

func checkDecisions(t *testing.T, db *pgxpool.Pool, ds []domain.Decision) {
	got := query[decisionRowT](t, db, `SELECT event_seq, ordinal, kind, consumer, from_consumer, host, slots, rule, deadline FROM decisions ORDER BY event_seq, ordinal`)
	if len(got) != len(ds) {
		t.Fatalf("%d decisions rows, want %d", len(got), len(ds))
	}
	for i, d := range ds {
		g := got[i]
		from := ""
		if g.From != nil {
			from = *g.From
		}
		deadlineOK := (g.Deadline == nil) == (d.Deadline == nil) && (g.Deadline == nil || g.Deadline.Equal(*d.Deadline))
		if uint64(g.Seq) != d.Seq || g.Ordinal != d.Ordinal || g.Kind != string(d.Kind) || g.Consumer != d.Consumer ||
			from != d.From || g.Host != d.Host || g.Slots != d.Slots || g.Rule != string(d.Rule) || !deadlineOK {
			t.Fatalf("decision %d: got %+v, want %+v", i, g, d)
		}
	}
}

func checkEvents(t *testing.T, db *pgxpool.Pool, m *model) {
	type row struct {
		Seq     int64
		Refused *string
	}
	got := query[row](t, db, `SELECT seq, refused FROM events ORDER BY seq`)
	if len(got) != m.n {
		t.Fatalf("%d events rows, want %d", len(got), m.n)
	}
	for _, r := range got {
		if (r.Refused != nil) != m.refused[uint64(r.Seq)] {
			t.Fatalf("event %d: refused %v, model refused %v", r.Seq, r.Refused, m.refused[uint64(r.Seq)])
		}
	}
}
