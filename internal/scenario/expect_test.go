package scenario

import (
	"strings"
	"testing"
	"time"
)

const ruleAndDeadline = "testdata/format/rule-and-deadline.yaml"

// TestRuleAndDeadline: a decision expectation's rule and deadline are
// compared when given (the example file passes, in memory; cmd/ledger's
// TestLoadCheck loads it through the service), and a wrong one is
// reported with what was decided.
func TestRuleAndDeadline(t *testing.T) {
	s, err := ParseFile(ruleAndDeadline)
	if err != nil {
		t.Fatal(err)
	}
	if res := Run(s); res.Failed() {
		t.Fatalf("%s fails: %+v", ruleAndDeadline, res)
	}
	exp := s.Steps[1].Expect
	for _, c := range []struct {
		change func(*ExpectDecision)
		want   string
	}{
		{func(d *ExpectDecision) { d.Rule = "priority.reclaim" }, "decisions reclaim /B from /A rule priority.reclaim deadline +30s: want 5 slots, got 0 (decided: 5 rule share_ratio.reclaim deadline +30s)"},
		{func(d *ExpectDecision) { d.Deadline = Deadline{Given: true, Offset: time.Minute} }, "deadline +1m0s: want 5 slots, got 0"},
		{func(d *ExpectDecision) { d.Deadline = Deadline{Given: true, None: true} }, "deadline null: want 5 slots, got 0"},
	} {
		e := *exp
		e.Decisions = []ExpectDecision{exp.Decisions[1]}
		c.change(&e.Decisions[0])
		s.Steps[1].Expect = &e
		res := Run(s)
		if diffs := strings.Join(res.Steps[1].Diffs, "\n"); !strings.Contains(diffs, c.want) {
			t.Errorf("want a diff with %q, got %q", c.want, diffs)
		}
	}
}

// TestExpectationsWithoutRuleOrDeadline: a file without them reads as
// before (nothing more is compared) and a deadline is null or "+D".
func TestExpectationsWithoutRuleOrDeadline(t *testing.T) {
	s, err := Parse([]byte(`
plan: {consumers: [{path: /A}]}
hosts: [{name: h1, slots: 2}]
steps:
  - events: [{type: demand, demands: {/A: 2}}]
    expect:
      allocations: {/A: 2}
      decisions: [{kind: grant, consumer: /A, slots: 2}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if d := s.Steps[0].Expect.Decisions[0]; d.Rule != "" || d.Deadline.Given {
		t.Errorf("an expectation without rule or deadline reads as %+v", d)
	}
	if Run(s).Failed() {
		t.Error("fails")
	}
	for _, bad := range []string{`"30s"`, `"-5s"`, `"+soon"`, `30`} {
		_, err := Parse([]byte(`
plan: {consumers: [{path: /A}]}
steps:
  - events: [{type: demand, demands: {/A: 2}}]
    expect: {decisions: [{kind: grant, consumer: /A, slots: 2, deadline: ` + bad + `}]}
`))
		if err == nil || !strings.Contains(err.Error(), "deadline") {
			t.Errorf("deadline %s: %v, want refused", bad, err)
		}
	}
}
