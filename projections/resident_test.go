package projections

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// publishTreePools publishes a small tree pool on each of n pools, then
// rounds events, each on a random pool.
func publishTreePools(m *model, rng *rand.Rand, n, rounds int) []string {
	plan, leaves := treePlan(events.ReclaimShareRatio, 2, 3)
	var pools []string
	for i := range n {
		pool := fmt.Sprintf("p%02d", i)
		pools = append(pools, pool)
		m.publish(pool, &events.PlanChange{Plan: plan})
		for _, h := range hostsUp(2, 6) {
			m.publish(pool, h)
		}
	}
	for range rounds {
		m.randomEvents(rng, pools[rng.IntN(n)], plan, leaves, 2, 1)
	}
	return pools
}

// TestResidentPoolsBounded: with room for 3 pools in memory, a projector
// folding 12 pools keeps at most the bound plus the pools of the batches
// not yet committed, and 3 once idle; pools let go are saved and taken up
// again when their events come, and the projection equals one made with
// every pool in memory. A clean stop saves every pool, so the next start
// rebuilds none; a crash leaves some to rebuild, with the same result.
func TestResidentPoolsBounded(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(20, 183))
	publishTreePools(m, rng, 12, 400)
	const bound, batch = 3, 5
	opts := []Option{WithLogger(quietLog()), WithResidentPools(bound), WithBatchSize(batch), WithSnapshotEvery(1000)}
	r := start(New(asProjector(t, js), db, opts...))
	most := 0
	deadline := time.Now().Add(60 * time.Second)
	for !r.caughtUp(m) && time.Now().Before(deadline) {
		most = max(most, r.p.Resident())
		time.Sleep(time.Millisecond)
	}
	if err := r.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	if most > bound+2*batch {
		t.Errorf("up to %d pools in memory while folding, want at most %d (the bound and two batches' pools)", most, bound+2*batch)
	}
	// Idle: the next empty batch lets the last pools go.
	for time.Now().Before(deadline) && r.p.Resident() > bound {
		time.Sleep(10 * time.Millisecond)
	}
	if n := r.p.Resident(); n > bound {
		t.Errorf("%d pools in memory once idle, want at most %d", n, bound)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	checkAgainstModel(t, db, m)
	var saved int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM saved_states`).Scan(&saved); err != nil || saved < 9 {
		t.Fatalf("%d saved states (%v), want one for every pool let go", saved, err)
	}
	ref := newDB(t)
	project(t, New(asProjector(t, js), ref, WithLogger(quietLog()), WithBatchSize(batch), WithSnapshotEvery(1000)), m)
	diffDumps(t, dump(t, ref), dump(t, db))

	// A clean stop saved every pool: the next start rebuilds none, and
	// the pools come back as their events do.
	var logs strings.Builder
	opts[0] = WithLogger(newTextLogger(&lockedWriter{w: &logs}))
	plan, leaves := treePlan(events.ReclaimShareRatio, 2, 3)
	for range 100 {
		m.randomEvents(rng, fmt.Sprintf("p%02d", rng.IntN(12)), plan, leaves, 2, 1)
	}
	project(t, New(asProjector(t, js), db, opts...), m)
	if !strings.Contains(logs.String(), "rebuilt_now=0") {
		t.Errorf("the start after a clean stop rebuilt pools:\n%s", logs.String())
	}
	checkAgainstModel(t, db, m)

	// A crash: the pools in memory then are rebuilt at the next start.
	for range 100 {
		m.randomEvents(rng, fmt.Sprintf("p%02d", rng.IntN(12)), plan, leaves, 2, 1)
	}
	var calls atomic.Int32
	boom := errors.New("simulated crash")
	crashing := New(asProjector(t, js), db, WithLogger(quietLog()), WithResidentPools(bound), WithBatchSize(batch), WithSnapshotEvery(1000),
		WithFailpoint(func(s string) error {
			if s == StageAfterCommitBeforeAck && calls.Add(1) == 12 {
				return boom
			}
			return nil
		}))
	if err := start(crashing).waitDone(); !errors.Is(err, boom) {
		t.Fatalf("Run with failpoint: %v, want the simulated crash", err)
	}
	logs.Reset()
	project(t, New(asProjector(t, js), db, opts...), m)
	if !regexp.MustCompile(`rebuilt_now=[1-9]`).MatchString(logs.String()) {
		t.Errorf("the start after a crash rebuilt no pool:\n%s", logs.String())
	}
	checkAgainstModel(t, db, m)
	project(t, New(asProjector(t, js), ref, WithLogger(quietLog()), WithBatchSize(batch), WithSnapshotEvery(1000)), m)
	diffDumps(t, dump(t, ref), dump(t, db))
}

// waitDone waits for Run to end by itself and returns its error.
func (r *running) waitDone() error {
	select {
	case err := <-r.done:
		r.cancel()
		return err
	case <-time.After(60 * time.Second):
		r.cancel()
		return fmt.Errorf("Run did not end within 60s")
	}
}

// TestSnapshotsByCost: a pool whose events are expensive to fold again
// (host events recompute every consumer) is snapshotted as soon as their
// work passes the threshold, long before the event count; a cheap pool
// only by the count. The snapshots fall on the same events in a projection
// resumed after a crash as in one made in one go.
func TestSnapshotsByCost(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	plan, leaves := treePlan(events.ReclaimShareRatio, 4, 5, 5) // 100 leaves, 124 consumers
	m.publish("wide", &events.PlanChange{Plan: plan})
	hosts := hostsUp(4, 40)
	for _, h := range hosts {
		m.publish("wide", h)
	}
	demand := map[string]int64{}
	for i, l := range leaves {
		demand[l] = int64(1 + i%3)
	}
	m.publish("wide", &events.Demand{Demands: demand})
	m.publish("cheap", &events.PlanChange{Plan: events.Plan{Consumers: []events.Consumer{{Path: "/a"}}}})
	for i := range 120 {
		h := hosts[i%len(hosts)].(*events.HostUp)
		m.publish("wide", &events.HostDown{Host: h.Host})
		m.publish("wide", h)
		m.publish("cheap", &events.Demand{Demands: map[string]int64{"/a": int64(i % 5)}})
	}
	// A host event of "wide" costs 50 + its 124 consumers + 4 hosts + its
	// decisions: at least 178 units; 5,000 units is at most 28 of them.
	const cost = 5_000
	opts := func(extra ...Option) []Option {
		return append([]Option{WithLogger(quietLog()), WithBatchSize(9), WithSnapshotEvery(100), WithSnapshotCost(cost)}, extra...)
	}
	var calls atomic.Int32
	boom := errors.New("simulated crash")
	crashing := New(asProjector(t, js), db, opts(WithFailpoint(func(s string) error {
		if s == StageBeforeCommit && calls.Add(1) == 20 {
			return boom
		}
		return nil
	}))...)
	if err := start(crashing).waitDone(); !errors.Is(err, boom) {
		t.Fatalf("Run with failpoint: %v, want the simulated crash", err)
	}
	project(t, New(asProjector(t, js), db, opts()...), m)
	ref := newDB(t)
	project(t, New(asProjector(t, js), ref, opts()...), m)
	diffDumps(t, dump(t, ref), dump(t, db))
	snaps := func(pool string) []int64 {
		rows, err := db.Query(context.Background(), `SELECT seq FROM snapshots WHERE pool = $1 ORDER BY seq`, pool)
		if err != nil {
			t.Fatal(err)
		}
		seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return seqs
	}
	wide, cheap := snaps("wide"), snaps("cheap")
	// wide: 246 events, so 2 snapshots by count; by cost one every 28
	// host events at most.
	if len(wide) < 240/28 {
		t.Errorf("pool wide (246 costly events) has snapshots at %v, want one at least every %d units of work", wide, cost)
	}
	// cheap: 121 events of 50-odd units: by count only (every 100).
	if len(cheap) != 1 {
		t.Errorf("pool cheap (121 cheap events) has snapshots at %v, want one, after 100 events", cheap)
	}
	checkAgainstModel(t, db, m)
}

// TestLargePoolRebuildsInSeconds: a pool of about 2,000 consumers with
// ownership and hundreds of host events (each recomputes the pool, tens
// of milliseconds) is rebuilt at a start after a crash (no saved state)
// from a snapshot its work put near its end: seconds, not the whole
// history, with the default snapshot rules.
func TestLargePoolRebuildsInSeconds(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	roles, db := newRoleDB(t)
	m := newModel(t, js)
	hosts, consumers, _ := gen.OwnedBench(1800)
	m.publish("large", &events.PlanChange{Plan: events.Plan{Rules: 3, Consumers: consumers}})
	for _, h := range hosts {
		m.publish("large", h)
	}
	for i := range 120 {
		h := hosts[i%len(hosts)].(*events.HostUp)
		m.publish("large", &events.HostDown{Host: h.Host})
		m.publish("large", h)
	}
	project(t, New(asProjector(t, js), db, WithLogger(quietLog())), m)
	// A crash saves no state: the start rebuilds from the newest snapshot.
	// (The owner deletes it: the projector's role may not.)
	if _, err := testdb.Pool(t, roles.Owner).Exec(context.Background(), `DELETE FROM saved_states`); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	started := time.Now()
	r := start(New(asProjector(t, js), db, WithLogger(newTextLogger(&lockedWriter{w: &logs}))))
	for !strings.Contains(logs.String(), "projector: resumed") && time.Since(started) < time.Minute {
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(started)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	folded := regexp.MustCompile(`rebuilt pool" pool=large from_snapshot_seq=([0-9]+) events_folded=([0-9]+)`).FindStringSubmatch(logs.String())
	if folded == nil {
		t.Fatalf("pool large was not rebuilt from a snapshot:\n%s", logs.String())
	}
	n, _ := strconv.Atoi(folded[2])
	t.Logf("pool large (%d consumers, %d events) rebuilt at start in %s, folding %d events after its snapshot at %s",
		len(consumers), m.last["large"], took.Round(time.Millisecond), n, folded[1])
	// A host event of this pool is over 2,000 units: a snapshot at least
	// every 100 of them (DefaultSnapshotCost), where the count alone
	// (10,000) would fold all 420.
	if n > 100 {
		t.Errorf("the rebuild folded %d events after the newest snapshot, want at most 100", n)
	}
	if took > 10*time.Second {
		t.Errorf("the start took %s, want seconds", took)
	}
}
