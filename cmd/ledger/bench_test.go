package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/cluster-ledger/ledger/internal/benchmark"
)

// TestBenchQuick runs `ledger bench --quick --json` end to end (its own
// NATS and PostgreSQL, every phase with small numbers), so the harness
// cannot rot: signed as deployed, every figure is there and positive,
// beside its baseline, the acceptance figures with their verdicts, and
// nothing is left behind.
//
// It is a smoke test of the harness, not a timing assertion: on a loaded
// machine (two cores shared with other test binaries) a quick run takes
// from under a minute to several, so it gets the time the test binary
// has left (go test -timeout), less a margin to report in, not a fixed
// two minutes that a slow phase 5 ran past.
func TestBenchQuick(t *testing.T) {
	budget := 15 * time.Minute
	if d, ok := t.Deadline(); ok {
		budget = min(budget, time.Until(d)-30*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
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
	if !rep.Signed {
		t.Error("the report does not say the run was signed")
	}
	// Phase 1: five measures on each server (sync always, unsynced, R3),
	// beside each other, the API's two unsigned beside the signed ones
	// under the default, five ratios between the servers and one more.
	want := map[string]int{"1 append": 25, "2 projection": 8, "3 latency": 3, "4 replay": 8, "5 partitions": 3, "6 ownership": 2}
	got := map[string]int{}
	policies := map[string]int{}
	signings := map[string]int{}
	targets := 0
	for _, r := range rep.Results {
		got[r.Phase]++
		signings[r.Signing]++
		for _, p := range []string{"[sync always]", "[unsynced, interval:2m0s]", "[R3, interval:2m0s]"} {
			if strings.HasSuffix(r.Name, p) {
				policies[p]++
			}
		}
		if !(r.Value > 0) {
			t.Errorf("%s %q = %v %s, want > 0", r.Phase, r.Name, r.Value, r.Unit)
		}
		if r.Baseline != "" && !(r.BaselineValue > 0 && r.Ratio > 0) {
			t.Errorf("%s %q: baseline %q = %v, ratio %v", r.Phase, r.Name, r.Baseline, r.BaselineValue, r.Ratio)
		}
		if r.Target != "" {
			targets++
			if r.Met == nil {
				t.Errorf("%s %q has a target but no verdict", r.Phase, r.Name)
			}
		}
	}
	for phase, n := range want {
		if got[phase] != n {
			t.Errorf("phase %s: %d results, want %d", phase, got[phase], n)
		}
	}
	if policies["[sync always]"] != 9 || policies["[unsynced, interval:2m0s]"] != 5 || policies["[R3, interval:2m0s]"] != 5 {
		t.Errorf("append measures per server: %v, want 9 (the unsigned API's two and the batches signed as they go too), 5 and 5", policies)
	}
	// The acceptance: API single and arrays, projector, replay
	// unsigned and signed, rebuild, partitions twice, latency, ownership.
	if targets != 10 {
		t.Errorf("%d figures with a target, want 10", targets)
	}
	if signings["unsigned"] != 4 || signings["signed"] < 15 {
		t.Errorf("figures by signing: %v, want 4 unsigned (API single and arrays, projector, replay) and the ledger's others signed", signings)
	}
	if len(rep.Phases) != 6 {
		t.Errorf("%d phase times, want 6", len(rep.Phases))
	}
	if rep.TempDir == "" {
		t.Error("no temporary directory reported")
	} else if _, err := os.Stat(rep.TempDir); !os.IsNotExist(err) {
		t.Errorf("temporary directory %s left behind (stat: %v)", rep.TempDir, err)
	}
	checkSignedBound(t, rep)
	checkCPUFigures(t, rep)
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
}

// TestBenchPhasesWithProfile runs one phase with --phases and a CPU
// profile labelled by phase and step, and refuses what cannot run: a
// phase that does not exist, and phase 3 without the projector of phase
// 2, before starting anything.
func TestBenchPhasesWithProfile(t *testing.T) {
	// The command's flags outlive an execution (a slice flag appends),
	// and so does the context cobra gave it (another test's, cancelled
	// since): every run starts from the defaults and this test's context.
	reset := func() {
		cmd, _, err := root.Find([]string{"bench"})
		if err != nil {
			t.Fatal(err)
		}
		cmd.SetContext(t.Context())
		cmd.Flags().VisitAll(func(fl *pflag.Flag) {
			if sv, ok := fl.Value.(pflag.SliceValue); ok {
				_ = sv.Replace(nil)
			} else {
				_ = fl.Value.Set(fl.DefValue)
			}
			fl.Changed = false
		})
	}
	run := func(args ...string) (benchmark.Report, error) {
		reset()
		defer reset()
		var out, progress bytes.Buffer
		root.SetArgs(append([]string{"bench", "--quick", "--json"}, args...))
		root.SetOut(&out)
		root.SetErr(&progress)
		defer func() { root.SetArgs(nil); root.SetOut(nil); root.SetErr(nil) }()
		var rep benchmark.Report
		if err := root.ExecuteContext(t.Context()); err != nil {
			return rep, err
		}
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("report is not JSON: %v\n%s", err, out.String())
		}
		return rep, nil
	}
	for _, bad := range [][]string{{"--phases", "7"}, {"--phases", "3"}} {
		if _, err := run(bad...); err == nil {
			t.Errorf("ledger bench %v: no error", bad)
		}
	}
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	rep, err := run("--phases", "4", "--cpuprofile", prof)
	if err != nil {
		t.Fatalf("ledger bench --phases 4: %v", err)
	}
	if len(rep.Phases) != 1 || rep.Phases[0].Phase != "4 replay" {
		t.Errorf("phases run: %+v, want 4 replay only", rep.Phases)
	}
	for _, r := range rep.Results {
		if r.Phase != "4 replay" {
			t.Errorf("a result of phase %s: %q", r.Phase, r.Name)
		}
	}
	if len(rep.Results) != 7 { // without phase 2, no rebuild of its log beside its projector
		t.Errorf("%d results, want phase 4's 7", len(rep.Results))
	}
	f, err := os.Open(prof)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("the profile is not a gzipped pprof profile: %v", err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	// The labels' keys and values are in the profile's string table.
	for _, s := range []string{"phase", "step", "replay signed", "replay unsigned"} {
		if !bytes.Contains(data, []byte(s)) {
			t.Errorf("the profile has no label %q", s)
		}
	}
}

// checkSignedBound checks phase 2's bound of the signed projector: the
// run's cores over one Ed25519 verification (phase 4's one-core rate,
// the same measurement) plus one event's raw COPY, and the projector
// beside it.
func checkSignedBound(t *testing.T, rep benchmark.Report) {
	t.Helper()
	find := func(phase, name, signing string) benchmark.Result {
		for _, r := range rep.Results {
			if r.Phase == phase && r.Name == name && r.Signing == signing {
				return r
			}
		}
		t.Fatalf("no %s result %q (%s)", phase, name, signing)
		return benchmark.Result{}
	}
	verify := find("4 replay", "Ed25519 verify, one core", "signed")
	copyRate := find("2 projection", "raw COPY FROM, per event", "")
	bound := find("2 projection", "bound: cores / (verify + raw COPY) per event", "signed")
	want := float64(rep.CPUs) / (1/verify.Value + 1/copyRate.Value)
	if math.Abs(bound.Value-want) > 1e-6*want || bound.BaselineValue != copyRate.Value {
		t.Errorf("bound %v beside %v, want %d / (1/%v + 1/%v) = %v beside the raw COPY", bound.Value, bound.BaselineValue, rep.CPUs, verify.Value, copyRate.Value, want)
	}
	if !strings.Contains(bound.Detail, "µs Ed25519 verify") {
		t.Errorf("the bound's detail does not say what it adds up: %q", bound.Detail)
	}
	projector := find("2 projection", "projector, fresh from sequence 0", "signed")
	beside := find("2 projection", "projector beside that bound", "signed")
	if beside.Value != projector.Value || beside.BaselineValue != bound.Value {
		t.Errorf("projector beside the bound: %v of %v, want %v of %v", beside.Value, beside.BaselineValue, projector.Value, bound.Value)
	}
}

// checkCPUFigures: phase 4's raw direct-get read and replays say the
// CPU the process used per event, and phase 5's projections what they
// cost this process and the private PostgreSQL (docs/decisions.md #447,
// #448), each a positive figure.
func checkCPUFigures(t *testing.T, rep benchmark.Report) {
	t.Helper()
	perEvent := regexp.MustCompile(`([0-9.]+) cores \(([0-9.]+) µs an event\)`)
	n4, n5 := 0, 0
	for _, r := range rep.Results {
		var want int
		switch {
		case r.Phase == "4 replay" && (strings.HasPrefix(r.Name, "(a2)") || strings.HasPrefix(r.Name, "(b)")):
			want, n4 = 1, n4+1
		case r.Phase == "5 partitions":
			want, n5 = 2, n5+1 // this process, PostgreSQL
		default:
			continue
		}
		found := perEvent.FindAllStringSubmatch(r.Detail, -1)
		if len(found) != want {
			t.Errorf("%s %q: %d CPU figures in %q, want %d", r.Phase, r.Name, len(found), r.Detail, want)
			continue
		}
		for _, f := range found {
			cores, _ := strconv.ParseFloat(f[1], 64)
			us, _ := strconv.ParseFloat(f[2], 64)
			if !(cores > 0 && us > 0) {
				t.Errorf("%s %q: CPU figure %q, want positive", r.Phase, r.Name, f[0])
			}
		}
	}
	if n4 != 3 || n5 != 3 {
		t.Errorf("%d phase 4 and %d phase 5 rows with CPU figures, want 3 and 3", n4, n5)
	}
}
