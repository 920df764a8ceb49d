package scenario

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cluster-ledger/ledger/domain"
)

// Observed is what a step produced, from memory or from PostgreSQL.
type Observed struct {
	Allocated map[string]int64 // every consumer (leaves and parents) -> slots
	Leaves    []string
	Decisions []domain.Decision
	// Times is the time of each event of the step that made decisions,
	// by sequence: a decision's deadline is compared as an offset from
	// its event's time.
	Times    map[uint64]time.Time
	Rejected int
}

// Check compares a step's expectation with what was observed and returns
// one line per mismatch (none when the step passes).
func (e *Expect) Check(o Observed) []string {
	if e == nil {
		return nil
	}
	var diffs []string
	paths := make([]string, 0, len(e.Allocations))
	for p := range e.Allocations {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		got, ok := o.Allocated[p]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("allocation %s: want %d, but there is no such consumer", p, e.Allocations[p]))
		case got != e.Allocations[p]:
			diffs = append(diffs, fmt.Sprintf("allocation %s: want %d, got %d", p, e.Allocations[p], got))
		}
	}
	for _, l := range o.Leaves {
		if _, listed := e.Allocations[l]; !listed && o.Allocated[l] != 0 {
			diffs = append(diffs, fmt.Sprintf("allocation %s: want 0 (not listed), got %d", l, o.Allocated[l]))
		}
	}
	for _, d := range e.Decisions {
		if got := d.sum(o); got != d.Slots {
			diffs = append(diffs, fmt.Sprintf("decisions %s: want %d slots, got %d%s", d.describe(), d.Slots, got, d.others(o)))
		}
	}
	if o.Rejected != e.Rejected {
		diffs = append(diffs, fmt.Sprintf("rejected: want %d, got %d", e.Rejected, o.Rejected))
	}
	return diffs
}

// sum adds up the slots of the observed decisions the expectation names:
// its kind, consumer and from, and, when it gives them, its rule and its
// deadline (an offset from the decision's event time, or none).
func (d ExpectDecision) sum(o Observed) int64 {
	var n int64
	for i := range o.Decisions {
		if d.matches(&o.Decisions[i], o.Times) {
			n += o.Decisions[i].Slots
		}
	}
	return n
}

func (d ExpectDecision) matches(x *domain.Decision, times map[uint64]time.Time) bool {
	if string(x.Kind) != d.Kind || x.Consumer != d.Consumer || x.From != d.From {
		return false
	}
	if d.Rule != "" && string(x.Rule) != d.Rule {
		return false
	}
	if !d.Deadline.Given {
		return true
	}
	off, ok := deadlineOffset(x, times)
	if d.Deadline.None || !ok {
		return d.Deadline.None && x.Deadline == nil
	}
	return off == d.Deadline.Offset
}

// deadlineOffset is a decision's deadline less its event's time; ok is
// false when it has no deadline or its event's time is unknown.
func deadlineOffset(x *domain.Decision, times map[uint64]time.Time) (time.Duration, bool) {
	at, known := times[x.Seq]
	if x.Deadline == nil || !known {
		return 0, false
	}
	return x.Deadline.Sub(at), true
}

// describe names what an expectation sums: kind, consumer, from, and the
// rule and deadline when given.
func (d ExpectDecision) describe() string {
	s := d.Kind + " " + d.Consumer
	if d.From != "" {
		s += " from " + d.From
	}
	if d.Rule != "" {
		s += " rule " + d.Rule
	}
	if d.Deadline.Given {
		s += " deadline " + d.Deadline.String()
	}
	return s
}

// others lists, for a failed expectation that names a rule or a
// deadline, the rules and deadlines of the decisions of its kind, consumer
// and from, so the report says what was decided instead.
func (d ExpectDecision) others(o Observed) string {
	if d.Rule == "" && !d.Deadline.Given {
		return ""
	}
	var seen []string
	for i := range o.Decisions {
		x := &o.Decisions[i]
		if string(x.Kind) != d.Kind || x.Consumer != d.Consumer || x.From != d.From {
			continue
		}
		dl := "null"
		if off, ok := deadlineOffset(x, o.Times); ok {
			dl = formatOffset(off)
		}
		seen = append(seen, fmt.Sprintf("%d rule %s deadline %s", x.Slots, x.Rule, dl))
	}
	if len(seen) == 0 {
		return ""
	}
	return " (decided: " + strings.Join(seen, "; ") + ")"
}

// Deadline is an expected decision's deadline: absent (not compared),
// null (the decision has none), or an offset from its event's time written
// like "+30s".
type Deadline struct {
	Given  bool
	None   bool
	Offset time.Duration
}

// UnmarshalJSON reads null or an offset "+30s" ("+" and a Go duration).
func (dl *Deadline) UnmarshalJSON(b []byte) error {
	dl.Given = true
	if string(b) == "null" {
		dl.None = true
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("deadline must be null or an offset like \"+30s\", got %s", b)
	}
	rest, ok := strings.CutPrefix(s, "+")
	d, err := time.ParseDuration(rest)
	if !ok || err != nil || d < 0 {
		return fmt.Errorf("deadline %q: want null or an offset from the event's time like \"+30s\"", s)
	}
	dl.Offset = d
	return nil
}

// MarshalJSON writes the deadline as read.
func (dl Deadline) MarshalJSON() ([]byte, error) {
	if !dl.Given || dl.None {
		return []byte("null"), nil
	}
	return json.Marshal(formatOffset(dl.Offset))
}

func (dl Deadline) String() string {
	if dl.None {
		return "null"
	}
	return formatOffset(dl.Offset)
}

func formatOffset(d time.Duration) string {
	if d < 0 {
		return d.String()
	}
	return "+" + d.String()
}
