package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/explain"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestExplainScenarioWithOwnership: `ledger explain --file` folds a
// scenario as the service would, a plan with ownership under the newest
// rules (3).
func TestExplainScenarioWithOwnership(t *testing.T) {
	file := "../../internal/scenario/testdata/ownership/ml-lends-gpu.yaml"
	story := explain.New("/ml", 20)
	p, err := explainScenario(file, story, limit{seq: 6}, false)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := story.Write(&out, p); err != nil {
		t.Fatal(err)
	}
	want := "at seq 6 /ml asked for 8 and took 6 back (return from /web, deadline 00:05:05, /ml's lend grace 5m)"
	if !strings.Contains(out.String(), want) {
		t.Errorf("explain --at 6 lacks %q:\n%s", want, out.String())
	}
}

// TestExplainRulesDevelopment: explain --file --rules-development tells a
// scenario of the rules version in development; without the switch its
// plan is refused.
func TestExplainRulesDevelopment(t *testing.T) {
	file := "../../test/development/v4/d-pin-1-leaf-under-preemptable-parent.yaml"
	out, _, err := runLedger(t, "", "explain", "--rules-development", "--file", file, "--consumer", "/A/q")
	if err != nil || !strings.Contains(out, "rules version 4") || !strings.Contains(out, "/B reclaimed 3 slots from /A/q") {
		t.Fatalf("explain --rules-development: %v\n%s", err, out)
	}
	if _, _, err := runLedger(t, "", "explain", "--file", file, "--consumer", "/A/q"); err == nil || !strings.Contains(err.Error(), "plan was refused") {
		t.Errorf("explain without the switch: %v, want the plan's refusal", err)
	}
}

// A point or a range that names nothing is refused, naming the flag,
// before any connection: --at 0 and --at 0001-01-01T00:00:00Z (the
// zero time) were read as "not given" and explained or forked the end of
// the pool, while asking for before its first event; replay --from 5
// --to 2 replayed and printed nothing, with exit status 0.
func TestAtAndRangeOutOfRangeRefused(t *testing.T) {
	seed := "../../test/scenarios/seed/seed-000-priority-reclaim.yaml"
	nowhere := []string{"--nats-url", "nats://127.0.0.1:1", "--ledger-url", "http://127.0.0.1:1"}
	for _, at := range []string{"0", "0001-01-01T00:00:00Z"} {
		for _, args := range [][]string{
			{"explain", "--file", seed, "--consumer", "/A", "--at", at},
			{"explain", "--pool", "p", "--consumer", "/A", "--nats-url", "nats://127.0.0.1:1", "--at", at},
			{"what-if", "--pool", "p", "--file", seed, "--ledger-url", "http://127.0.0.1:1", "--at", at},
		} {
			_, _, err := runLedger(t, "", args...)
			if err == nil || !strings.Contains(err.Error(), "--at") {
				t.Errorf("%v: %v, want a refusal naming --at", args, err)
			}
		}
	}
	_, _, err := runLedger(t, "", "replay", "--from", "5", "--to", "2", nowhere[0], nowhere[1])
	if err == nil || !strings.Contains(err.Error(), "--to 2") {
		t.Errorf("replay --from 5 --to 2: %v, want a refusal naming --to", err)
	}
}

// explain --at a time before a pool's first event says so, not that the
// pool has no events in the log. As the auditor, whose identity `ledger
// dev` prints.
func TestExplainBeforeTheFirstEvent(t *testing.T) {
	svc := startService(t)
	if out, errOut, err := runLedger(t, "", "publish", "--ledger-url", svc.ledgerURL, "--ledger-token", svc.token, "--pool", "early", "--type", "plan",
		"--data", `{"plan":{"consumers":[{"path":"/x"}]}}`); err != nil {
		t.Fatalf("publish: %v\n%s\n%s", err, out, errOut)
	}
	logArgs := []string{"--nats-url", svc.natsURL, "--nats-creds", testenv.Creds(t, svc.natsURL, natsauth.Auditor), "--trusted-keys", svc.trustedKeys}
	_, _, err := runLedger(t, "", append([]string{"explain", "--pool", "early", "--consumer", "/x", "--at", "2020-01-01T00:00:00Z"}, logArgs...)...)
	if err == nil || !strings.Contains(err.Error(), "no event at or before --at 2020-01-01T00:00:00Z") {
		t.Errorf("explain before the first event: %v", err)
	}
	// A sequence past the log's end was answered with the pool's last
	// event as if it were that point (decision 507); one within the log,
	// after the pool's last event, is the pool's state there.
	if out, errOut, err := runLedger(t, "", "publish", "--ledger-url", svc.ledgerURL, "--ledger-token", svc.token, "--pool", "later", "--type", "plan",
		"--data", `{"plan":{"consumers":[{"path":"/y"}]}}`); err != nil {
		t.Fatalf("publish: %v\n%s\n%s", err, out, errOut)
	}
	if out, _, err := runLedger(t, "", append([]string{"explain", "--pool", "early", "--consumer", "/x", "--at", "2"}, logArgs...)...); err != nil ||
		!strings.Contains(out, "/x in pool early at sequence 1 ") {
		t.Errorf("explain --at 2 (the other pool's event): %v\n%s", err, out)
	}
	// The time the answer names, given back as --at, is the same point:
	// printed to the second, it was before the event and was answered
	// "no event at or before".
	out, _, err := runLedger(t, "", append([]string{"explain", "--pool", "early", "--consumer", "/x"}, logArgs...)...)
	header, _, _ := strings.Cut(out, "\n")
	stamp := header[strings.LastIndex(header, "(")+1 : len(header)-1]
	if out, _, err := runLedger(t, "", append([]string{"explain", "--pool", "early", "--consumer", "/x", "--at", stamp}, logArgs...)...); err != nil ||
		!strings.HasPrefix(out, header+"\n") {
		t.Errorf("explain --at %s, the time its answer named (%q): %v\n%s", stamp, header, err, out)
	}
	for _, at := range []string{"3", "1000"} {
		_, _, err = runLedger(t, "", append([]string{"explain", "--pool", "early", "--consumer", "/x", "--at", at}, logArgs...)...)
		if want := "--at " + at + ": past the end of the log (its last sequence is 2); pool early's last event is sequence 1"; err == nil || err.Error() != want {
			t.Errorf("explain --at %s past the log's end: %v, want %q", at, err, want)
		}
	}
	// verify said "ok: 0 events ... match" (exit 0) and replay
	// "replayed 2 events", having checked or printed nothing.
	_, _, err = runLedger(t, "", append([]string{"audit", "verify", "--from", "3", "--database-url", svc.dbURL}, logArgs...)...)
	var coded codedError
	if want := "--from 3: past the end of the log (its last sequence is 2): nothing to verify"; !errors.As(err, &coded) || coded.code != exitNotVerified || !strings.Contains(err.Error(), want) {
		t.Errorf("audit verify --from past the log's end: %v; want exit %d, %q", err, exitNotVerified, want)
	}
	_, _, err = runLedger(t, "", append([]string{"replay", "--from", "3"}, logArgs...)...)
	if want := "--from 3: past the end of the log (its last sequence is 2): nothing to replay"; err == nil || err.Error() != want {
		t.Errorf("replay --from past the log's end: %v, want %q", err, want)
	}
	if out, _, err := runLedger(t, "", append([]string{"replay", "--from", "2"}, logArgs...)...); err != nil {
		t.Errorf("replay --from the log's last sequence: %v\n%s", err, out)
	}
	_, _, err = runLedger(t, "", append([]string{"explain", "--pool", "never", "--consumer", "/x"}, logArgs...)...)
	if err == nil || !strings.Contains(err.Error(), "pool never has no events in the log") {
		t.Errorf("explain of a pool without events: %v", err)
	}
}

// TestLeapSecondAt: explain --at and what-if --at, and a scenario
// file's event time, read a leap second (:60) as the next minute's first
// instant, as the API, the console and PostgreSQL do (decision 520);
// they refused it before, each in its own words (what-if's file with
// Go's "second out of range"). With a fraction (60.5) each refuses it
// with the one message. explain --file folds a scenario whose first
// event is at the scenario epoch, 2026-01-01T00:00:00Z:
// 2025-12-31T23:59:60Z is that instant, so it has that event.
func TestLeapSecondAt(t *testing.T) {
	seed := "../../test/scenarios/seed/seed-000-priority-reclaim.yaml"
	out, _, err := runLedger(t, "", "explain", "--file", seed, "--consumer", "/A", "--at", "2025-12-31T23:59:60Z")
	if err != nil || !strings.Contains(out, "at sequence 1 ") {
		t.Errorf("explain --file --at 2025-12-31T23:59:60Z: %v\n%s", err, out)
	}
	if _, _, err := runLedger(t, "", "explain", "--file", seed, "--consumer", "/A", "--at", "2025-12-31T23:59:59Z"); err == nil {
		t.Errorf("explain --file --at 2025-12-31T23:59:59Z (before the first event) answered")
	}

	const refusal = `"2025-12-31T23:59:60.5Z" is not an RFC 3339 time like 2026-01-02T15:04:05Z`
	leapFile := filepath.Join(t.TempDir(), "leap.yaml")
	if err := os.WriteFile(leapFile, []byte("events:\n  - {type: demand, time: \"2025-12-31T23:59:60.5Z\", demands: {/A: 1}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"explain", "--file", seed, "--consumer", "/A", "--at", "2025-12-31T23:59:60.5Z"},
		{"explain", "--pool", "p", "--consumer", "/A", "--nats-url", "nats://127.0.0.1:1", "--at", "2025-12-31T23:59:60.5Z"},
		{"what-if", "--pool", "p", "--file", seed, "--ledger-url", "http://127.0.0.1:1", "--at", "2025-12-31T23:59:60.5Z"},
		{"what-if", "--pool", "p", "--file", leapFile, "--ledger-url", "http://127.0.0.1:1"},
	} {
		if _, _, err := runLedger(t, "", args...); err == nil || !strings.Contains(err.Error(), refusal) {
			t.Errorf("%v: %v, want %s", args, err, refusal)
		}
	}
	lim, err := parseAt("2016-12-31T23:59:60Z")
	if err != nil || !lim.t.Equal(time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("--at 2016-12-31T23:59:60Z: %v, %v; want 2017-01-01T00:00:00Z", lim, err)
	}
	if err := os.WriteFile(leapFile, []byte("events:\n  - {type: demand, time: \"2016-12-31T23:59:60Z\", demands: {/A: 1}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	evs, err := scenario.ParseEventsFile(leapFile)
	if err != nil || len(evs) != 1 || evs[0].Time == nil || !evs[0].Time.Equal(time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("a scenario event at 2016-12-31T23:59:60Z: %v, %v; want it at 2017-01-01T00:00:00Z", evs, err)
	}
}
