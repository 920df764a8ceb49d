package projections

import (
	"math/rand/v2"
	"testing"

	"github.com/cluster-ledger/ledger/internal/metrics"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// A halted pool shows in the projector's figures (ledger_pool_halted,
// ledger_projector_halted_pools) while the other pools' gauges go on;
// once the projector stops, its lag and pool gauges are gone (another
// instance may fold those pools now), its counters stay.
func TestMetricsNameHaltedPool(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, h := range hostsUp(2, 10) {
		m.publish("bad", h)
	}
	badSeq := m.last["bad"]
	delete(m.last, "bad")
	publishMix(m, rng, 10)

	reg := metrics.New()
	p := New(asProjector(t, js), db, WithLogger(quietLog()), WithBatchSize(5), WithMetrics(reg.Projector()))
	p.cfg.foldHook = func(pool string, seq uint64) {
		if pool == "bad" && seq == badSeq {
			panic("boom")
		}
	}
	r := start(p)
	if err := r.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	pools := 0
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			key := f.GetName()
			for _, l := range s.GetLabel() {
				if l.GetName() == "pool" {
					key += "/" + l.GetValue()
				}
			}
			if s.Gauge != nil {
				got[key] = s.Gauge.GetValue()
			}
		}
		if f.GetName() == "ledger_pool_allocated_slots" {
			pools = len(f.GetMetric())
		}
	}
	if got["ledger_projector_halted_pools"] != 1 || got["ledger_pool_halted/bad"] != 1 {
		t.Fatalf("halted figures: %v", got)
	}
	if pools < 2 {
		t.Fatalf("allocated gauges of %d pools; the mix projects several", pools)
	}

	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if fams, err = reg.Gatherer().Gather(); err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, f := range fams {
		left[f.GetName()] = len(f.GetMetric()) > 0
	}
	for _, gone := range []string{"ledger_pool_allocated_slots", "ledger_projector_lag_events", "ledger_pool_halted", "ledger_projector_committed_sequence"} {
		if left[gone] {
			t.Errorf("%s still exported after the projector stopped", gone)
		}
	}
	if !left["ledger_projector_events_total"] {
		t.Error("the events counter went with the projector")
	}
}
