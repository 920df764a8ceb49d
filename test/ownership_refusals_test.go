package test

import (
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/scenario"
)

// TestOwnershipRefusalCodes folds the ownership refusal scenarios and
// requires that every refused event is refused for the reason the file
// is about: a scenario only counts refusals, and a plan refused for
// another reason (a typo in the file, a check run in another order)
// would pass it unnoticed.
func TestOwnershipRefusalCodes(t *testing.T) {
	want := map[string]events.Code{
		"plan-own-entry-host-and-group.yaml":    domain.ErrInvalidOwnEntry.Code(),
		"plan-own-slots-zero.yaml":              domain.ErrNonPositive.Code(),
		"plan-own-preference-out-of-range.yaml": domain.ErrPreferenceRange.Code(),
		"plan-own-duplicate-host.yaml":          domain.ErrDuplicateOwnHost.Code(),
		"plan-own-parent-owns-nothing.yaml":     domain.ErrParentOwnsNothing.Code(),
		"plan-own-children-own-more.yaml":       domain.ErrChildrenOwnMore.Code(),
		"plan-own-unsupported-rules.yaml":       domain.ErrOwnershipRules.Code(),
	}
	for file, code := range want {
		t.Run(file, func(t *testing.T) {
			s, err := scenario.ParseFile("scenarios/errors/" + file)
			if err != nil {
				t.Fatal(err)
			}
			pool := domain.NewPool(s.Pool)
			evs := s.Events()
			seq, refused := uint64(0), 0
			for _, ev := range evs {
				_, err := pool.Apply(domain.Event{Seq: seq + 1, Time: time.Unix(int64(seq+1), 0), Payload: domain.StampRules(ev.Payload)})
				if err == nil {
					seq++
					continue
				}
				refused++
				if got := events.CodeOf(err); got != code {
					t.Errorf("refused as %s (%v), want %s", got, err, code)
				}
			}
			if refused == 0 {
				t.Error("nothing was refused")
			}
		})
	}
}
