package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/jackc/pgx/v5/pgxpool"
)

type key struct {
	pool string
	seq  uint64
}

// stored is what the projection holds for one event.
type stored struct {
	event     eventRow
	decisions []decisionRow
}

type eventRow struct {
	id, typ, producer string
	v                 int32
	at                time.Time
	data              []byte
	refused           *string
	prevHash, hash    []byte
}

type decisionRow struct {
	kind, consumer, host, rule string
	from                       *string
	slots                      int64
	deadline                   *time.Time
}

// loadRows reads the events and decisions rows of a chunk of events.
func loadRows(ctx context.Context, db *pgxpool.Pool, evs []Event) (map[key]*stored, error) {
	pools, seqs := make([]string, len(evs)), make([]int64, len(evs))
	for i, ev := range evs {
		pools[i], seqs[i] = ev.Message.Pool, int64(ev.Stored.Seq)
	}
	out := map[key]*stored{}
	rows, err := db.Query(ctx, `
		SELECT e.pool, e.seq, e.id, e.type, e.v, e.time, e.producer, e.data::text, e.refused, e.prev_hash, e.hash, e.time_ns
		FROM events e JOIN unnest($1::text[], $2::bigint[]) AS k(pool, seq) ON e.pool = k.pool AND e.seq = k.seq`, pools, seqs)
	if err != nil {
		return nil, fmt.Errorf("read events rows: %w", err)
	}
	for rows.Next() {
		var k key
		var seq int64
		var e eventRow
		var data string
		var ns int16
		if err := rows.Scan(&k.pool, &seq, &e.id, &e.typ, &e.v, &e.at, &e.producer, &data, &e.refused, &e.prevHash, &e.hash, &ns); err != nil {
			return nil, err
		}
		k.seq, e.data = uint64(seq), []byte(data)
		e.at = e.at.Add(time.Duration(ns)) // the exact time of the log
		out[k] = &stored{event: e}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = db.Query(ctx, `
		SELECT d.pool, d.event_seq, d.kind, d.consumer, d.from_consumer, d.host, d.slots, d.rule, d.deadline
		FROM decisions d JOIN unnest($1::text[], $2::bigint[]) AS k(pool, seq) ON d.pool = k.pool AND d.event_seq = k.seq
		ORDER BY d.pool, d.event_seq, d.ordinal`, pools, seqs)
	if err != nil {
		return nil, fmt.Errorf("read decisions rows: %w", err)
	}
	for rows.Next() {
		var k key
		var seq int64
		var d decisionRow
		if err := rows.Scan(&k.pool, &seq, &d.kind, &d.consumer, &d.from, &d.host, &d.slots, &d.rule, &d.deadline); err != nil {
			return nil, err
		}
		k.seq = uint64(seq)
		s := out[k]
		if s == nil {
			s = &stored{}
			out[k] = s
		}
		s.decisions = append(s.decisions, d)
	}
	return out, rows.Err()
}

// differs names the first field of the event copy that differs from the log.
func (e eventRow) differs(ev Event) string {
	env := ev.Stored.Envelope
	switch {
	case e.id != env.ID:
		return "id"
	case e.typ != string(env.Type):
		return "type"
	case int(e.v) != env.V:
		return "version"
	case !e.at.Equal(env.Time):
		return "time"
	case e.producer != env.Producer:
		return "producer"
	case !sameJSON(e.data, env.Data):
		return "data"
	case (e.refused == nil) != (ev.Result.Refused == ""):
		return "refusal"
	case e.refused != nil && *e.refused != string(ev.Result.Refused):
		return "refusal reason"
	}
	return ""
}

func (e eventRow) describe() string {
	return fmt.Sprintf("id %s, type %s, time %s, data %s", e.id, e.typ, e.at.UTC().Format(time.RFC3339Nano), e.data)
}

func describeEnvelope(ev Event) string {
	env := ev.Stored.Envelope
	return fmt.Sprintf("id %s, type %s, time %s, data %s", env.ID, env.Type, env.Time.UTC().Format(time.RFC3339Nano), env.Data)
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
	from := ""
	if d.from != nil {
		from = *d.from
	}
	sameDeadline := (d.deadline == nil) == (w.Deadline == nil) && (d.deadline == nil || d.deadline.Equal(*w.Deadline))
	return d.kind == string(w.Kind) && d.consumer == w.Consumer && from == w.From && d.host == w.Host &&
		d.slots == w.Slots && d.rule == string(w.Rule) && sameDeadline
}

func (d decisionRow) describe() string {
	from := ""
	if d.from != nil {
		from = " from " + *d.from
	}
	return fmt.Sprintf("%s %s%s: %d on %s [%s]", d.kind, d.consumer, from, d.slots, d.host, d.rule)
}

func describeDecision(d domain.Decision) string {
	from := ""
	if d.From != "" {
		from = " from " + d.From
	}
	return fmt.Sprintf("%s %s%s: %d on %s [%s]", d.Kind, d.Consumer, from, d.Slots, d.Host, d.Rule)
}

func sortStrings(s []string) { slices.Sort(s) }
