package metrics_test

import (
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/metrics"
)

func gauge(t *testing.T, reg *metrics.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no single series %s", name)
	return 0
}

// Lag counts the messages folded but not committed and those still in
// the stream; its age is that of the oldest of them, growing at scrape
// time while nothing commits, and 0 once everything is committed.
func TestLagIsComputedWhenScraped(t *testing.T) {
	reg := metrics.New()
	p := reg.Projector()
	p.Started("p", func() map[string]uint64 { return nil })
	now := time.Now()
	p.Folded("p", 5, now.Add(-20*time.Second), now.Add(-15*time.Second), 3) // 5 folded, 3 more in the stream
	p.Folded("p", 4, now.Add(-14*time.Second), now.Add(-10*time.Second), 0)
	if got := gauge(t, reg, "ledger_projector_lag_events"); got != 9 {
		t.Fatalf("lag_events = %v, want 9 (two batches folded, none committed)", got)
	}
	if got := gauge(t, reg, "ledger_projector_lag_seconds"); got < 20 || got > 60 {
		t.Fatalf("lag_seconds = %v, want the first batch's age (20 s)", got)
	}
	p.Committed("p", 5, 5, time.Millisecond, nil)
	if got := gauge(t, reg, "ledger_projector_lag_seconds"); got < 14 || got >= 20 {
		t.Fatalf("lag_seconds after the first commit = %v, want the second batch's age (14 s)", got)
	}
	p.Committed("p", 4, 9, time.Millisecond, nil)
	if ev, s := gauge(t, reg, "ledger_projector_lag_events"), gauge(t, reg, "ledger_projector_lag_seconds"); ev != 0 || s != 0 {
		t.Fatalf("after every commit: lag %v events, %v s; want 0, 0", ev, s)
	}
	p.Folded("p", 0, time.Time{}, now.Add(-3*time.Second), 2) // redeliveries only; 2 pending after the last fetched
	if ev, s := gauge(t, reg, "ledger_projector_lag_events"), gauge(t, reg, "ledger_projector_lag_seconds"); ev != 2 || s < 3 {
		t.Fatalf("pending in the stream: lag %v events, %v s; want 2, at least 3", ev, s)
	}
}
