package query

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// TimelineEntry is a decision with the time and type of its event.
type TimelineEntry struct {
	Decision
	Time      time.Time
	EventType string
}

// TimelineFilter selects a page of a pool's decisions, newest first.
type TimelineFilter struct {
	// Consumer is "" for all; else the consumer itself or its
	// descendants, on either side (consumer or from_consumer): "/team_a"
	// matches "/team_a" and "/team_a/x", never "/team_ab" or "/teamXa"
	// (a path prefix, compared as text, not a LIKE pattern).
	Consumer string
	Kind     string // "" for all
	Rule     string // "" for all
	// BeforeSeq, BeforeOrdinal is the cursor: decisions strictly before
	// it (BeforeSeq 0: from the newest). BeforeSeq is at most
	// MaxSeq and BeforeOrdinal at most MaxOrdinal (the columns' ranges).
	BeforeSeq     uint64
	BeforeOrdinal int
	Limit         int
}

const timelineSQL = `
SELECT d.event_seq, d.ordinal, d.kind, d.consumer, coalesce(d.from_consumer, ''), d.host, d.slots, d.rule, d.deadline, e.time, e.type
FROM decisions d JOIN events e ON e.pool = d.pool AND e.seq = d.event_seq
WHERE d.pool = $1
  AND ($2::text = '' OR d.consumer = $2 OR d.from_consumer = $2
       OR starts_with(d.consumer, $2 || '/') OR starts_with(d.from_consumer, $2 || '/'))
  AND ($3::text = '' OR d.kind = $3)
  AND ($4::text = '' OR d.rule = $4)
  AND ($5::bigint = 0 OR (d.event_seq, d.ordinal) < ($5::bigint, $6::integer))
ORDER BY d.event_seq DESC, d.ordinal DESC
LIMIT $7`

// Timeline returns a page of pool's decisions, newest first.
func Timeline(ctx context.Context, q Querier, pool string, f TimelineFilter) ([]TimelineEntry, error) {
	rows, _ := q.Query(ctx, timelineSQL, pool, f.Consumer, f.Kind, f.Rule, int64(f.BeforeSeq), f.BeforeOrdinal, f.Limit)
	out, err := pgx.AppendRows([]TimelineEntry{}, rows, func(row pgx.CollectableRow) (TimelineEntry, error) {
		var t TimelineEntry
		d := &t.Decision
		err := row.Scan(&d.EventSeq, &d.Ordinal, &d.Kind, &d.Consumer, &d.FromConsumer, &d.Host, &d.Slots, &d.Rule, &d.Deadline, &t.Time, &t.EventType)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	return out, nil
}
