package projections

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
	pq "github.com/cluster-ledger/ledger/projections/query"
)

// ownDir holds the scenarios with ownership; own-lend-return.yaml is the
// worked example of docs/rules.md#ownership-example, unchanged.
const ownDir = "../internal/scenario/testdata/ownership/"

// publishOwnScenario publishes a scenario as the ledger would append it,
// a plan that names no rules version stamped with the newest (3, which
// implements ownership).
func (m *model) publishOwnScenario(path, pool string) {
	m.t.Helper()
	s, err := scenario.ParseFile(path)
	if err != nil {
		m.t.Fatal(err)
	}
	for _, ev := range s.Events() {
		m.publish(pool, domain.StampRules(ev.Payload))
	}
}

// ownPlan is a plan with every kind of ownership: a whole host, part of
// a host inside it, N slots of a group, lend: false, lend and reclaim
// graces; and a consumer owning nothing.
func ownPlan() (events.Plan, []string) {
	i := func(n int64) *int64 { return &n }
	no := false
	d := func(s string) *events.Duration {
		v, _ := time.ParseDuration(s)
		return &events.Duration{Duration: v}
	}
	plan := events.Plan{Rules: int(domain.RulesV3), Policy: events.Policy{Reclaim: events.ReclaimShareRatio}, Consumers: []events.Consumer{
		{Path: "/a", Share: i(2), Priority: 1, LendGrace: d("1m"), Own: []events.OwnEntry{{Host: "h0"}}},
		{Path: "/a/x", Share: i(1), LendGrace: d("30s"), Own: []events.OwnEntry{{Host: "h0", Slots: i(2)}}},
		{Path: "/a/y", Share: i(1), ReclaimGrace: d("10s")},
		{Path: "/b", Share: i(1), Priority: 2, Own: []events.OwnEntry{{Group: "g", Slots: i(6), Preference: i(7)}}},
		{Path: "/b/p", Share: i(1)},
		{Path: "/b/q", Share: i(1), Lend: &no, Own: []events.OwnEntry{{Group: "g", Slots: i(2)}}},
		{Path: "/c", Share: i(1)},
	}}
	return plan, []string{"/a/x", "/a/y", "/b/p", "/b/q", "/c"}
}

func ownHosts() []events.Payload {
	return []events.Payload{
		&events.HostUp{Host: "h0", Slots: 4},
		&events.HostUp{Host: "h1", Group: "g", Slots: 4},
		&events.HostUp{Host: "h2", Group: "g", Slots: 4},
		&events.HostUp{Host: "h3", Group: "g", Slots: 4},
		&events.HostUp{Host: "h4", Slots: 4},
	}
}

// randomOwnEvent is randomEvent on the ownership plan: host_up keeps the
// host's group, and a plan change drops one consumer's ownership (which
// the engine refuses when a child still owns), removes a subtree or
// restores the full plan.
func randomOwnEvent(rng *rand.Rand, dp *domain.Pool, plan events.Plan, leaves []string) events.Payload {
	switch r := rng.IntN(100); {
	case r < 5:
		hs := dp.Hosts()
		h := hs[rng.IntN(len(hs))]
		if h.Up {
			return &events.HostDown{Host: h.Name}
		}
		return &events.HostUp{Host: h.Name, Group: h.Group, Slots: h.Slots}
	case r < 9:
		out := plan
		out.Consumers = slices.Clone(plan.Consumers)
		k := rng.IntN(len(out.Consumers))
		out.Consumers[k].Own = nil
		return &events.PlanChange{Plan: out}
	default:
		ev := randomEvent(rng, dp, plan, leaves, len(dp.Hosts()))
		if _, ok := ev.(*events.HostUp); ok {
			return &events.Demand{Demands: map[string]int64{leaves[rng.IntN(len(leaves))]: rng.Int64N(12)}}
		}
		if pc, ok := ev.(*events.PlanChange); ok {
			pc.Plan.Rules = plan.Rules
		}
		return ev
	}
}

// publishOwnership publishes the ownership scenarios (pools spec, gpus,
// private, moved) and n random events on pool rand.
func publishOwnership(m *model, rng *rand.Rand, n int) {
	m.publishOwnScenario(ownDir+"own-lend-return.yaml", "spec")
	m.publishOwnScenario(ownDir+"ml-lends-gpu.yaml", "gpus")
	m.publishOwnScenario(ownDir+"private-pool.yaml", "private")
	m.publishOwnScenario(ownDir+"moved.yaml", "moved")
	plan, leaves := ownPlan()
	m.publish("rand", &events.PlanChange{Plan: plan})
	for _, h := range ownHosts() {
		m.publish("rand", h)
	}
	for range n {
		m.publish("rand", randomOwnEvent(rng, m.pool("rand"), plan, leaves))
	}
}

// TestProjectOwnership projects the ownership worked example
// (docs/rules.md#ownership-example), the other
// ownership scenarios and a random stream with ownership through the
// projector, checks every table against the engine (the ownership
// assignment, consumer_state's ownership columns, ownership_history at
// every sequence and time), the worked example by hand, and that a
// rebuild (one projector from the start, as `ledger replay --into` runs
// it) gives the same tables.
func TestProjectOwnership(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	publishOwnership(m, rand.New(rand.NewPCG(41, 42)), 400)
	project(t, New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(7), WithSnapshotEvery(11)), m)
	checkAgainstModel(t, db, m)
	checkOwnershipAgainstModel(t, db, m)
	checkWorkedExample(t, db, m)

	rebuilt := newDB(t)
	// A rebuild into an empty database, as `ledger replay --into` runs it:
	// up to the log's end, with the auditor's identity (no consumer).
	if err := New(testenv.As(t, js, natsauth.Auditor), rebuilt, WithLogger(quietLog()), WithName("rebuild-ownership"), WithBatchSize(1000),
		WithSnapshotEvery(11), WithUntil(m.lastSeq)).Run(context.Background()); err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	diffDumps(t, dump(t, db), dump(t, rebuilt))
}

// TestOwnershipCrashResume crashes the projector mid-stream, resumes it
// (from snapshots with ownership, the open ownership_history rows read
// back) and compares with an uninterrupted projection.
func TestOwnershipCrashResume(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	m := newModel(t, js)
	publishOwnership(m, rand.New(rand.NewPCG(43, 44)), 300)
	for _, stage := range []string{StageBeforeCommit, StageAfterCommitBeforeAck} {
		t.Run(stage, func(t *testing.T) {
			db := newDB(t)
			var calls atomic.Int32
			boom := errors.New("simulated crash")
			fp := func(s string) error {
				if s == stage && calls.Add(1) == 20 {
					return boom
				}
				return nil
			}
			r := start(New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(5), WithSnapshotEvery(9), WithFailpoint(fp)))
			if err := <-r.done; !errors.Is(err, boom) {
				t.Fatalf("Run with failpoint: %v, want the simulated crash", err)
			}
			r.cancel()
			project(t, New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(13), WithSnapshotEvery(9)), m)
			ref := newDB(t)
			project(t, New(asProjector(t, js), ref, WithLogger(quietLog()), WithBatchSize(1000), WithSnapshotEvery(9)), m)
			diffDumps(t, dump(t, ref), dump(t, db))
			checkOwnershipAgainstModel(t, db, m)
		})
	}
}

// TestOwnershipColumnsAfterEveryEvent checks consumer_state's ownership
// columns after every event of a random stream: a decision on a host can
// change the figures of consumers the event did not touch (slots shifting
// between the parts of the host), which the final state alone would not
// show once a later plan or host event rewrote every row.
func TestOwnershipColumnsAfterEveryEvent(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(45, 46))
	plan, leaves := ownPlan()
	m.publish("rand", &events.PlanChange{Plan: plan})
	for _, h := range ownHosts() {
		m.publish("rand", h)
	}
	r := start(New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(3), WithSnapshotEvery(7)))
	for range 250 {
		m.publish("rand", randomOwnEvent(rng, m.pool("rand"), plan, leaves))
		if err := r.waitFor(t, m); err != nil {
			t.Fatal(err)
		}
		checkOwnColumns(t, db, "rand", m.pools["rand"])
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	checkOwnershipAgainstModel(t, db, m)
}

// checkOwnershipAgainstModel compares the ownership tables and columns
// with the model's fold.
func checkOwnershipAgainstModel(t *testing.T, db *pgxpool.Pool, m *model) {
	t.Helper()
	db = reader(db) // what a reporting tool reads
	ctx := context.Background()
	for name, dp := range m.pools {
		got, err := pq.Ownership(ctx, db, name)
		if err != nil {
			t.Fatal(err)
		}
		want := dp.Ownership()
		if fmt.Sprint(ownedRows(got)) != fmt.Sprint(want) {
			t.Fatalf("pool %s ownership:\n got %v\nwant %v", name, got, want)
		}
		checkOwnColumns(t, db, name, dp)
		checkOwnHistory(t, db, name, m)
	}
}

// checkOwnColumns compares consumer_state's ownership columns with the
// engine's views.
func checkOwnColumns(t *testing.T, db *pgxpool.Pool, name string, dp *domain.Pool) {
	t.Helper()
	cols, err := pq.ConsumerOwnerships(context.Background(), db, name)
	if err != nil {
		t.Fatal(err)
	}
	views := dp.Consumers()
	if len(cols) != len(views) {
		t.Fatalf("pool %s: %d consumer_state rows, want %d", name, len(cols), len(views))
	}
	for i, v := range views {
		c := cols[i]
		var src []domain.Source
		if c.Sources != nil {
			if err := json.Unmarshal(c.Sources, &src); err != nil {
				t.Fatal(err)
			}
			if src == nil {
				src = []domain.Source{}
			}
		}
		if c.Path != v.Path || c.Owned != v.Owned || c.OwnUsed != v.OwnUsed || c.LentOut != v.LentOut ||
			(src == nil) != (v.Sources == nil) || fmt.Sprint(src) != fmt.Sprint(v.Sources) {
			t.Fatalf("pool %s consumer_state ownership of %s (seq %d): got %+v (sources %s), want owned %d used %d lent %d sources %v",
				name, v.Path, dp.Seq(), c, c.Sources, v.Owned, v.OwnUsed, v.LentOut, v.Sources)
		}
	}
}

func ownedRows(rows []pq.Owned) []domain.OwnedSlots {
	var out []domain.OwnedSlots
	for _, r := range rows {
		out = append(out, domain.OwnedSlots{Consumer: r.Consumer, Host: r.Host, Slots: r.Slots})
	}
	return out
}

// checkOwnHistory asks ownership_history for the assignment after every
// sequence of the pool, by sequence and by time.
func checkOwnHistory(t *testing.T, db *pgxpool.Pool, pool string, m *model) {
	t.Helper()
	type row struct {
		Consumer, Host string
		Slots          int64
	}
	for seq, want := range m.ownAsOf[pool] {
		got := query[row](t, db, `SELECT consumer, host, slots FROM ownership_history
			WHERE pool = $1 AND valid_from_seq <= $2 AND (valid_to_seq IS NULL OR valid_to_seq > $2)
			ORDER BY consumer, host`, pool, int64(seq))
		var gotRows []domain.OwnedSlots
		for _, r := range got {
			gotRows = append(gotRows, domain.OwnedSlots{Consumer: r.Consumer, Host: r.Host, Slots: r.Slots})
		}
		if fmt.Sprint(gotRows) != fmt.Sprint(want) {
			t.Fatalf("pool %s ownership_history as of %d:\n got %v\nwant %v", pool, seq, gotRows, want)
		}
		// By time (README's "who owned host X at time T"): every event
		// is one second after the previous one.
		for _, h := range hostsOf(want) {
			owners, err := pq.OwnersAt(context.Background(), db, pool, h, m.times[seq])
			if err != nil {
				t.Fatal(err)
			}
			var wantH []domain.OwnedSlots
			for _, o := range want {
				if o.Host == h {
					wantH = append(wantH, o)
				}
			}
			if fmt.Sprint(ownedRows(owners)) != fmt.Sprint(wantH) {
				t.Fatalf("pool %s: owners of %s at %s: got %v, want %v", pool, h, m.times[seq], owners, wantH)
			}
		}
	}
}

func hostsOf(rows []domain.OwnedSlots) []string {
	var hs []string
	for _, r := range rows {
		if !slices.Contains(hs, r.Host) {
			hs = append(hs, r.Host)
		}
	}
	slices.Sort(hs)
	return hs
}

// poolSeqs lists a pool's sequences in order.
func (m *model) poolSeqs(pool string) []uint64 {
	var seqs []uint64
	for seq := range m.ownAsOf[pool] {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	return seqs
}

// checkWorkedExample checks the projection of the ownership worked example
// (own-lend-return.yaml, pool spec) by hand: /A owns h1, /B owns h2; /A
// asks for 12 and uses h1, borrows /B's idle h2 (lend) and the public h3;
// /B asks for 4 and takes h2 back (return); /B asks for 8 and reclaims a
// public slot.
func checkWorkedExample(t *testing.T, db *pgxpool.Pool, m *model) {
	t.Helper()
	ctx := context.Background()
	seqs := m.poolSeqs("spec") // plan, h1, h2, h3 up, then the three demands
	if len(seqs) != 7 {
		t.Fatalf("pool spec has %d events, want 7", len(seqs))
	}
	own, err := pq.Ownership(ctx, db, "spec")
	if err != nil {
		t.Fatal(err)
	}
	if want := []pq.Owned{{Consumer: "/A", Host: "h1", Slots: 4}, {Consumer: "/B", Host: "h2", Slots: 4}}; fmt.Sprint(own) != fmt.Sprint(want) {
		t.Fatalf("ownership of pool spec = %v, want %v", own, want)
	}
	type stateRow struct {
		Consumer                  string
		Allocated, Owned, OwnUsed int64
		LentOut                   int64
		Sources                   string
	}
	st := query[stateRow](t, db, `SELECT consumer, allocated, owned, own_used, lent_out, sources::text
		FROM consumer_state WHERE pool = 'spec' ORDER BY consumer`)
	want := []stateRow{
		{"/A", 7, 4, 4, 0, `[{"pool": "/", "slots": 3}, {"pool": "own", "slots": 4}]`},
		{"/B", 5, 4, 4, 0, `[{"pool": "/", "slots": 1}, {"pool": "own", "slots": 4}]`},
	}
	if fmt.Sprint(st) != fmt.Sprint(want) {
		t.Fatalf("consumer_state of pool spec:\n got %v\nwant %v", st, want)
	}
	type histRow struct {
		Consumer, Host string
		Slots          int64
		From           int64
		To             *int64
	}
	hist := query[histRow](t, db, `SELECT consumer, host, slots, valid_from_seq, valid_to_seq
		FROM ownership_history WHERE pool = 'spec' ORDER BY consumer, host, valid_from_seq`)
	if len(hist) != 2 || hist[0] != (histRow{"/A", "h1", 4, int64(seqs[1]), nil}) || hist[1] != (histRow{"/B", "h2", 4, int64(seqs[2]), nil}) {
		t.Fatalf("ownership_history of pool spec = %+v; want /A h1 4 from %d and /B h2 4 from %d, both open", hist, seqs[1], seqs[2])
	}
	// "Who owned h2" just before and just after it came up.
	for _, c := range []struct {
		at   time.Time
		want string
	}{{m.times[seqs[1]], "[]"}, {m.times[seqs[2]], "[{/B h2 4}]"}, {m.times[seqs[6]].Add(time.Hour), "[{/B h2 4}]"}} {
		got, err := pq.OwnersAt(ctx, db, "spec", "h2", c.at)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != c.want {
			t.Errorf("owners of h2 at %s = %v, want %s", c.at, got, c.want)
		}
	}
	// The decisions that lent /B's slots and took them back.
	type decRow struct {
		Seq            int64
		Kind, Consumer string
		From           *string
		Host           string
		Slots          int64
		Rule           string
	}
	ds := query[decRow](t, db, `SELECT event_seq, kind, consumer, from_consumer, host, slots, rule FROM decisions
		WHERE pool = 'spec' AND kind IN ('lend', 'return', 'own') ORDER BY event_seq, ordinal`)
	var got []string
	for _, d := range ds {
		from := ""
		if d.From != nil {
			from = " from " + *d.From
		}
		got = append(got, fmt.Sprintf("%d %s %s%s %s %d %s", d.Seq, d.Kind, d.Consumer, from, d.Host, d.Slots, d.Rule))
	}
	wantDs := []string{
		fmt.Sprintf("%d own /A h1 4 own.assign", seqs[1]),
		fmt.Sprintf("%d own /B h2 4 own.assign", seqs[2]),
		fmt.Sprintf("%d lend /A from /B h2 4 share_ratio.grant", seqs[4]),
		fmt.Sprintf("%d return /B from /A h2 4 own.return", seqs[5]),
	}
	if strings.Join(got, "\n") != strings.Join(wantDs, "\n") {
		t.Fatalf("ownership decisions of pool spec:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantDs, "\n"))
	}
}

// TestLendingReport runs README's reporting queries on a real
// projection: idle owned slots lent out, by owner, per day; what each
// owner lends now; who owned a host at a time.
func TestLendingReport(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	roles, db := newRoleDB(t)
	reporting := testdb.Pool(t, roles.Reporting) // the DATABASE_URL `ledger dev` prints
	m := newModel(t, js)
	m.publishOwnScenario(ownDir+"own-lend-return.yaml", "spec")
	m.publishOwnScenario(ownDir+"ml-lends-gpu.yaml", "gpus")
	m.clock = m.clock.Add(36 * time.Hour) // the next day (UTC)
	m.publish("gpus", &events.Demand{Demands: map[string]int64{"/web": 0}})
	m.publish("gpus", &events.Demand{Demands: map[string]int64{"/web": 10}})
	project(t, New(asProjector(t, js), db, WithLogger(quietLog())), m)
	ctx := context.Background()

	report := func(pool string) string {
		rows, err := pq.LendingByOwnerPerDay(ctx, reporting, pool)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, r := range rows {
			lines = append(lines, fmt.Sprintf("%s %s lent %d in %d, taken back %d", r.Day.Format(time.DateOnly), r.Owner, r.Lent, r.Lends, r.TakenBack))
		}
		return strings.Join(lines, "\n")
	}
	if got, want := report("spec"), "2026-01-01 /B lent 4 in 1, taken back 4"; got != want {
		t.Errorf("lending report of pool spec:\n%s\nwant\n%s", got, want)
	}
	// gpus: the same report computed from the engine's decisions. Day 1:
	// /web borrows 6 of /ml's gpu-07 and /ops's gpu-09; /ml takes its 6
	// back. Day 2: /web gives everything back and asks again, borrowing
	// /ops's idle gpu-09 again (/ml owns nothing any more).
	got := report("gpus")
	if want := lendingFromModel(m, "gpus"); got != want {
		t.Errorf("lending report of pool gpus:\n%s\nwant (from the engine's decisions)\n%s", got, want)
	}
	if !strings.HasPrefix(got, "2026-01-01 /ml lent 6 in 1, taken back 6\n2026-01-01 /ops lent ") {
		t.Errorf("lending report of pool gpus:\n%s\nwant /ml's 6 lent and taken back, and /ops's lent, on 2026-01-01", got)
	}
	if !strings.Contains(got, "\n2026-01-02 /ops lent 2 in 1, taken back 0") {
		t.Errorf("lending report of pool gpus:\n%s\nwant /ops's 2 lent again on 2026-01-02", got)
	}
	t.Logf("lending report of pool gpus:\n%s", got)

	// What each owner lends out now (README): consumer_state.
	type nowRow struct {
		Consumer                string
		Owned, OwnUsed, LentOut int64
	}
	now := query[nowRow](t, db, `SELECT consumer, owned, own_used, lent_out FROM consumer_state
		WHERE pool = 'gpus' AND owned > 0 ORDER BY lent_out DESC, consumer`)
	dp := m.pools["gpus"]
	var wantNow []nowRow
	for _, c := range dp.Consumers() {
		if c.Owned > 0 {
			wantNow = append(wantNow, nowRow{c.Path, c.Owned, c.OwnUsed, c.LentOut})
		}
	}
	slices.SortFunc(wantNow, func(a, b nowRow) int {
		if a.LentOut != b.LentOut {
			return int(b.LentOut - a.LentOut)
		}
		return strings.Compare(a.Consumer, b.Consumer)
	})
	if fmt.Sprint(now) != fmt.Sprint(wantNow) || len(now) == 0 {
		t.Errorf("owners now: got %v, want %v", now, wantNow)
	}

	// README's queries, as printed there, on pool gpus: the same answers.
	type lendRow struct {
		Day             time.Time
		Owner           string
		Lent, Lends, Tb int64
	}
	readmeLend := query[lendRow](t, reporting, readmeSQL(t, "Idle owned slots lent out, by owner, per day", "gpus"))
	viaQuery, err := pq.LendingByOwnerPerDay(ctx, db, "gpus")
	if err != nil {
		t.Fatal(err)
	}
	if len(readmeLend) != len(viaQuery) || len(readmeLend) == 0 {
		t.Fatalf("README's lending report: %v, query.LendingByOwnerPerDay: %v", readmeLend, viaQuery)
	}
	for i, r := range readmeLend {
		if v := viaQuery[i]; !r.Day.Equal(v.Day) || r.Owner != v.Owner || r.Lent != v.Lent || r.Lends != v.Lends || r.Tb != v.TakenBack {
			t.Errorf("README's lending report row %d: %+v, query.LendingByOwnerPerDay %+v", i, r, v)
		}
	}
	if got := query[nowRow](t, reporting, readmeSQL(t, "What each owner lends out now", "gpus")); fmt.Sprint(got) != fmt.Sprint(now) {
		t.Errorf("README's owners now: %v, want %v", got, now)
	}
	// "Who owned gpu-07 at 10:00": after the first step's time /ml does;
	// README's time is replaced by one in the scenario's day.
	type ownerRow struct {
		Consumer string
		Slots    int64
	}
	firstDemand := m.times[m.poolSeqs("gpus")[4]].Format("2006-01-02 15:04:05.999999-07")
	who := strings.ReplaceAll(readmeSQL(t, "Who owned host `gpu-07` at 10:00", "gpus"), "date_trunc('day', now()) + interval '10 hours'", "'"+firstDemand+"'")
	if got := query[ownerRow](t, reporting, who); fmt.Sprint(got) != "[{/ml 8}]" {
		t.Errorf("README's who owned gpu-07: %v, want [{/ml 8}]", got)
	}
}

// lendingFromModel is the lending report of pool computed from the
// model's decisions.
func lendingFromModel(m *model, pool string) string {
	type key struct{ day, owner string }
	type sums struct{ lent, lends, back int64 }
	by := map[key]*sums{}
	for _, d := range m.ds {
		if _, ok := m.ownAsOf[pool][d.Seq]; !ok || (d.Kind != domain.KindLend && d.Kind != domain.KindReturn) {
			continue
		}
		k := key{m.times[d.Seq].UTC().Format(time.DateOnly), d.Consumer}
		if d.Kind == domain.KindLend {
			k.owner = d.From
		}
		if by[k] == nil {
			by[k] = &sums{}
		}
		if d.Kind == domain.KindLend {
			by[k].lent += d.Slots
			by[k].lends++
		} else {
			by[k].back += d.Slots
		}
	}
	keys := slices.SortedFunc(maps.Keys(by), func(a, b key) int {
		return cmp.Or(strings.Compare(a.day, b.day), strings.Compare(a.owner, b.owner))
	})
	var lines []string
	for _, k := range keys {
		v := by[k]
		lines = append(lines, fmt.Sprintf("%s %s lent %d in %d, taken back %d", k.day, k.owner, v.lent, v.lends, v.back))
	}
	return strings.Join(lines, "\n")
}

// readmeSQL returns the first SQL block of README.md after the line
// starting with title, for pool instead of demo.
func readmeSQL(t *testing.T, title, pool string) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+title)
	if i < 0 {
		t.Fatalf("README.md has no %q", title)
	}
	start := strings.Index(s[i:], "```sql\n")
	end := strings.Index(s[i+start+7:], "```")
	if start < 0 || end < 0 {
		t.Fatalf("README.md has no SQL after %q", title)
	}
	return strings.ReplaceAll(s[i+start+7:i+start+7+end], "'demo'", "'"+pool+"'")
}

// benchOwnStream is benchStream's pool with ownership: each of the 10
// top-level consumers owns 200 slots of group default, each of their
// children 12 of them, and every third leaf 3 of its parent's (a third
// of the consumers own slots).
func benchOwnStream(n int) (subjects []string, bodies [][]byte) {
	i := func(v int64) *int64 { return &v }
	plan, leaves := treePlan(events.ReclaimShareRatio, 10, 10, 10)
	plan.Rules = int(domain.RulesV3)
	for k := range plan.Consumers {
		c := &plan.Consumers[k]
		switch strings.Count(c.Path, "/") {
		case 1:
			c.Own = []events.OwnEntry{{Group: "default", Slots: i(200)}}
		case 2:
			c.Own = []events.OwnEntry{{Group: "default", Slots: i(12)}}
		default:
			if k%3 == 0 {
				c.Own = []events.OwnEntry{{Group: "default", Slots: i(3)}}
			}
		}
	}
	subjects, bodies, refused := benchStreamOf(plan, leaves, n)
	if refused > 0 {
		panic(fmt.Sprintf("%d events of the ownership benchmark stream refused", refused))
	}
	return subjects, bodies
}

// BenchmarkProjectOwnership is BenchmarkProject on a pool with ownership
// (benchOwnStream): events projected per second, the engine's fold
// included.
func BenchmarkProjectOwnership(b *testing.B) {
	n := max(b.N, 100)
	subjects, bodies := benchOwnStream(n)
	projectBacklog(b, n, subjects, bodies, func(js jetstream.JetStream, db *pgxpool.Pool) *Projector { return New(js, db, WithLogger(quietLog())) })
}
