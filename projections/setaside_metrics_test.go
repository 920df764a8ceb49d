package projections

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/metrics"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestLagCountsSetAsideEvents: while a busy pool's backlog is folded a
// quarter batch at a time, its later events wait set aside
// (pending_events, decision 184), below the committed offset. The
// projector's ledger_projector_lag_events counted only messages fetched
// and not committed, and those still in the stream, so once the stream
// was all fetched it said a few events (a batch) while hundreds waited,
// and the alert on ledger_projector_lag_seconds never saw the pool's
// reads falling behind. It now adds the set-aside events and their
// oldest age (decision 465): sampled while pending_events holds many
// rows, the gauge is at least half of them (the rest of the sample
// allows for a batch folded and not yet committed, whose rows are still
// there).
func TestLagCountsSetAsideEvents(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	quiet := []string{"q0", "q1"}
	for _, q := range quiet {
		m.publish(q, &events.PlanChange{Plan: events.Plan{Consumers: []events.Consumer{{Path: "/a"}, {Path: "/b"}}}})
		m.publish(q, &events.HostUp{Host: "h", Slots: 10})
	}
	project(t, New(asProjector(t, js), db, WithLogger(quietLog())), m)
	busyPool(m, "busy", 400)
	for i := range 20 { // quiet events behind the backlog: the busy pool's are set aside for them
		m.publish(quiet[i%len(quiet)], &events.Demand{Demands: map[string]int64{"/a": int64(i % 7)}})
	}

	reg := metrics.New()
	r := start(New(asProjector(t, js), db, WithLogger(quietLog()), WithMetrics(reg.Projector())))
	lagEvents := func() float64 {
		fams, err := reg.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == "ledger_projector_lag_events" {
				for _, mm := range f.GetMetric() {
					return mm.GetGauge().GetValue()
				}
			}
		}
		return 0
	}
	var samples, short int
	var worst string
	for !r.caughtUp(m) {
		var pending int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM pending_events`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending >= 50 {
			samples++
			if lag := lagEvents(); lag < float64(pending)/2 {
				short++
				worst = time.Now().Format(time.StampMilli) + ": " + strconv.Itoa(pending) + " set aside, lag_events " + strconv.Itoa(int(lag))
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d samples with 50 or more events set aside, %d with lag_events under half of them (%s)", samples, short, worst)
	if samples < 5 {
		t.Fatalf("only %d samples with events set aside: the test measured nothing", samples)
	}
	if short*4 > samples {
		t.Errorf("lag_events under half the events set aside in %d of %d samples, e.g. %s", short, samples, worst)
	}
	if lag := lagEvents(); lag != 0 {
		t.Errorf("caught up: lag_events %v, want 0", lag)
	}
}
