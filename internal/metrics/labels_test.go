package metrics_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/metrics"
)

// Past WithMaxPools distinct pools, counters go under pool="_other" and
// gauges are not exported: the series stay bounded whatever pool names
// producers send.
func TestPoolLabelsAreBounded(t *testing.T) {
	reg := metrics.New(metrics.WithMaxPools(2))
	api, proj := reg.API(), reg.Projector()
	for _, pool := range []string{"a", "b", "c", "d"} {
		api.Event(pool, "demand", false)
		api.Request(pool, http.StatusUnprocessableEntity, "unknown_consumer", time.Millisecond)
	}
	proj.Committed("p", 4, 4, time.Millisecond, []metrics.PoolFigures{
		{Pool: "a", Allocated: 1, Reclaims: 1}, {Pool: "c", Allocated: 3, Reclaims: 2}, {Pool: "d", Allocated: 4, Reclaims: 5}})
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "pool" {
					continue
				}
				if labels[f.GetName()] == nil {
					labels[f.GetName()] = map[string]float64{}
				}
				v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
				labels[f.GetName()][l.GetValue()] = v
			}
		}
	}
	want := map[string]map[string]float64{
		"ledger_api_events_total":     {"a": 1, "b": 1, metrics.OtherPool: 2},
		"ledger_api_refusals_total":   {"a": 1, "b": 1, metrics.OtherPool: 2},
		"ledger_pool_allocated_slots": {"a": 1},
		"ledger_pool_reclaims_total":  {"a": 1, metrics.OtherPool: 7},
	}
	for name, w := range want {
		got := labels[name]
		if len(got) != len(w) {
			t.Errorf("%s: %v, want %v", name, got, w)
			continue
		}
		for k, v := range w {
			if got[k] != v {
				t.Errorf("%s{pool=%q} = %v, want %v", name, k, got[k], v)
			}
		}
	}
}

// A nil registry's recorders record nothing (a process without metrics).
func TestNilRecordersAreNoOps(t *testing.T) {
	var reg *metrics.Registry
	reg.API().Event("a", "demand", false)
	reg.API().Request("a", 200, "", time.Millisecond)
	reg.API().HTTP("GET /healthz", 200)
	reg.Projector().Started("p", nil)
	reg.Projector().Replay("p", 1, 1, 3)
	reg.Projector().Folded("p", 1, time.Now(), time.Now(), 0)
	reg.Projector().Committed("p", 1, 1, time.Millisecond, nil)
	reg.Projector().ForgetPool("a")
	reg.Projector().Stopped("p", []string{"a"})
	if reg.API() != nil || reg.Projector() != nil {
		t.Fatal("a nil registry gave recorders")
	}
}
