package projections

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestHaltedPoolDoesNotStopOthers: the fold of one pool's event fails
// (the engine panics); that pool is halted with the sequence and reason,
// in SQL and through Halted, its rows stay at the committed checkpoint,
// and every other pool is projected to the end, in the same batches and
// after a restart.
func TestHaltedPoolDoesNotStopOthers(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(5, 6))
	badSeq, _, hook := publishBadPool(m, rng, 30)
	p := New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(7))
	p.cfg.foldHook = hook
	r := start(p)
	if err := r.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	if got := p.Halted(); got["bad"] != badSeq || len(got) != 1 {
		t.Fatalf("Halted() = %v, want bad at %d", got, badSeq)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var seq int64
	var reason string
	if err := db.QueryRow(ctx, `SELECT seq, reason FROM halted_pools WHERE pool = 'bad'`).Scan(&seq, &reason); err != nil {
		t.Fatal(err)
	}
	if uint64(seq) != badSeq || !strings.Contains(reason, "boom") {
		t.Fatalf("halted_pools: %d %q", seq, reason)
	}
	var after int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM events WHERE pool = 'bad' AND seq >= $1`, seq).Scan(&after); err != nil || after != 0 {
		t.Fatalf("%d events of the halted pool at or after its failure were written (%v)", after, err)
	}

	// A restart with the bug still there: the others go on, the halted
	// pool stays halted and nothing of it is written.
	plan, leaves := treePlan(events.ReclaimShareRatio, 3, 3, 4)
	m.publish("tree", &events.PlanChange{Plan: plan})
	m.randomEvents(rng, "tree", plan, leaves, 4, 20)
	m.publish("bad", &events.Demand{Demands: map[string]int64{"/y": 1}})
	delete(m.last, "bad")
	p2 := New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(7))
	p2.cfg.foldHook = hook
	r2 := start(p2)
	if err := r2.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	if got := p2.Halted(); got["bad"] != badSeq {
		t.Fatalf("after restart Halted() = %v", got)
	}
	if err := r2.stop(); err != nil {
		t.Fatal(err)
	}

	// A restart with the bug fixed (no failing hook): the pool is caught
	// up from its checkpoint, its halt lifted, and it goes on with the
	// others; the projection is the one a rebuild from the log gives.
	m.publish("bad", &events.Demand{Demands: map[string]int64{"/z": 2}})
	m.publish("tree", &events.Demand{Demands: map[string]int64{leaves[0]: 3}})
	p3 := New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(7))
	r3 := start(p3)
	if err := r3.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	if got := p3.Halted(); len(got) != 0 {
		t.Fatalf("after a fixed restart Halted() = %v, want none", got)
	}
	if err := r3.stop(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM halted_pools`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("halted_pools rows after the resume: %d (%v)", n, err)
	}
	rebuilt := newDB(t)
	r4 := start(New(asProjector(t, js), rebuilt, WithLogger(quietLog()), WithBatchSize(5)))
	if err := r4.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	if err := r4.stop(); err != nil {
		t.Fatal(err)
	}
	diffDumps(t, dump(t, rebuilt), dump(t, db))
	checkAgainstModel(t, db, m)
}

// publishBadPool publishes pool "bad", whose third host_up breaks the
// engine under hook (a panic at badSeq), mixed with n events of other
// pools; "bad" is left out of the model's last sequences (not projected
// while halted) and badLast is its last event.
func publishBadPool(m *model, rng *rand.Rand, n int) (badSeq, badLast uint64, hook func(pool string, seq uint64)) {
	for _, h := range hostsUp(3, 10) {
		m.publish("bad", h)
	}
	badSeq = m.last["bad"]
	publishMix(m, rng, n)
	m.publish("bad", &events.Demand{Demands: map[string]int64{"/x": 1}})
	badLast = m.last["bad"]
	delete(m.last, "bad")
	hook = func(pool string, seq uint64) {
		if pool == "bad" && seq == badSeq {
			panic("boom: a bug in the engine")
		}
	}
	return badSeq, badLast, hook
}
