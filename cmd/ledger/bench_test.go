package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/benchmark"
)

// TestBenchQuick runs `ledger bench --quick --json` end to end (its own
// NATS and PostgreSQL, every phase with small numbers), so the harness
// cannot rot: every figure is there and positive, and nothing is left
// behind.
func TestBenchQuick(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, progress bytes.Buffer
	root.SetArgs([]string{"bench", "--quick", "--json"})
	root.SetOut(&out)
	root.SetErr(&progress)
	defer func() { root.SetArgs(nil); root.SetOut(nil); root.SetErr(nil) }()
	start := time.Now()
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("ledger bench --quick: %v\nprogress:\n%s", err, progress.String())
	}
	t.Logf("ledger bench --quick took %s", time.Since(start).Round(time.Millisecond))
	var rep benchmark.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out.String())
	}
	// Phase 1: five measures on each server (sync always, unsynced, R3),
	// beside each other, six ratios between them and three under the default.
	want := map[string]int{"1 append": 24, "2 projection": 4, "3 latency": 3, "4 replay": 7, "5 partitions": 5}
	got := map[string]int{}
	policies := map[string]int{}
	for _, r := range rep.Results {
		got[r.Phase]++
		for _, p := range []string{"[sync always]", "[unsynced, interval:2m0s]", "[R3, interval:2m0s]"} {
			if strings.HasSuffix(r.Name, p) {
				policies[p]++
			}
		}
		if !(r.Value > 0) {
			t.Errorf("%s %q = %v %s, want > 0", r.Phase, r.Name, r.Value, r.Unit)
		}
		if r.Target != "" && r.Met == nil {
			t.Errorf("%s %q has a target but no verdict", r.Phase, r.Name)
		}
	}
	for phase, n := range want {
		if got[phase] != n {
			t.Errorf("phase %s: %d results, want %d", phase, got[phase], n)
		}
	}
	if policies["[sync always]"] != 5 || policies["[unsynced, interval:2m0s]"] != 5 || policies["[R3, interval:2m0s]"] != 5 {
		t.Errorf("append measures per server: %v, want 5 of each", policies)
	}
	if len(rep.Phases) != 5 {
		t.Errorf("%d phase times, want 5", len(rep.Phases))
	}
	if rep.TempDir == "" {
		t.Error("no temporary directory reported")
	} else if _, err := os.Stat(rep.TempDir); !os.IsNotExist(err) {
		t.Errorf("temporary directory %s left behind (stat: %v)", rep.TempDir, err)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
}
