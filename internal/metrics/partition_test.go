package metrics_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/metrics"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/projections"
)

// A partitioned projector reports each partition under its own label
// (projector-p<k>of<n>): the partitions' events add up to what was
// appended, each partition's lag reaches 0, and every pool has gauges.
func TestPartitionsReportApart(t *testing.T) {
	reg := metrics.New()
	s := newStack(t, reg)
	js, err := jetstream.New(testenv.Connect(t, s.natsURL, natsauth.Projector))
	if err != nil {
		t.Fatal(err)
	}
	const n = 2
	g, err := projections.NewGroup(js, s.projectorDB, n, projections.WithLogger(quiet), projections.WithPinnedTTL(2*time.Second),
		projections.WithMetrics(reg.Projector()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("group: %v", err)
		}
	}()

	pools := []string{"a", "b", "c", "d", "e", "f"}
	parts := map[int]bool{}
	for _, pool := range pools {
		parts[projections.PartitionOf(pool, n)] = true
		if code, reason := s.post(s.appender, pool, "["+planB+","+hostUp("h1", 4)+","+demand("/x", 3)+"]"); code != http.StatusOK {
			t.Fatalf("POST %s: %d %s", pool, code, reason)
		}
	}
	if len(parts) != n {
		t.Fatalf("pools %v fall in %d partition(s): the test needs both", pools, len(parts))
	}
	total := float64(3 * len(pools))
	f := waitFor(t, s.url, s.other, "both partitions to commit every event", func(f families) bool {
		sum := 0.0
		for k := range n {
			v, _ := f.value("ledger_projector_events_total", "projector", projections.PartitionName("projector", k, n))
			lag, ok := f.value("ledger_projector_lag_events", "projector", projections.PartitionName("projector", k, n))
			if !ok || lag != 0 {
				return false
			}
			sum += v
		}
		return sum == total
	})
	for k := range n {
		name := projections.PartitionName("projector", k, n)
		want := 0.0
		for _, pool := range pools {
			if projections.PartitionOf(pool, n) == k {
				want += 3
			}
		}
		f.must(t, want, "ledger_projector_events_total", "projector", name)
		f.must(t, 0, "ledger_projector_halted_pools", "projector", name)
	}
	for _, pool := range pools {
		f.must(t, s.queryInt(`SELECT sum(allocated) FROM consumer_state WHERE pool = $1 AND leaf`, pool), "ledger_pool_allocated_slots", "pool", pool)
		f.must(t, 4, "ledger_pool_capacity_slots", "pool", pool)
	}
	if _, ok := f.value("ledger_projector_events_total", "projector", "projector"); ok {
		t.Errorf("an unpartitioned series beside the partitions: %v", f["ledger_projector_events_total"])
	}
}
