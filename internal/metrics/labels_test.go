package metrics_test

import (
	"net/http"
	"strconv"
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

// TestRefusalsOnMadeUpPoolsTakeNoLabel: the pool labels are bounded
// (WithMaxPools), so they must go to pools that exist. A producer whose
// token covers every pool (the site's scheduler) and that appends to
// pool names nobody created (a typo in a loop, or on purpose) is refused
// each time (no_plan), and each refusal named its made-up pool: once the
// bound was reached by such names, a pool created afterwards had no
// gauges at all and its events counted under _other. A refusal now names
// a pool only once the pool has its own series (an event of it appended
// or projected), or has events in the log as the API knows it; others
// count under _other (decision 464).
func TestRefusalsOnMadeUpPoolsTakeNoLabel(t *testing.T) {
	const bound = 20
	reg := metrics.New(metrics.WithMaxPools(bound))
	s := newStack(t, reg)
	s.runProjector(reg.Projector())

	// A pool that exists, refused once it does: its refusals name it.
	if code, reason := s.post(s.appender, "known", "["+planB+","+hostUp("h1", 4)+"]"); code != http.StatusOK {
		t.Fatalf("plan of pool known: %d %s", code, reason)
	}
	for i := range 3 * bound {
		pool := "madeup" + strconv.Itoa(i)
		if code, reason := s.post(s.appender, pool, demand("/x", 1)); code != http.StatusUnprocessableEntity {
			t.Fatalf("demand on made-up pool %s: %d %s, want 422", pool, code, reason)
		}
	}
	if code, reason := s.post(s.appender, "known", demand("/nope", 1)); code != http.StatusUnprocessableEntity || reason != "unknown_consumer" {
		t.Fatalf("demand on /nope of pool known: %d %s", code, reason)
	}
	// A pool created after the flood of refusals has its own series.
	if code, reason := s.post(s.appender, "late", "["+planB+","+hostUp("h1", 4)+","+demand("/x", 3)+"]"); code != http.StatusOK {
		t.Fatalf("pool late: %d %s", code, reason)
	}
	f := waitFor(t, s.url, s.other, "the projector to project pool late", func(f families) bool {
		_, ok := f.value("ledger_pool_allocated_slots", "pool", "late")
		n, _ := f.value("ledger_projector_events_total", "projector", "projector")
		return ok || n == 5
	})
	f.must(t, 3, "ledger_pool_allocated_slots", "pool", "late")
	f.must(t, 1, "ledger_api_events_total", "pool", "late", "type", "demand", "outcome", "appended")
	f.must(t, 1, "ledger_api_refusals_total", "pool", "known", "reason", "unknown_consumer")
	f.must(t, 3*bound, "ledger_api_refusals_total", "pool", metrics.OtherPool, "reason", "no_plan")
	for i := range 3 * bound {
		if _, ok := f.value("ledger_api_refusals_total", "pool", "madeup"+strconv.Itoa(i), "reason", "no_plan"); ok {
			t.Fatalf("a refusal on made-up pool madeup%d has a series of its own", i)
		}
	}
}
