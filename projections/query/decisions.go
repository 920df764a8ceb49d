package query

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Decision is a row of decisions: one allocation change, in the order the
// fold made it.
type Decision struct {
	EventSeq     uint64
	Ordinal      int
	Kind         string
	Consumer     string
	FromConsumer string // the leaf a reclaim takes from; "" otherwise
	Host         string
	Slots        int64
	Rule         string
	Deadline     *time.Time // nil when no grace period applies
}

// DecisionPage is a page of a pool's decisions; NextFromSeq, when not
// nil, is where the next page starts.
type DecisionPage struct {
	Decisions   []Decision
	NextFromSeq *uint64
}

const decisionColumns = `SELECT event_seq, ordinal, kind, consumer, coalesce(from_consumer, ''), host, slots, rule, deadline
	FROM decisions WHERE pool = $1 `

// DecisionsFrom reads up to limit decisions of pool from sequence from on,
// never ending a page inside an event (a client resuming at NextFromSeq
// must not see half an event twice); an event with more decisions than
// limit is returned whole.
func DecisionsFrom(ctx context.Context, q Querier, pool string, from uint64, limit int) (DecisionPage, error) {
	rows, err := decisions(ctx, q, decisionColumns+`AND event_seq >= $2 ORDER BY event_seq, ordinal LIMIT $3`, pool, from, limit+1)
	if err != nil {
		return DecisionPage{}, err
	}
	page := DecisionPage{Decisions: rows}
	if len(rows) <= limit {
		return page, nil
	}
	cut := rows[limit].EventSeq
	n := limit
	for n > 0 && rows[n-1].EventSeq == cut {
		n--
	}
	page.Decisions = rows[:n]
	if n == 0 {
		if page.Decisions, err = DecisionsOf(ctx, q, pool, cut); err != nil {
			return DecisionPage{}, err
		}
		cut++
	}
	page.NextFromSeq = &cut
	return page, nil
}

// DecisionsOf returns the decisions of the event with sequence seq, in
// the order the fold made them.
func DecisionsOf(ctx context.Context, q Querier, pool string, seq uint64) ([]Decision, error) {
	return decisions(ctx, q, decisionColumns+`AND event_seq = $2 ORDER BY ordinal`, pool, seq)
}

// DecisionsBetween returns the decisions of the events after sequence
// after up to and including upTo, in order.
func DecisionsBetween(ctx context.Context, q Querier, pool string, after, upTo uint64) ([]Decision, error) {
	return decisions(ctx, q, decisionColumns+`AND event_seq > $2 AND event_seq <= $3 ORDER BY event_seq, ordinal`, pool, after, upTo)
}

func decisions(ctx context.Context, q Querier, sql string, args ...any) ([]Decision, error) {
	rows, _ := q.Query(ctx, sql, args...)
	out, err := pgx.AppendRows([]Decision{}, rows, pgx.RowToStructByPos[Decision])
	if err != nil {
		return nil, fmt.Errorf("decisions: %w", err)
	}
	return out, nil
}

// DecisionAt returns decision ordinal of the event with sequence seq; ok
// is false when there is no such decision.
func DecisionAt(ctx context.Context, q Querier, pool string, seq uint64, ordinal int) (d Decision, ok bool, err error) {
	ds, err := decisions(ctx, q, decisionColumns+`AND event_seq = $2 AND ordinal = $3`, pool, seq, ordinal)
	if err != nil || len(ds) == 0 {
		return Decision{}, false, err
	}
	return ds[0], true, nil
}
