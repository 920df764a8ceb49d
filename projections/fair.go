package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/stream"
)

// One busy pool does not hold the others back (docs/decisions.md #184).
// The stream is one log, and a projection that only ever commits a prefix
// of it would make every pool wait for the slowest: a pool whose events
// take seconds to fold would put every other pool seconds behind. So a
// batch is bounded by the work of folding it, and a pool by its share of
// that work:
//
//   - A batch folds for at most WithBatchWork (250 ms); the messages
//     fetched after that wait in memory for the next batch (carry: not
//     acked, not below the offset).
//   - A pool may fold for a quarter of that in a batch. Past its share,
//     while other pools' messages wait behind it in the batch, its
//     messages are set aside (deferred): kept in memory, in order, and in
//     pending_events, written with the batch that passes them, so the
//     offset moves past them and PostgreSQL still holds every message up
//     to it. The next batches fold each pool's deferred messages first
//     (its share again), before its later messages, which are deferred
//     too while any wait: a pool's events are always folded in order.
//   - Alone, a busy pool folds as fast as before: nothing is deferred
//     when no other pool's message waits behind it.
//
// The offset may then be ahead of a pool's checkpoint, the events between
// in pending_events; a restart reads them back. Deferred messages are
// bounded in bytes (maxDeferredBytes): past that a busy pool's messages
// are folded in turn again, as before.

// DefaultBatchWork is how long a batch folds at most.
const DefaultBatchWork = 250 * time.Millisecond

// maxDeferredBytes bounds the deferred messages held in memory.
const maxDeferredBytes = 64 << 20

// WithBatchWork sets how long a batch folds at most (default
// DefaultBatchWork); a pool folds for a quarter of it in a batch while
// other pools' events wait behind it.
func WithBatchWork(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.batchWork = d
		}
	}
}

// readAheadBatches is how many batches of messages the projector holds
// at most when it reads past a window of one pool (readAhead).
const readAheadBatches = 2

// readAhead reads on past a full window of one pool's messages (the
// messages carried over and fetched) while the stream has more, up to
// readAheadBatches batches, and stops at the first message of another
// pool (decision 515). Fairness sees only the window: a pool alone in it
// is never set aside, since nothing waits behind it there; but another
// pool's event appended after a burst of one pool waited, with a window
// of a batch, until the busy pool had folded all of the burst but a
// batch (3 s behind 5,000 host events). With the other pool's message in
// the window, the busy pool's are set aside past its share as usual. An
// unpartitioned projector only: a partition consumer reads its own pools
// (a busy pool holds back its partition's), and its fetches go through
// the pinned consumer. A read ahead that fails returns what it has: the
// next fetch meets the failure.
func (p *Projector) readAhead(msgs []jetstream.Msg) []jetstream.Msg {
	window := len(p.carry) + len(msgs)
	if p.cfg.part != nil || window < p.cfg.batchSize {
		return msgs
	}
	at := func(i int) jetstream.Msg { // the window's message i
		if i < len(p.carry) {
			return p.carry[i].msg
		}
		return msgs[i-len(p.carry)]
	}
	lone, ok := lonePool(window, at)
	if !ok {
		return msgs
	}
	for limit := readAheadBatches * p.cfg.batchSize; window < limit; {
		if md, err := at(window - 1).Metadata(); err != nil || md.NumPending == 0 {
			return msgs
		}
		more, err := collect(p.cons.FetchNoWait(min(p.cfg.batchSize, limit-window)))
		msgs, window = append(msgs, more...), window+len(more)
		if err != nil || len(more) == 0 {
			return msgs
		}
		if pool, ok := lonePool(len(more), func(i int) jetstream.Msg { return more[i] }); !ok || pool != lone {
			return msgs
		}
	}
	return msgs
}

// lonePool returns the pool of the n messages at(0), ..., at(n-1) when
// they are all one pool's: a window readAhead and othersBeyond look past.
func lonePool(n int, at func(int) jetstream.Msg) (string, bool) {
	if n == 0 {
		return "", false
	}
	lone, err := stream.PoolOf(at(0).Subject())
	if err != nil {
		return "", false
	}
	for i := 1; i < n; i++ {
		if pool, err := stream.PoolOf(at(i).Subject()); err != nil || pool != lone {
			return "", false
		}
	}
	return lone, true
}

// othersBeyond tells whether another pool's message waits in the stream
// past a window (msgs) that holds one pool's messages only: the stream's
// last message is past the window and of another pool (decision 515). A
// read ahead finds the other pools' messages close behind the window;
// this finds the one appended after a burst longer than the read ahead,
// and costs one request to the stream leader per batch of a lone pool
// that the stream goes on past. Fairness then treats it as a message
// later in the batch: the busy pool folds for its share and its messages
// past that are set aside, so the projector moves on through the stream
// to the waiting event instead of folding the whole burst first. Without
// an answer, or partitioned, nothing is assumed to wait.
func (p *Projector) othersBeyond(ctx context.Context, msgs []jetstream.Msg) bool {
	if p.cfg.part != nil {
		return false
	}
	lone, ok := lonePool(len(msgs), func(i int) jetstream.Msg { return msgs[i] })
	if !ok {
		return false
	}
	md, err := msgs[len(msgs)-1].Metadata()
	if err != nil || md.NumPending == 0 {
		return false
	}
	m, err := request(ctx, p, func(ctx context.Context) (*stream.Msg, error) {
		m, ok, err := stream.Last(ctx, p.js.Conn(), "ledger.>")
		if !ok {
			return nil, err
		}
		return &m, err
	})
	if err != nil || m == nil || m.Seq <= md.Sequence.Stream {
		return false
	}
	pool, err := stream.PoolOf(m.Subject)
	return err == nil && pool != lone && p.mine(pool)
}

// deferredMsg is a message set aside: what folding it needs, and, when
// it was set aside from a batch, the message decoded and authenticated
// already (nil when read back from pending_events).
type deferredMsg struct {
	seq     uint64
	subject string
	headers nats.Header
	data    []byte
	stored  time.Time
	dec     *Decoded
}

// backlog is the deferred messages of the pools, each pool's in stream
// order.
type backlog struct {
	pools map[string][]deferredMsg
	bytes int
}

func (q *backlog) reset() { q.pools, q.bytes = map[string][]deferredMsg{}, 0 }

func (q *backlog) has(pool string) bool { return len(q.pools[pool]) > 0 }

func (q *backlog) push(pool string, d deferredMsg) {
	q.pools[pool] = append(q.pools[pool], d)
	q.bytes += len(d.data)
}

// order is the pools with deferred messages, the one waiting longest
// first.
func (q *backlog) order() []string {
	out := make([]string, 0, len(q.pools))
	for pool, ds := range q.pools {
		if len(ds) > 0 {
			out = append(out, pool)
		}
	}
	oldest := func(pool string) uint64 { return q.pools[pool][0].seq }
	for i := 1; i < len(out); i++ { // few pools: insertion sort
		for j := i; j > 0 && oldest(out[j]) < oldest(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// budget is the folding time a batch and each of its pools have left.
type budget struct {
	batch, quantum time.Duration
	spent          time.Duration
	byPool         map[string]time.Duration
}

func newBudget(batch time.Duration) *budget {
	return &budget{batch: batch, quantum: batch / 4, byPool: map[string]time.Duration{}}
}

func (bg *budget) charge(pool string, d time.Duration) {
	bg.spent += d
	bg.byPool[pool] += d
}

func (bg *budget) done() bool                { return bg.spent >= bg.batch }
func (bg *budget) poolDone(pool string) bool { return bg.byPool[pool] >= bg.quantum }

// foldDeferred folds the deferred messages of each pool, the one waiting
// longest first, each for its share of the batch, and notes that their
// pending_events rows go. A pool whose messages are the only ones set
// aside, with no other pool's message in the batch (msgs) or past it in
// the stream (beyond), folds for the whole batch: nobody waits behind it (a busy pool set aside for a quiet
// one's events folds at its full speed again once they are folded).
func (p *Projector) foldDeferred(ctx context.Context, b *batch, bg *budget, msgs []jetstream.Msg, beyond bool) error {
	order := p.deferred.order()
	alone := len(order) == 1 && !beyond
	for _, m := range msgs {
		if !alone {
			break
		}
		if pool, err := stream.PoolOf(m.Subject()); err == nil && pool != order[0] && p.mine(pool) {
			alone = false
		}
	}
	for _, pool := range order {
		for p.deferred.has(pool) && (alone || !bg.poolDone(pool)) && !bg.done() {
			d := p.deferred.pools[pool][0]
			p.deferred.pools[pool] = p.deferred.pools[pool][1:]
			p.deferred.bytes -= len(d.data)
			b.pendingDone = append(b.pendingDone, pendingKey{pool, d.seq})
			start := time.Now()
			dec := d.dec
			if dec == nil {
				m := Decode(p.cfg.keys, p.wants(), stream.Msg{Seq: d.seq, Subject: d.subject, Header: d.headers, Data: d.data, Time: d.stored})
				dec = &m
			}
			if err := p.fold(ctx, b, dec); err != nil {
				// Neither folded nor refused (its key could not be
				// looked up, its pool not loaded): first in line again,
				// its row kept, to be decoded and authenticated again.
				// The batch before it commits: were its row deleted
				// with it, a restart would never fold it.
				d.dec = nil
				p.deferred.pools[pool] = append([]deferredMsg{d}, p.deferred.pools[pool]...)
				p.deferred.bytes += len(d.data)
				b.pendingDone = b.pendingDone[:len(b.pendingDone)-1]
				return err
			}
			bg.charge(pool, time.Since(start))
		}
		if !p.deferred.has(pool) {
			delete(p.deferred.pools, pool)
		}
	}
	return nil
}

// shouldDefer tells whether the message of pool at index i of msgs waits:
// the pool has deferred messages (order), or it used its share of the
// batch while another pool's message comes later in the batch.
func (p *Projector) shouldDefer(pool string, bg *budget, otherLater bool) bool {
	if ps := p.pools[pool]; ps != nil && ps.halted {
		return false // passed over anyway
	}
	if p.deferred.has(pool) {
		return true
	}
	return otherLater && bg.poolDone(pool) && p.deferred.bytes < maxDeferredBytes
}

// deferMsg sets a message aside, in memory and as a pending_events row
// of the batch.
func (p *Projector) deferMsg(b *batch, pool string, d deferredMsg) {
	p.deferred.push(pool, d)
	b.pending = append(b.pending, []any{pool, int64(d.seq), d.subject, headersJSON(d.headers), d.data, d.stored})
}

// otherPoolLater marks, for each message, whether a message of another
// pool comes after it in msgs.
func otherPoolLater(msgs []jetstream.Msg) []bool {
	out := make([]bool, len(msgs))
	last := ""  // pool of the nearest later message
	other := "" // a later pool other than last, if any
	for i := len(msgs) - 1; i >= 0; i-- {
		pool, _ := stream.PoolOf(msgs[i].Subject())
		out[i] = (last != "" && last != pool) || (other != "" && other != pool)
		if last != pool {
			if last != "" {
				other = last
			}
			last = pool
		}
	}
	return out
}

// dropDeferred forgets a halted pool's deferred messages: a halted pool's
// events are passed over (the catch-up reads them from the log).
func (p *Projector) dropDeferred(b *batch, pool string) {
	for _, d := range p.deferred.pools[pool] {
		p.deferred.bytes -= len(d.data)
		b.pendingDone = append(b.pendingDone, pendingKey{pool, d.seq})
	}
	delete(p.deferred.pools, pool)
}

type pendingKey struct {
	pool string
	seq  uint64
}

var pendingCols = []string{"pool", "seq", "subject", "headers", "body", "stored_at"}

const sqlDeletePending = `DELETE FROM pending_events p USING unnest($1::text[], $2::bigint[]) AS z(pool, seq)
WHERE p.pool = z.pool AND p.seq = z.seq`

// writePending adds the batch's deferred messages and deletes those it
// folded (or dropped). A message deferred and dropped in the same batch
// is neither added nor deleted.
func writePending(ctx context.Context, tx pgx.Tx, b *batch) error {
	rows := b.pending
	var pools []string
	var seqs []int64
	if len(b.pendingDone) > 0 {
		added := map[pendingKey]bool{}
		for _, r := range rows {
			added[pendingKey{r[0].(string), uint64(r[1].(int64))}] = true
		}
		gone := map[pendingKey]bool{}
		for _, k := range b.pendingDone {
			if added[k] {
				gone[k] = true
				continue
			}
			pools, seqs = append(pools, k.pool), append(seqs, int64(k.seq))
		}
		if len(gone) > 0 {
			var keep [][]any
			for _, r := range rows {
				if !gone[pendingKey{r[0].(string), uint64(r[1].(int64))}] {
					keep = append(keep, r)
				}
			}
			rows = keep
		}
	}
	if len(pools) > 0 {
		if _, err := tx.Exec(ctx, sqlDeletePending, pools, seqs); err != nil {
			return fmt.Errorf("delete pending_events: %w", err)
		}
	}
	return copyRows(ctx, tx, "pending_events", pendingCols, rows)
}

// loadDeferred reads this projector's pools' pending_events back into
// memory (start).
func (p *Projector) loadDeferred(ctx context.Context) error {
	p.deferred.reset()
	rows, err := p.db.Query(ctx, `SELECT pool, seq, subject, headers, body, stored_at FROM pending_events ORDER BY pool, seq`)
	if err != nil {
		return fmt.Errorf("read pending_events: %w", err)
	}
	var pool, subject string
	var seq int64
	var headers, body []byte
	var stored time.Time
	_, err = pgx.ForEachRow(rows, []any{&pool, &seq, &subject, &headers, &body, &stored}, func() error {
		if !p.mine(pool) {
			return nil
		}
		var h nats.Header
		if headers != nil {
			if err := json.Unmarshal(headers, &h); err != nil {
				return fmt.Errorf("pending_events.headers of pool %s, sequence %d: %w", pool, seq, err)
			}
		}
		p.deferred.push(pool, deferredMsg{seq: uint64(seq), subject: subject, headers: h, data: append([]byte(nil), body...), stored: stored})
		return nil
	})
	if err != nil {
		return fmt.Errorf("read pending_events: %w", err)
	}
	return nil
}

// deferredCommitted tells a batch of deferred events only (which leaves
// the offset where it is) that it is already committed when the first
// pending row it folds is gone (its answer was lost, or, partitioned,
// another instance folded the same rows).
func deferredCommitted(ctx context.Context, tx pgx.Tx, b *batch) error {
	if len(b.pendingDone) == 0 {
		return nil
	}
	k := b.pendingDone[0]
	var there bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pending_events WHERE pool = $1 AND seq = $2)`, k.pool, int64(k.seq)).Scan(&there); err != nil {
		return err
	}
	if !there {
		return errCommitted
	}
	return nil
}
