package scenario

import (
	"fmt"
	"slices"

	"github.com/cluster-ledger/ledger/domain"
)

// Observed is what a step produced, from memory or from PostgreSQL.
type Observed struct {
	Allocated map[string]int64 // every consumer (leaves and parents) -> slots
	Leaves    []string
	Decisions []domain.Decision
	Rejected  int
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
	sums := SumDecisions(o.Decisions)
	for _, d := range e.Decisions {
		key := DecisionKey{d.Kind, d.Consumer, d.From}
		if got := sums[key]; got != d.Slots {
			diffs = append(diffs, fmt.Sprintf("decisions %s: want %d slots, got %d", key, d.Slots, got))
		}
	}
	if o.Rejected != e.Rejected {
		diffs = append(diffs, fmt.Sprintf("rejected: want %d, got %d", e.Rejected, o.Rejected))
	}
	return diffs
}

// DecisionKey groups decisions as expectations do.
type DecisionKey struct{ Kind, Consumer, From string }

func (k DecisionKey) String() string {
	if k.From != "" {
		return fmt.Sprintf("%s %s from %s", k.Kind, k.Consumer, k.From)
	}
	return fmt.Sprintf("%s %s", k.Kind, k.Consumer)
}

// SumDecisions adds up slots per (kind, consumer, from).
func SumDecisions(ds []domain.Decision) map[DecisionKey]int64 {
	sums := map[DecisionKey]int64{}
	for _, d := range ds {
		sums[DecisionKey{string(d.Kind), d.Consumer, d.From}] += d.Slots
	}
	return sums
}
