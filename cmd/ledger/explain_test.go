package main

import (
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/explain"
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
