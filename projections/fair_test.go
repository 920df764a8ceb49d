package projections

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// busyPool publishes a pool of about 1,000 consumers with ownership and n
// host events, each of which recomputes the whole pool (milliseconds).
func busyPool(m *model, pool string, n int) {
	hosts, consumers, _ := gen.OwnedBench(900)
	m.publish(pool, &events.PlanChange{Plan: events.Plan{Rules: 3, Consumers: consumers}})
	for _, h := range hosts {
		m.publish(pool, h)
	}
	hostFlaps(m, pool, n)
}

// hostFlaps publishes n host events to a pool busyPool set up: hosts
// going down and up again.
func hostFlaps(m *model, pool string, n int) {
	hosts, _, _ := gen.OwnedBench(900)
	for i := range n / 2 {
		h := hosts[i%len(hosts)].(*events.HostUp)
		m.publish(pool, &events.HostDown{Host: h.Host})
		m.publish(pool, h)
	}
}

// TestReadAheadFindsAQuietEventBehindABurst: a quiet pool's event
// appended in the middle of a busy pool's burst, past the projector's
// first window of a batch but within its read ahead (decision 515), is
// folded once the busy pool has had its share, not after the busy pool
// folded its way to it. The stream's last message is the busy pool's, so
// only the read ahead can find the event.
func TestReadAheadFindsAQuietEventBehindABurst(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	m.publish("q", &events.PlanChange{Plan: events.Plan{Consumers: []events.Consumer{{Path: "/a"}}}})
	m.publish("q", &events.HostUp{Host: "h", Slots: 10})
	busyPool(m, "busy", 0)
	project(t, New(asProjector(t, js), db, WithLogger(quietLog())), m)

	const batch = 200 // the first window; the read ahead goes to two
	from := m.last["busy"]
	hostFlaps(m, "busy", 300) // the quiet event lies 100 past the first window
	m.publish("q", &events.Demand{Demands: map[string]int64{"/a": 3}})
	quiet := m.last["q"]
	hostFlaps(m, "busy", 100)

	// A share of 10 ms: a few host events of the busy pool.
	r := start(New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(batch), WithBatchWork(40*time.Millisecond)))
	began := time.Now()
	for r.p.Applied("q") < quiet {
		if time.Since(began) > 30*time.Second {
			t.Fatal("the quiet event was not projected within 30s")
		}
		time.Sleep(200 * time.Microsecond)
	}
	busyFolded := r.p.Applied("busy") - from
	if err := r.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("the quiet event was projected after %d of the busy pool's 300 events before it (window %d)", busyFolded, batch)
	// Without the read ahead it came into the window once the busy pool
	// had folded 101 of them.
	if busyFolded > 100 {
		t.Errorf("the quiet event was projected after %d of the busy pool's events before it: the read ahead did not find it", busyFolded)
	}
	checkAgainstModel(t, db, m)
}

// TestBusyPoolDoesNotHoldOthersBack: a pool whose backlog takes seconds
// to fold sits in the stream before the events of quiet pools; each quiet
// event is projected within about a batch's work of its append, not after
// the busy pool's backlog. The busy pool's events set aside in the
// meantime are folded in order: the projection equals the model's fold
// and a projection made by a projector that takes the log in turn; a
// crash with events set aside loses and doubles nothing.
func TestBusyPoolDoesNotHoldOthersBack(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	quiet := []string{"q0", "q1", "q2", "q3"}
	for _, q := range quiet {
		m.publish(q, &events.PlanChange{Plan: events.Plan{Consumers: []events.Consumer{{Path: "/a"}, {Path: "/b"}}}})
		m.publish(q, &events.HostUp{Host: "h", Slots: 10})
	}
	// Project the quiet pools' setup, then the busy pool's backlog lands.
	project(t, New(asProjector(t, js), db, WithLogger(quietLog())), m)
	// Its fold outlasts many quiet events (docs/decisions.md #116: 1,000
	// host events fold in about 1.5 s; a quiet event is appended every
	// 40 ms).
	busyPool(m, "busy", 1000)
	backlog := m.last["busy"]

	// Batches of 250 messages: the backlog is longer than the read ahead
	// (two batches), so the quiet events appended after it are found by
	// asking the stream for its last message (decision 515).
	r := start(New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(250)))
	began := time.Now()
	// A quiet event every 40 ms while the backlog folds, each timed from
	// its append to its projection: how many are measured does not depend
	// on how long each waits.
	type appended struct {
		pool string
		seq  uint64
		at   time.Time
	}
	var waiting []appended
	var busyAtFirst uint64 // the busy pool's projection when the first quiet event was projected
	var worst time.Duration
	var lags []time.Duration
	next := time.Now()
	for i := 0; r.p.Applied("busy") < backlog || len(waiting) > 0; {
		if time.Since(began) > time.Minute {
			t.Fatalf("backlog and quiet events not projected within a minute (%d quiet events waiting)", len(waiting))
		}
		if r.p.Applied("busy") < backlog && !time.Now().Before(next) {
			q := quiet[i%len(quiet)]
			at := time.Now()
			m.publish(q, &events.Demand{Demands: map[string]int64{"/a": int64(i % 7), "/b": int64(i % 5)}})
			waiting = append(waiting, appended{q, m.last[q], at})
			next = at.Add(40 * time.Millisecond)
			i++
		}
		kept := waiting[:0]
		for _, w := range waiting {
			if r.p.Applied(w.pool) < w.seq {
				kept = append(kept, w)
				continue
			}
			lag := time.Since(w.at)
			if len(lags) == 0 {
				busyAtFirst = r.p.Applied("busy")
			}
			lags = append(lags, lag)
			worst = max(worst, lag)
		}
		waiting = kept
		time.Sleep(time.Millisecond)
	}
	took := time.Since(began)
	if err := r.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(lags)
	t.Logf("%d quiet events projected %s (median), %s (worst) after their append, behind a busy pool's backlog of %s",
		len(lags), lags[len(lags)/2].Round(time.Millisecond), worst.Round(time.Millisecond), took.Round(time.Millisecond))
	if len(lags) < 10 {
		t.Fatalf("the busy pool's backlog was folded after %d quiet events: the test measured nothing", len(lags))
	}
	// A batch folds for 250 ms at most; a quiet event waits for the
	// batch in progress and is folded in the next. 2 s leaves room for a
	// shared, slow machine; in turn, it waited for the whole backlog.
	if worst > 2*time.Second {
		t.Errorf("a quiet pool's event waited %s behind the busy pool, want at most about a batch", worst)
	}
	// The first quiet event lies past the backlog; without asking the
	// stream what is past the read ahead, it came into the window only
	// once the busy pool had folded all of the backlog but two batches.
	if busyAtFirst+2*250 >= backlog {
		t.Errorf("the first quiet event was projected once the busy pool was at %d of %d: the projector folded the backlog up to its read ahead first", busyAtFirst, backlog)
	}
	checkAgainstModel(t, db, m)
	var left int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM pending_events`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d events still set aside once caught up (%v)", left, err)
	}
	ref := newDB(t)
	project(t, New(asProjector(t, js), ref, WithLogger(quietLog())), m)
	diffDumps(t, dump(t, ref), dump(t, db))

	// A crash while events are set aside: the next start takes them up
	// from pending_events, in order, before the pool's later events.
	busyPool(m, "busy2", 100)
	for i := range 20 {
		m.publish(quiet[i%len(quiet)], &events.Demand{Demands: map[string]int64{"/a": int64(i % 3)}})
	}
	var calls, setAside atomic.Int32
	boom := errors.New("simulated crash")
	crashing := New(asProjector(t, js), db, WithLogger(quietLog()), WithFailpoint(func(s string) error {
		if s != StageAfterCommitBeforeAck {
			return nil
		}
		var n int
		_ = db.QueryRow(context.Background(), `SELECT count(*) FROM pending_events`).Scan(&n)
		if n > 0 {
			setAside.Add(1)
		}
		if setAside.Load() > 0 && calls.Add(1) == 2 {
			return boom
		}
		return nil
	}))
	if err := start(crashing).waitDone(); !errors.Is(err, boom) {
		t.Fatalf("Run with failpoint: %v, want the simulated crash with events set aside", err)
	}
	project(t, New(asProjector(t, js), db, WithLogger(quietLog())), m)
	checkAgainstModel(t, db, m)
	project(t, New(asProjector(t, js), ref, WithLogger(quietLog())), m)
	diffDumps(t, dump(t, ref), dump(t, db))
}
