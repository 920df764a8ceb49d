package query_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/migrations"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The three handles callers hold all answer queries.
var (
	_ query.Querier    = (*pgxpool.Pool)(nil)
	_ query.Querier    = (pgx.Tx)(nil)
	_ query.Querier    = (*pgx.Conn)(nil)
	_ query.TxBeginner = (*pgxpool.Pool)(nil)
	_ query.TxBeginner = (*pgx.Conn)(nil)
)

const seedFile = "../../test/scenarios/seed/seed-001-share-ratio-subconsumers.yaml"

// projected is a database holding the real projector's rows of the seed
// scenario, published to pool "seed".
type projected struct {
	db   *pgxpool.Pool
	url  string
	last uint64 // last stream sequence
}

// TestReads projects the seed scenario once (the tests only read) and asks
// every question of it.
func TestReads(t *testing.T) {
	p := project(t)
	for _, c := range []struct {
		name string
		f    func(*testing.T, *projected)
	}{
		{"PoolAllocationsInOneSnapshot", testPoolAllocationsInOneSnapshot},
		{"ThroughAConnection", testReadsThroughAConnection},
		{"Checkpoints", testCheckpoints},
		{"OffsetsAndEmptiness", testOffsetsAndEmptiness},
		{"DecisionPages", testDecisionPages},
		{"EventsAndDecisionsAt", testEventsAndDecisionsAt},
		{"SnapshotBefore", testSnapshotBefore},
		{"AppliedIDs", testAppliedIDs},
		{"AllocationsAsOf", testAllocationsAsOf},
		{"SecondaryIndexesAndDump", testSecondaryIndexesAndDump},
		{"PoolsNowAndAsOf", testPoolsNowAndAsOf},
		{"HistoryQuestions", testHistoryQuestions},
		{"TimelineAndDecisionAt", testTimelineAndDecisionAt},
	} {
		t.Run(c.name, func(t *testing.T) { c.f(t, p) })
	}
}

// project publishes the seed scenario and runs the projector (a snapshot
// after every event) until it has committed the last sequence.
func project(t *testing.T) *projected {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := testenv.Postgres(t)
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	js := testenv.JetStream(t, testenv.NATS(t))
	last := publishSeed(t, js)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- projections.New(js, db, projections.WithSnapshotEvery(1),
			projections.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))).Run(runCtx)
	}()
	for {
		seq, err := query.ProjectorOffset(ctx, db, projections.DefaultName)
		if err != nil {
			t.Fatal(err)
		}
		if seq >= last {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("projector stopped: %v", err)
		case <-ctx.Done():
			t.Fatalf("projector reached %d of %d", seq, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	<-done
	t.Cleanup(db.Close)
	return &projected{db: db, url: url, last: last}
}

func publishSeed(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	s, err := scenario.ParseFile(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	var payloads []events.Payload
	for _, ev := range s.Events() {
		payloads = append(payloads, ev.Payload)
	}
	// Last, one the engine refuses: it changes nothing but is recorded.
	payloads = append(payloads, &events.Demand{Demands: map[string]int64{"/nobody": 1}})
	var last uint64
	for i, p := range payloads {
		env, err := events.New(fmt.Sprintf("e%d", i), "seed", "test", scenario.Epoch.Add(time.Duration(i)*time.Second), p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(env)
		ack, err := js.Publish(context.Background(), stream.Subject("seed", p.EventType()), b, jetstream.WithMsgID(env.ID))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	return last
}

// The seed scenario's last step: B1 25, B2 75 (A has no demand).
var seedAllocated = map[string]int64{"/A": 0, "/B": 100, "/B/B1": 25, "/B/B2": 75}

func testPoolAllocationsInOneSnapshot(t *testing.T, p *projected) {
	ctx := context.Background()
	var a query.Allocations
	err := query.ReadOnly(ctx, p.db, func(q query.Querier) (err error) {
		a, err = query.PoolAllocations(ctx, q, "seed")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.Pool != "seed" || a.Seq != p.last {
		t.Fatalf("pool %q seq %d, want seed %d", a.Pool, a.Seq, p.last)
	}
	got := map[string]int64{}
	var paths []string
	for _, c := range a.Consumers {
		got[c.Path] = c.Allocated
		paths = append(paths, c.Path)
	}
	if fmt.Sprint(got) != fmt.Sprint(seedAllocated) || !slices.IsSorted(paths) {
		t.Fatalf("consumers %v (order %v), want %v", got, paths, seedAllocated)
	}
	perLeaf := map[string]int64{}
	for _, h := range a.Hosts {
		perLeaf[h.Consumer] += h.Slots
	}
	if perLeaf["/B/B1"] != 25 || perLeaf["/B/B2"] != 75 || len(perLeaf) != 2 {
		t.Fatalf("host allocations per leaf %v, want B1 25 and B2 75", perLeaf)
	}
}

func testReadsThroughAConnection(t *testing.T, p *projected) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, p.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	states, err := query.ConsumerStates(ctx, conn, "seed")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range states {
		if c.Allocated != seedAllocated[c.Path] {
			t.Fatalf("%s allocated %d, want %d", c.Path, c.Allocated, seedAllocated[c.Path])
		}
	}
	if len(states) != len(seedAllocated) {
		t.Fatalf("%d consumer_state rows, want %d", len(states), len(seedAllocated))
	}
}

func testCheckpoints(t *testing.T, p *projected) {
	ctx := context.Background()
	cp, err := query.CheckpointOf(ctx, p.db, "seed")
	if err != nil {
		t.Fatal(err)
	}
	if cp.LastSeq != p.last || len(cp.StateHash) != 32 || len(cp.ChainHash) != 32 {
		t.Fatalf("checkpoint %+v, want seq %d and two 32-byte hashes", cp, p.last)
	}
	// The seed's plan (the first event) names no rules: version 1.
	if cp.Rules != 1 || cp.RulesSince != 1 {
		t.Fatalf("checkpoint under rules %d since %d, want 1 since 1", cp.Rules, cp.RulesSince)
	}
	if _, err := query.CheckpointOf(ctx, p.db, "nowhere"); !errors.Is(err, query.ErrNoCheckpoint) {
		t.Fatalf("checkpoint of an unknown pool: %v, want ErrNoCheckpoint", err)
	}
	if seq, err := query.ProjectedSeq(ctx, p.db, "nowhere"); err != nil || seq != 0 {
		t.Fatalf("ProjectedSeq of an unknown pool: %d, %v; want 0", seq, err)
	}
	seqs, err := query.ProjectedSeqs(ctx, p.db, []string{"seed", "nowhere"})
	if err != nil || len(seqs) != 1 || seqs["seed"] != p.last {
		t.Fatalf("ProjectedSeqs: %v, %v; want only seed at %d", seqs, err, p.last)
	}
	pools, err := query.Pools(ctx, p.db)
	if err != nil || !slices.Equal(pools, []string{"seed"}) {
		t.Fatalf("Pools: %v, %v", pools, err)
	}
}

func testOffsetsAndEmptiness(t *testing.T, p *projected) {
	ctx := context.Background()
	for name, want := range map[string]uint64{"": p.last, projections.DefaultName: p.last, "someone-else": 0} {
		if got, err := query.ProjectorOffset(ctx, p.db, name); err != nil || got != want {
			t.Errorf("ProjectorOffset(%q) = %d, %v; want %d", name, got, err, want)
		}
	}
	if held, err := query.HoldsProjection(ctx, p.db); err != nil || !held {
		t.Errorf("HoldsProjection on a projected database: %v, %v", held, err)
	}
	empty := testenv.Postgres(t)
	if err := migrations.Up(ctx, empty); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, empty)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if held, err := query.HoldsProjection(ctx, conn); err != nil || held {
		t.Errorf("HoldsProjection on an empty database: %v, %v", held, err)
	}
}

// allDecisions is every decision of the seed pool, in order.
func allDecisions(t *testing.T, p *projected) []query.Decision {
	t.Helper()
	all, err := query.DecisionsBetween(context.Background(), p.db, "seed", 0, p.last)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 3 {
		t.Fatalf("only %d decisions: the seed scenario makes more", len(all))
	}
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		if b.EventSeq < a.EventSeq || b.EventSeq == a.EventSeq && b.Ordinal <= a.Ordinal {
			t.Fatalf("decisions out of order at %d: %+v then %+v", i, a, b)
		}
	}
	n, err := query.DecisionCount(context.Background(), p.db)
	if err != nil || n != int64(len(all)) {
		t.Fatalf("DecisionCount %d, %v; want %d", n, err, len(all))
	}
	return all
}

// TestDecisionPages reads every page size: the pages put together are
// all the decisions, and no page ends inside an event.
func testDecisionPages(t *testing.T, p *projected) {
	ctx := context.Background()
	all := allDecisions(t, p)
	for limit := 1; limit <= len(all)+1; limit++ {
		var got []query.Decision
		from := uint64(0)
		for pages := 0; ; pages++ {
			if pages > len(all)+1 {
				t.Fatalf("limit %d: paging does not end", limit)
			}
			page, err := query.DecisionsFrom(ctx, p.db, "seed", from, limit)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page.Decisions...)
			if page.NextFromSeq == nil {
				break
			}
			if n := len(page.Decisions); n == 0 || page.Decisions[n-1].EventSeq >= *page.NextFromSeq {
				t.Fatalf("limit %d: page %+v ends inside an event or resumes behind it (next %d)", limit, page.Decisions, *page.NextFromSeq)
			}
			from = *page.NextFromSeq
		}
		if fmt.Sprint(got) != fmt.Sprint(all) {
			t.Fatalf("limit %d: pages give\n%v\nwant\n%v", limit, got, all)
		}
	}
	first := all[0].EventSeq
	of, err := query.DecisionsOf(ctx, p.db, "seed", first)
	if err != nil {
		t.Fatal(err)
	}
	var want []query.Decision
	for _, d := range all {
		if d.EventSeq == first {
			want = append(want, d)
		}
	}
	if fmt.Sprint(of) != fmt.Sprint(want) {
		t.Fatalf("DecisionsOf(%d) = %v, want %v", first, of, want)
	}
}

// TestEventsAndDecisionsAt reads back the whole log by key: one row per
// event, each linked to the previous one's hash, and the decisions
// grouped per event as DecisionsBetween gives them.
func testEventsAndDecisionsAt(t *testing.T, p *projected) {
	ctx := context.Background()
	var keys []query.Key
	for seq := uint64(1); seq <= p.last; seq++ {
		keys = append(keys, query.Key{Pool: "seed", Seq: seq})
	}
	keys = append(keys, query.Key{Pool: "nowhere", Seq: 1})
	evs, err := query.EventsAt(ctx, p.db, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != int(p.last) {
		t.Fatalf("%d events rows, want %d", len(evs), p.last)
	}
	for seq := uint64(2); seq <= p.last; seq++ {
		prev, cur := evs[query.Key{Pool: "seed", Seq: seq - 1}], evs[query.Key{Pool: "seed", Seq: seq}]
		if string(cur.PrevHash) != string(prev.Hash) || cur.ID != fmt.Sprintf("e%d", seq-1) || !json.Valid(cur.Data) {
			t.Fatalf("event %d: id %s, prev_hash %x after hash %x, data %s", seq, cur.ID, cur.PrevHash, prev.Hash, cur.Data)
		}
	}
	refused := evs[query.Key{Pool: "seed", Seq: p.last}]
	if refused.Refused == nil || *refused.Refused != "unknown_consumer" || refused.RefusalDetail == nil || *refused.RefusalDetail == "" {
		t.Fatalf("the refused event reads as code %v, detail %v", refused.Refused, refused.RefusalDetail)
	}
	if first := evs[query.Key{Pool: "seed", Seq: 1}]; first.Refused != nil || first.RefusalDetail != nil || first.Type != "plan" {
		t.Fatalf("the plan reads as type %s, refused %v", first.Type, first.Refused)
	}
	byEvent, err := query.DecisionsAt(ctx, p.db, keys)
	if err != nil {
		t.Fatal(err)
	}
	var flat []query.Decision
	for seq := uint64(1); seq <= p.last; seq++ {
		flat = append(flat, byEvent[query.Key{Pool: "seed", Seq: seq}]...)
	}
	if all := allDecisions(t, p); fmt.Sprint(flat) != fmt.Sprint(all) {
		t.Fatalf("DecisionsAt gives\n%v\nwant\n%v", flat, all)
	}
}

func testSnapshotBefore(t *testing.T, p *projected) {
	ctx := context.Background()
	if _, ok, err := query.SnapshotBefore(ctx, p.db, "seed", 1); err != nil || ok {
		t.Fatalf("a snapshot before the first event: %v, %v", ok, err)
	}
	s, ok, err := query.SnapshotBefore(ctx, p.db, "seed", p.last)
	if err != nil || !ok {
		t.Fatalf("no snapshot before %d: %v", p.last, err)
	}
	evs, err := query.EventsAt(ctx, p.db, []query.Key{{Pool: "seed", Seq: s.Seq}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Seq != p.last-1 || len(s.State) == 0 || string(s.ChainHash) != string(evs[query.Key{Pool: "seed", Seq: s.Seq}].Hash) {
		t.Fatalf("snapshot at %d (want %d), %d bytes, link %x", s.Seq, p.last-1, len(s.State), s.ChainHash)
	}
}

// testAppliedIDs: the ids of the events applied up to a sequence, every
// one of them and nothing after it.
func testAppliedIDs(t *testing.T, p *projected) {
	ctx := context.Background()
	all, err := query.AppliedIDs(ctx, p.db, "seed", p.last)
	if err != nil {
		t.Fatal(err)
	}
	var keys []query.Key
	for seq := uint64(1); seq <= p.last; seq++ {
		keys = append(keys, query.Key{Pool: "seed", Seq: seq})
	}
	evs, err := query.EventsAt(ctx, p.db, keys)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, k := range keys {
		if e, ok := evs[k]; ok && e.Refused == nil {
			want = append(want, e.ID)
		}
	}
	slices.Sort(all)
	slices.Sort(want)
	if len(want) == 0 || !slices.Equal(all, want) {
		t.Fatalf("applied ids up to %d: %v, want %v", p.last, all, want)
	}
	if first, err := query.AppliedIDs(ctx, p.db, "seed", 1); err != nil || len(first) != 1 || first[0] != evs[keys[0]].ID {
		t.Fatalf("applied ids up to 1: %v, %v; want [%s]", first, err, evs[keys[0]].ID)
	}
	if none, err := query.AppliedIDs(ctx, p.db, "no-such-pool", p.last); err != nil || len(none) != 0 {
		t.Fatalf("applied ids of an unknown pool: %v, %v", none, err)
	}
}

func testAllocationsAsOf(t *testing.T, p *projected) {
	ctx := context.Background()
	want := map[string]int64{}
	for c, n := range seedAllocated {
		if n != 0 { // a consumer holding nothing is not listed
			want[c] = n
		}
	}
	now, err := query.AllocationsAsOf(ctx, p.db, "seed", p.last)
	if err != nil {
		t.Fatal(err)
	}
	later, err := query.AllocationsAsOfTime(ctx, p.db, "seed", scenario.Epoch.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range [][]query.ConsumerSlots{now, later} {
		m := map[string]int64{}
		for _, c := range got {
			m[c.Consumer] = c.Slots
		}
		if fmt.Sprint(m) != fmt.Sprint(want) {
			t.Fatalf("allocations as of the end: %v, want %v", m, want)
		}
	}
	before, err := query.AllocationsAsOfTime(ctx, p.db, "seed", scenario.Epoch.Add(-time.Second))
	if err != nil || len(before) != 0 {
		t.Fatalf("allocations before the first event: %v, %v", before, err)
	}
}

func testSecondaryIndexesAndDump(t *testing.T, p *projected) {
	ctx := context.Background()
	ixs, err := query.SecondaryIndexes(ctx, p.db)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ix := range ixs {
		names = append(names, ix.Name)
		if !strings.HasPrefix(ix.Definition, "CREATE INDEX "+ix.Name+" ON ") {
			t.Errorf("definition of %s: %s", ix.Name, ix.Definition)
		}
	}
	want := []string{"allocation_history_pool_from_seq_idx", "decisions_pool_consumer_seq_idx", "decisions_pool_kind_seq_idx", "events_pool_time_idx", "ownership_history_pool_host_from_idx"}
	if !slices.Equal(names, want) {
		t.Fatalf("secondary indexes %v, want %v (no primary key)", names, want)
	}
	dump, err := query.Dump(ctx, p.db)
	if err != nil {
		t.Fatal(err)
	}
	if len(dump) < int(p.last) || !strings.HasPrefix(dump[0], "0: [seed 1 e0 ") {
		t.Fatalf("dump of %d lines starting %q", len(dump), dump[0])
	}
	again, _ := query.Dump(ctx, p.db)
	if !slices.Equal(dump, again) {
		t.Fatal("two dumps of the same database differ")
	}
}
