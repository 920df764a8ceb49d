package events_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/events"
)

// A plan's consumer list is refused while it is decoded, as soon as it
// has one consumer more than a plan may: a body of 100,000 consumers is
// refused as too_many_consumers without all of them being held.
func TestConsumerListStopsAtTheLimit(t *testing.T) {
	plan := func(n int) []byte {
		cs := make([]string, n)
		for i := range cs {
			cs[i] = fmt.Sprintf(`{"path":"/c%d"}`, i)
		}
		return []byte(`{"plan":{"consumers":[` + strings.Join(cs, ",") + `]}}`)
	}
	p, err := events.DecodePayload(events.TypePlan, plan(events.MaxPlanConsumers))
	if err != nil || len(p.(*events.PlanChange).Plan.Consumers) != events.MaxPlanConsumers {
		t.Fatalf("a plan at the limit: %v", err)
	}
	for _, n := range []int{events.MaxPlanConsumers + 1, 100_000} {
		_, err := events.DecodePayload(events.TypePlan, plan(n))
		if !errors.Is(err, events.ErrTooManyConsumers) || events.CodeOf(err) != "too_many_consumers" {
			t.Errorf("%d consumers: %v, want too_many_consumers", n, err)
		}
	}
	if _, err := events.DecodePayload(events.TypePlan, []byte(`{"plan":{"consumers":[{"path":"/a","nope":1}]}}`)); !errors.Is(err, events.ErrMalformed) {
		t.Errorf("unknown field in a consumer: %v, want malformed", err)
	}
	if _, err := events.DecodePayload(events.TypePlan, []byte(`{"plan":{"consumers":{"path":"/a"}}}`)); !errors.Is(err, events.ErrMalformed) {
		t.Errorf("consumers not an array: %v, want malformed", err)
	}
}
