package metrics_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/cluster-ledger/ledger/internal/metrics"
)

// After a restart every pool has its gauges from the start, loaded from
// what the projection holds, not only the pools a new event touches
// (issue 20: 3 of 66 after a restart), and a process that labels fewer
// pools than there are labels those projected last; and ledger_build_info
// names the binary.
func TestPoolGaugesAfterRestart(t *testing.T) {
	reg := metrics.New()
	s := newStack(t, reg)
	stop := s.runProjector(reg.Projector())
	const pools = 12
	for i := range pools {
		body := "[" + planA + "," + hostUp("h1", 4+i) + "," + demand("/lo", 3+i) + "," + demand("/hi", i) + "]"
		if code, reason := s.post(s.appender, fmt.Sprintf("p%02d", i), body); code != 200 {
			t.Fatalf("pool p%02d: %d %s", i, code, reason)
		}
	}
	waitFor(t, s.url, s.other, "the projection of every pool", func(f families) bool {
		lag, ok := f.value("ledger_projector_lag_events", "projector", "projector")
		n, _ := f.value("ledger_projector_events_total", "projector", "projector")
		return ok && lag == 0 && n == 4*pools
	})
	stop()

	// A new process: a new registry, its API and projector. No event is
	// appended: the gauges come from the checkpoints.
	reg2 := metrics.New()
	s2 := newStackOn(t, reg2, s)
	stop2 := s2.runProjector(reg2.Projector())
	// Started: the projector reports its lag (it may rebuild no pool at
	// all when each one's state is stored at its checkpoint).
	f := waitFor(t, s2.url, s2.other, "the restarted projector's pool gauges", func(f families) bool {
		_, started := f.value("ledger_projector_lag_events", "projector", "projector")
		return started && len(f["ledger_pool_capacity_slots"].GetMetric()) == pools
	})
	for i := range pools {
		pool := fmt.Sprintf("p%02d", i)
		f.must(t, s.queryInt(`SELECT sum(slots) FROM hosts WHERE pool = $1 AND up`, pool), "ledger_pool_capacity_slots", "pool", pool)
		f.must(t, s.queryInt(`SELECT sum(allocated) FROM consumer_state WHERE pool = $1 AND leaf`, pool), "ledger_pool_allocated_slots", "pool", pool)
		f.must(t, s.queryInt(`SELECT sum(borrowed) FROM consumer_state WHERE pool = $1 AND leaf`, pool), "ledger_pool_borrowed_slots", "pool", pool)
		f.must(t, s.queryInt(`SELECT sum(demand) FROM consumer_state WHERE pool = $1 AND leaf`, pool), "ledger_pool_demand_slots", "pool", pool)
		f.must(t, s.queryInt(`SELECT coalesce(sum(greatest(demand - allocated, 0)), 0) FROM consumer_state WHERE pool = $1 AND leaf`, pool),
			"ledger_pool_unmet_demand_slots", "pool", pool)
	}
	if n := len(f["ledger_pool_capacity_slots"].GetMetric()); n != pools {
		t.Errorf("%d pools with a capacity gauge after the restart, want %d", n, pools)
	}

	stop2()

	// A process that labels fewer pools than there are gives its labels
	// to the pools projected last (p08 to p11 were appended last), not to
	// the first names.
	reg3 := metrics.New(metrics.WithMaxPools(4))
	s3 := newStackOn(t, reg3, s)
	s3.runProjector(reg3.Projector())
	f3 := waitFor(t, s3.url, s3.other, "the gauges of the pools projected last", func(f families) bool {
		return len(f["ledger_pool_capacity_slots"].GetMetric()) == 4
	})
	for i := 8; i < pools; i++ {
		pool := fmt.Sprintf("p%02d", i)
		f3.must(t, s.queryInt(`SELECT sum(slots) FROM hosts WHERE pool = $1 AND up`, pool), "ledger_pool_capacity_slots", "pool", pool)
	}

	fam := f["ledger_build_info"]
	if fam == nil || len(fam.GetMetric()) != 1 || fam.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Fatalf("ledger_build_info: %v", fam)
	}
	labels := map[string]string{}
	for _, l := range fam.GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["go_version"] != runtime.Version() || labels["version"] == "" || labels["commit"] == "" {
		t.Errorf("ledger_build_info labels %v, want version, commit and go_version %s", labels, runtime.Version())
	}
}

// The gauges loaded at start stay within the registry's pool cap.
func TestLoadedGaugesKeepTheCap(t *testing.T) {
	reg := metrics.New(metrics.WithMaxPools(2))
	p := reg.Projector()
	p.Loaded([]metrics.PoolFigures{{Pool: "a", Capacity: 1}, {Pool: "b", Capacity: 2}, {Pool: "c", Capacity: 3}})
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "ledger_pool_capacity_slots" && len(f.GetMetric()) != 2 {
			t.Errorf("%d capacity gauges with a cap of 2", len(f.GetMetric()))
		}
	}
}
