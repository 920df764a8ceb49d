package domain

import (
	"errors"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

// TestEveryEventKindFolds: the engine validates and folds every event type
// of the table (events.Kinds): each kind's example, on a pool with a plan
// and a host, is accepted or refused for a reason of its own, never as an
// unknown type, so a row added to the table fails here until the engine
// handles it.
func TestEveryEventKindFolds(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, k := range events.Kinds() {
		p := NewPool("kinds")
		setup := []events.Payload{
			&events.PlanChange{Plan: events.Plan{Rules: int(RulesNewest), Consumers: []events.Consumer{{Path: "/a"}, {Path: "/b"}}}},
			&events.HostUp{Host: "h2", Slots: 4},
			&events.Demand{Demands: map[string]int64{"/a": 2}},
		}
		for i, ev := range setup {
			if _, err := p.Apply(Event{Seq: uint64(i + 1), Time: at, Payload: ev}); err != nil {
				t.Fatal(err)
			}
		}
		payload, err := events.DecodePayload(k.Type, []byte(k.Example))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(payload); errors.Is(err, ErrUnknownEventType) {
			t.Fatalf("%s: Validate does not know it: %v", k.Type, err)
		}
		if _, err := p.Apply(Event{Seq: 10, Time: at, Payload: payload}); errors.Is(err, ErrUnknownEventType) {
			t.Fatalf("%s: Apply does not know it: %v", k.Type, err)
		}
	}
}
