package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
)

// stored is what the projection holds for one event.
type stored struct {
	event     eventRow
	decisions []decisionRow
}

type eventRow query.Event

type decisionRow query.Decision

// loadRows reads the events and decisions rows of a chunk of events.
func loadRows(ctx context.Context, db query.Querier, evs []Event) (map[query.Key]*stored, error) {
	keys := make([]query.Key, len(evs))
	for i, ev := range evs {
		keys[i] = query.Key{Pool: ev.Message.Pool, Seq: ev.Stored.Seq}
	}
	evRows, err := query.EventsAt(ctx, db, keys)
	if err != nil {
		return nil, err
	}
	decRows, err := query.DecisionsAt(ctx, db, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[query.Key]*stored, len(evRows))
	for k, e := range evRows {
		out[k] = &stored{event: eventRow(e)}
	}
	for k, ds := range decRows {
		s := out[k]
		if s == nil {
			s = &stored{}
			out[k] = s
		}
		for _, d := range ds {
			s.decisions = append(s.decisions, decisionRow(d))
		}
	}
	return out, nil
}

// differs names the first field of the event copy that differs from the log.
func (e eventRow) differs(ev Event) string {
	env := ev.Stored.Envelope
	switch {
	case e.ID != env.ID:
		return "id"
	case e.Type != string(env.Type):
		return "type"
	case int(e.V) != env.V:
		return "version"
	case !e.Time.Equal(env.Time):
		return "time"
	case e.Producer != env.Producer:
		return "producer"
	case !sameJSON(e.Data, projections.StorableJSON(env.Data)): // as the projector stores it: no data is null
		return "data"
	case (e.Refused == nil) != (ev.Result.Refused == ""):
		return "refusal"
	case e.Refused != nil && *e.Refused != string(ev.Result.Refused):
		return "refusal reason"
	}
	return ""
}

func (e eventRow) describe() string {
	refused := "none"
	if e.Refused != nil {
		refused = *e.Refused
	}
	return fmt.Sprintf("id %s, type %s, v %d, time %s, producer %q, refused %s, data %s", e.ID, e.Type, e.V, e.Time.UTC().Format(time.RFC3339Nano), e.Producer, refused, e.Data)
}

func describeEnvelope(ev Event) string {
	env := ev.Stored.Envelope
	refused := string(ev.Result.Refused)
	if refused == "" {
		refused = "none"
	}
	return fmt.Sprintf("id %s, type %s, v %d, time %s, producer %q, refused %s, data %s", env.ID, env.Type, env.V, env.Time.UTC().Format(time.RFC3339Nano), env.Producer, refused, projections.StorableJSON(env.Data))
}

// sameJSON compares two JSON texts by value (jsonb normalises spacing and
// key order).
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func (d decisionRow) equals(w domain.Decision) bool {
	sameDeadline := (d.Deadline == nil) == (w.Deadline == nil) && (d.Deadline == nil || d.Deadline.Equal(*w.Deadline))
	return d.Kind == string(w.Kind) && d.Consumer == w.Consumer && d.FromConsumer == w.From && d.Host == w.Host &&
		d.Slots == w.Slots && d.Rule == string(w.Rule) && sameDeadline
}

func (d decisionRow) describe() string {
	from := ""
	if d.FromConsumer != "" {
		from = " from " + d.FromConsumer
	}
	return fmt.Sprintf("%s %s%s: %d on %s [%s]", d.Kind, d.Consumer, from, d.Slots, d.Host, d.Rule)
}

func describeDecision(d domain.Decision) string {
	from := ""
	if d.From != "" {
		from = " from " + d.From
	}
	return fmt.Sprintf("%s %s%s: %d on %s [%s]", d.Kind, d.Consumer, from, d.Slots, d.Host, d.Rule)
}
