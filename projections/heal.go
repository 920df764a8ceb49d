package projections

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// Healing a stream that lost its tail.
//
// JetStream acknowledges a publish once the message is written; unless the
// server syncs every write (natsserver.SyncAlways, the default), a power
// loss can take the last acknowledged messages with it while PostgreSQL,
// which syncs its commits, keeps their projection. The events table holds
// each of those messages as it was stored (subject, headers, body:
// migration 0003), so the projector appends them again, in order, each
// with Nats-Expected-Last-Sequence set to the sequence before it: every
// event gets back exactly its original sequence, or the publish is
// refused and nothing is guessed. Before that it compares the part of the
// stream that survived with the events table, and stops at the first
// sequence where they differ.

// Errors of healing; match them with errors.Is.
var (
	// ErrDiverged: the stream and the projection hold different events at
	// the same sequence. Nothing was appended.
	ErrDiverged = errors.New("the stream and the projection disagree")
	// ErrUnhealable: the events table lacks what re-creating a lost
	// message needs (rows projected before migration 0003, or a message
	// that was no pool event and so has no row).
	ErrUnhealable = errors.New("the projection cannot give the stream back the events it lost")
)

// HealReport says what a heal did.
type HealReport struct {
	StreamLast  uint64 // where the stream ended before the heal
	Committed   uint64 // where the projection is (projector_offsets)
	Compared    int    // stream messages compared with their events rows
	Republished int    // messages appended again, StreamLast+1..Committed
}

// healWindow is how many publishes are in flight during a heal: enough to
// hide the round trip, few enough that a refusal stops the rest quickly.
const healWindow = 256

// healAckWait bounds the wait for a window's acknowledgements. NATS
// answers a publish the identity may not make with no acknowledgement,
// only an asynchronous permissions error on the connection: a projector
// healing with its own identity (no --heal-creds, as one without the
// ledger's seed runs) waited for ever, projecting nothing, healthy to its
// liveness probe (decision 428). Past the bound, or at once when the
// connection reports that refusal, the heal fails with words that say
// which identity appends, is retried as any failure and counts toward
// --stuck-after.
const healAckWait = 20 * time.Second

// errHealRefused: the identity the heal publishes with may not append.
var errHealRefused = errors.New("NATS refused to append the lost events with this identity: healing needs one allowed to publish to ledger.> (the ledger's seed: the projector's --heal-creds, or ledger recover --nats-creds)")

// Heal gives the stream back the events that the projection holds beyond
// the stream's end, as `ledger recover` does and as Run does by itself
// when it starts. A stream that is not behind the projection is left
// alone (the report says so: Republished 0).
func (p *Projector) Heal(ctx context.Context) (HealReport, error) {
	committed, cps, err := p.loadCheckpoints(ctx, true)
	if err != nil {
		return HealReport{}, err
	}
	last, err := p.streamLast(ctx)
	if err != nil {
		return HealReport{}, err
	}
	if last >= committed {
		return HealReport{StreamLast: last, Committed: committed}, nil
	}
	return p.heal(ctx, cps, last, committed)
}

func (p *Projector) streamLast(ctx context.Context) (uint64, error) {
	info, err := p.streamInfo(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// streamInfo is the stream's info, as its leader answered the look-up
// (one request, bounded by requestTimeout: requests.go).
func (p *Projector) streamInfo(ctx context.Context) (*jetstream.StreamInfo, error) {
	s, err := request(ctx, p, func(ctx context.Context) (jetstream.Stream, error) { return stream.Ensure(ctx, p.js) })
	if err != nil {
		return nil, fmt.Errorf("stream %s info: %w", stream.Name, err)
	}
	return s.CachedInfo(), nil
}

// heal checks the surviving stream against the events table from the
// oldest snapshot the restart folds from, then appends the missing tail.
func (p *Projector) heal(ctx context.Context, cps []checkpoint, last, committed uint64) (HealReport, error) {
	rep := HealReport{StreamLast: last, Committed: committed}
	p.cfg.log.Warn("projector: the stream ends before the projection; appending the missing events from PostgreSQL",
		"stream", stream.Name, "stream_last_seq", last, "projected_seq", committed)
	from := uint64(1)
	for i, cp := range cps {
		if s := snapSeqOf(cp) + 1; i == 0 || s < from {
			from = s
		}
	}
	var err error
	if last >= from {
		if rep.Compared, err = p.compareOverlap(ctx, from, last); err != nil {
			return rep, err
		}
	}
	if rep.Republished, err = p.republish(ctx, last, committed); err != nil {
		return rep, err
	}
	p.cfg.log.Info("projector: stream healed", "stream", stream.Name, "compared", rep.Compared,
		"republished", rep.Republished, "stream_last_seq", committed)
	return rep, nil
}

// overlapRow is what an events row says about the message at its
// sequence.
type overlapRow struct {
	seq           int64
	pool, id, typ string
	subject       *string
	bodyHash      []byte // sha256 of events.body; nil before migration 0003
}

// compareOverlap compares every stream message in [from, to] with the
// events row of the same sequence and names the first that differs. Both
// are read in sequence order side by side, so memory stays flat however
// long the range.
func (p *Projector) compareOverlap(ctx context.Context, from, to uint64) (int, error) {
	// Every message up to the offset is an events row or, set aside for
	// a busy pool (fair.go), a pending_events row.
	rows, err := p.db.Query(ctx, `SELECT seq, pool, id, type, subject, sha256(body) FROM events WHERE seq BETWEEN $1 AND $2
		UNION ALL SELECT seq, pool, '', '', subject, sha256(body) FROM pending_events WHERE seq BETWEEN $1 AND $2 ORDER BY seq`,
		int64(from), int64(to))
	if err != nil {
		return 0, fmt.Errorf("read events %d..%d: %w", from, to, err)
	}
	defer rows.Close()
	want := &overlapCursor{rows: rows}
	compared := 0
	err = stream.Read(ctx, p.js.Conn(), "", from, to, func(m stream.Msg) error {
		seq := m.Seq
		row, err := want.peek()
		if err != nil {
			return err
		}
		switch {
		case row != nil && uint64(row.seq) < seq:
			return fatal(fmt.Errorf("%w at sequence %d: the events table holds event %q of pool %s there but the stream has no message",
				ErrDiverged, row.seq, row.id, row.pool))
		case row != nil && uint64(row.seq) == seq:
			if d := row.differs(m.Subject, m.Data); d != "" {
				return fatal(fmt.Errorf("%w at sequence %d: %s; nothing was appended", ErrDiverged, seq, d))
			}
			want.next()
			compared++
		default:
			if _, err := stream.PoolOf(m.Subject); err == nil {
				return fatal(fmt.Errorf("%w at sequence %d: the stream holds a message on %s there but the events table has no row",
					ErrDiverged, seq, m.Subject))
			}
		}
		return nil
	})
	if err != nil {
		if isFatal(err) {
			return compared, err
		}
		return compared, fmt.Errorf("read stream %d..%d: %w", from, to, err)
	}
	if row, err := want.peek(); err != nil || row != nil {
		if err != nil {
			return compared, err
		}
		return compared, fatal(fmt.Errorf("%w at sequence %d: the events table holds event %q there but the stream has no message",
			ErrDiverged, row.seq, row.id))
	}
	return compared, nil
}

// overlapCursor reads events rows one at a time, with one row of
// look-ahead.
type overlapCursor struct {
	rows   pgx.Rows
	cur    overlapRow
	loaded bool
	done   bool
}

// peek returns the current row, or nil after the last.
func (c *overlapCursor) peek() (*overlapRow, error) {
	if c.loaded {
		return &c.cur, nil
	}
	if c.done {
		return nil, nil
	}
	if !c.rows.Next() {
		c.done = true
		if err := c.rows.Err(); err != nil {
			return nil, fmt.Errorf("read events: %w", err)
		}
		return nil, nil
	}
	c.cur = overlapRow{}
	if err := c.rows.Scan(&c.cur.seq, &c.cur.pool, &c.cur.id, &c.cur.typ, &c.cur.subject, &c.cur.bodyHash); err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	c.loaded = true
	return &c.cur, nil
}

// next moves past the current row.
func (c *overlapCursor) next() { c.loaded = false }

// differs describes how the stored message (subject, body) differs from
// the row, or returns "". Rows from before migration 0003 have no body:
// their id, pool and type are compared instead.
func (o overlapRow) differs(subject string, body []byte) string {
	if o.subject != nil && *o.subject != subject {
		return fmt.Sprintf("the stream's message is on subject %s, the events row on %s", subject, *o.subject)
	}
	if o.bodyHash != nil {
		if h := sha256.Sum256(body); !bytes.Equal(o.bodyHash, h[:]) {
			return fmt.Sprintf("the stream's message body differs from the stored event %q", o.id)
		}
		return ""
	}
	if pool, _ := stream.PoolOf(subject); pool != o.pool || !strings.HasSuffix(stream.Published(subject), "."+o.typ) {
		return fmt.Sprintf("the stream's message is on subject %s, the events row is a %s event of pool %s", subject, o.typ, o.pool)
	}
	var env struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(body, &env) == nil && env.ID != o.id {
		return fmt.Sprintf("the stream holds event %q, the events table %q", env.ID, o.id)
	}
	return ""
}

// tailRow is a stored message to append again.
type tailRow struct {
	seq     int64
	id      string
	subject *string
	headers []byte
	body    []byte
}

// republish appends the events rows after last, up to committed, in
// sequence order, each expecting the stream to end just before it.
func (p *Projector) republish(ctx context.Context, last, committed uint64) (int, error) {
	rows, _ := p.db.Query(ctx, `SELECT seq, id, subject, headers, body FROM events WHERE seq > $1 AND seq <= $2
		UNION ALL SELECT seq, '', subject, headers, body FROM pending_events WHERE seq > $1 AND seq <= $2 ORDER BY seq`,
		int64(last), int64(committed))
	tail, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (tailRow, error) {
		var t tailRow
		err := r.Scan(&t.seq, &t.id, &t.subject, &t.headers, &t.body)
		return t, err
	})
	if err != nil {
		return 0, fmt.Errorf("read events after %d: %w", last, err)
	}
	next := last + 1
	for _, t := range tail { // check everything before appending anything
		switch {
		case uint64(t.seq) != next:
			return 0, fatal(fmt.Errorf("%w: sequence %d is not in the events table (a message that named no pool), so it cannot be stored again before %d",
				ErrUnhealable, next, t.seq))
		case t.subject == nil || t.body == nil:
			return 0, fatal(fmt.Errorf("%w: event %q at sequence %d was projected before migration 0003 and the table lacks its stored message",
				ErrUnhealable, t.id, t.seq))
		}
		if err := t.authentic(p.cfg.keys); err != nil {
			return 0, err
		}
		next++
	}
	if next-1 != committed {
		return 0, fatal(fmt.Errorf("%w: the events table ends at sequence %d but the projection reached %d (messages that named no pool)",
			ErrUnhealable, next-1, committed))
	}
	if err := p.refuseKnownIDs(ctx, tail, last); err != nil {
		return 0, err
	}
	for lo := 0; lo < len(tail); lo += healWindow {
		if err := p.publishTail(ctx, tail[lo:min(lo+healWindow, len(tail))]); err != nil {
			return lo, err
		}
	}
	return len(tail), nil
}

// refuseKnownIDs refuses the tail when one of its events carries the id
// of an event its pool already has, before it in the stream (an events
// row at or before last) or in the tail: a copy of a genuine signed
// event, planted after the projection's end by whoever holds the
// projector's role, passed the signature check and was stored in the log
// for good, to be refused there as a duplicate (decision 508). The id is
// the envelope's, read from the body that would be appended, not the
// row's id column.
func (p *Projector) refuseKnownIDs(ctx context.Context, tail []tailRow, last uint64) error {
	type key struct{ pool, id string }
	first := make(map[key]int64, len(tail))
	pools, ids := make([]string, 0, len(tail)), make([]string, 0, len(tail))
	for _, t := range tail {
		var env struct {
			ID string `json:"id"`
		}
		pool, err := stream.PoolOf(*t.subject)
		if err != nil || json.Unmarshal(t.body, &env) != nil || env.ID == "" {
			continue // no pool event: the fold refuses it, as it did the first time
		}
		k := key{pool, env.ID}
		if seq, dup := first[k]; dup {
			return fatal(fmt.Errorf("%w: the message at sequence %d in PostgreSQL is event %q of pool %s again, as at sequence %d: a heal does not append an event id twice, so nothing was appended; restore the stream from a backup",
				ErrUnhealable, t.seq, env.ID, pool, seq))
		}
		first[k] = t.seq
		pools, ids = append(pools, pool), append(ids, env.ID)
	}
	if len(ids) == 0 {
		return nil
	}
	var pool, id string
	var seq, copySeq int64
	err := p.db.QueryRow(ctx, `SELECT e.pool, e.id, e.seq FROM events e JOIN unnest($1::text[], $2::text[]) AS t(pool, id) ON e.pool = t.pool AND e.id = t.id
		WHERE e.seq <= $3 ORDER BY e.seq LIMIT 1`, pools, ids, int64(last)).Scan(&pool, &id, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up the ids of the events after %d: %w", last, err)
	}
	copySeq = first[key{pool, id}]
	return fatal(fmt.Errorf("%w: the message at sequence %d in PostgreSQL is event %q of pool %s, which the stream already holds at sequence %d: a heal does not append an event id twice, so nothing was appended; restore the stream from a backup",
		ErrUnhealable, copySeq, id, pool, seq))
}

// publishTail publishes rows asynchronously and checks every ack: the
// original sequence, not a duplicate.
func (p *Projector) publishTail(ctx context.Context, tail []tailRow) error {
	futures := make([]jetstream.PubAckFuture, len(tail))
	for i, t := range tail {
		m, err := t.message()
		if err != nil {
			return fatal(fmt.Errorf("%w: event %q at sequence %d: %v", ErrUnhealable, t.id, t.seq, err))
		}
		if futures[i], err = p.healJS().PublishMsgAsync(m); err != nil {
			return fmt.Errorf("append sequence %d again: %w", t.seq, err)
		}
	}
	wait := time.NewTimer(healAckWait)
	defer wait.Stop()
	check := time.NewTicker(200 * time.Millisecond)
	defer check.Stop()
	refused := func() error {
		// Only a refusal of these appends: another permissions error the
		// connection met before says nothing of them.
		if err := p.healJS().Conn().LastError(); errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `Publish to "ledger.`) {
			return fmt.Errorf("%w (%v)", errHealRefused, err)
		}
		return nil
	}
	for i, f := range futures {
		t := tail[i]
		for acked := false; !acked; {
			select {
			case <-check.C:
				if err := refused(); err != nil {
					return err
				}
			case <-wait.C:
				if err := refused(); err != nil {
					return err
				}
				return fmt.Errorf("append sequence %d again: no acknowledgement in %v: %w", t.seq, healAckWait, errHealRefused)
			case ack := <-f.Ok():
				if ack.Duplicate || ack.Sequence != uint64(t.seq) {
					return fatal(fmt.Errorf("%w at sequence %d: appending event %q again got sequence %d (duplicate %t): the stream already holds it elsewhere",
						ErrDiverged, t.seq, t.id, ack.Sequence, ack.Duplicate))
				}
				acked = true
			case err := <-f.Err():
				var apiErr *jetstream.APIError
				if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
					return fatal(fmt.Errorf("%w at sequence %d: the stream changed while it was being healed (another writer?): %v",
						ErrDiverged, t.seq, err))
				}
				return fmt.Errorf("append sequence %d again: %w", t.seq, err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// authentic refuses to append t again unless a trusted key signed it
// (keys nil: a projector that authenticates nothing appends as it
// folds). The rows are the projector's own PostgreSQL role's to write,
// but the appends are made with the ledger's NATS identity into a log
// that never deletes: whoever held that role could otherwise have had a
// message of their own, or an event's body edited, stored in the log of
// truth for ever by the next heal (decision 497). An event a heal cannot
// append is restored from a backup instead.
func (t tailRow) authentic(keys *signing.Keyring) error {
	if keys == nil {
		return nil
	}
	m, err := t.message()
	if err != nil {
		return fatal(fmt.Errorf("%w: event %q at sequence %d: %v", ErrUnhealable, t.id, t.seq, err))
	}
	switch err := keys.VerifyAt(uint64(t.seq), stream.Published(*t.subject), m.Header, t.body); {
	case err == nil:
		return nil
	case errors.Is(err, signing.ErrHistory):
		return fmt.Errorf("authenticate sequence %d before appending it again: %w", t.seq, err)
	default:
		return fatal(fmt.Errorf("%w: the message at sequence %d (%s) in PostgreSQL is signed by no trusted key (%v): a heal appends again only events the ledger signed, so nothing was appended; restore the stream from a backup",
			ErrUnhealable, t.seq, *t.subject, err))
	}
}

// message re-creates the stored message: its subject, body and headers,
// less the instructions to JetStream that held for the first publish
// (Nats-Expected-*, Nats-Batch-*), plus the check that it lands on its
// original sequence.
func (t tailRow) message() (*nats.Msg, error) {
	// Published as the ledger published it: the stream stores it with
	// the same partition again (stream.Published).
	m := nats.NewMsg(stream.Published(*t.subject))
	m.Data = t.body
	if t.headers != nil {
		var h nats.Header
		if err := json.Unmarshal(t.headers, &h); err != nil {
			return nil, fmt.Errorf("events.headers: %w", err)
		}
		for k, vs := range h {
			if isPublishInstruction(k) {
				continue
			}
			m.Header[k] = vs
		}
	}
	m.Header.Set(jetstream.ExpectedLastSeqHeader, strconv.FormatInt(t.seq-1, 10))
	return m, nil
}

// isPublishInstruction reports headers that tell JetStream how to accept
// one publish rather than describe the event.
func isPublishInstruction(key string) bool {
	k := strings.ToLower(key)
	return strings.HasPrefix(k, "nats-expected-") || strings.HasPrefix(k, "nats-batch-")
}

// healJS is where lost events are appended again: WithHealer's JetStream
// (an identity allowed to publish to ledger.>), else the projector's own.
func (p *Projector) healJS() jetstream.JetStream {
	if p.cfg.healer != nil {
		return p.cfg.healer
	}
	return p.js
}
