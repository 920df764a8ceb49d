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

// One busy pool does not hold the others back (docs/decisions.md #184,
// #504). The stream is one log, and a projection that only ever commits
// a prefix of it would make every pool wait for the slowest: a pool whose
// events take seconds to fold would put every other pool seconds behind.
// So a batch is bounded by the work of folding it, and a pool by its
// share of the projector's time, its folds and its writes:
//
//   - A batch folds for at most WithBatchWork (250 ms); the messages
//     fetched after that wait in memory for the next batch (carry: not
//     acked, not below the offset).
//   - A pool has a credit of the projector's time (shares): a quarter of
//     a batch at most, given back at a quarter of the clock's pace. Each
//     message it folds costs what folding it took and what writing its
//     rows will take (rows times the writer's measured time per row):
//     a pool at the limits writes thousands of rows an event, which the
//     other pools' events of its batch would wait for.
//   - Out of credit, while another pool's message waits behind it in the
//     batch, or another pool was folded within the last four batches'
//     work (recentOthers), its messages are set aside (deferred): kept
//     in memory, in order, and in pending_events, written with the batch
//     that passes them, so the offset moves past them and PostgreSQL
//     still holds every message up to it. The next batches fold each
//     pool's deferred messages first, as its credit allows, before its
//     later messages, which are deferred too while any wait: a pool's
//     events are always folded in order. While nothing else can be
//     folded the projector waits for the first credit to come back
//     (fetch), taking any other pool's event that comes meanwhile.
//   - Alone, a busy pool folds as fast as before: nothing is deferred
//     when no other pool's message waits behind it and no other pool was
//     folded lately.
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

// budget is the folding time a batch has left.
type budget struct {
	batch, spent time.Duration
}

func newBudget(batch time.Duration) *budget { return &budget{batch: batch} }

func (bg *budget) charge(d time.Duration) { bg.spent += d }

func (bg *budget) done() bool { return bg.spent >= bg.batch }

// shares is each pool's credit of the projector's time (#504): at most a
// quantum (a quarter of a batch's work), given back at a quarter of the
// clock's pace, spent by what a pool's messages cost to fold and write,
// down to maxDebt below nothing (so a pool is never held back longer than
// four times that after one costly event).
type shares struct {
	quantum, maxDebt, recent time.Duration
	pools                    map[string]share // the pools short of a full credit
	swept                    time.Time
	// the last two pools folded, the latest first, and when
	last [2]folded
}

type share struct {
	credit time.Duration
	at     time.Time
}

type folded struct {
	pool string
	at   time.Time
}

func newShares(batchWork time.Duration) shares {
	return shares{quantum: batchWork / 4, maxDebt: 4 * batchWork, recent: 4 * batchWork, pools: map[string]share{}}
}

// credit is what pool may still spend at now.
func (s *shares) credit(pool string, now time.Time) time.Duration {
	sh, ok := s.pools[pool]
	if !ok {
		return s.quantum
	}
	return min(s.quantum, sh.credit+now.Sub(sh.at)/4)
}

// creditIn is how long until pool has credit again (0: it has).
func (s *shares) creditIn(pool string, now time.Time) time.Duration {
	c := s.credit(pool, now)
	if c > 0 {
		return 0
	}
	return -4*c + time.Millisecond
}

// spend charges pool with cost at now and notes that it was folded.
func (s *shares) spend(pool string, cost time.Duration, now time.Time) {
	s.pools[pool] = share{credit: max(s.credit(pool, now)-cost, -s.maxDebt), at: now}
	if s.last[0].pool != pool {
		s.last[1] = s.last[0]
	}
	s.last[0] = folded{pool, now}
	if now.Sub(s.swept) > time.Second { // forget the pools whose credit is whole again
		for name := range s.pools {
			if s.credit(name, now) >= s.quantum {
				delete(s.pools, name)
			}
		}
		s.swept = now
	}
}

// othersIn is how long other pools than pool still count as active: one
// was folded within the last recent (0: none was).
func (s *shares) othersIn(pool string, now time.Time) time.Duration {
	at := s.last[0].at
	if s.last[0].pool == pool {
		at = s.last[1].at
	}
	if at.IsZero() {
		return 0
	}
	return max(0, s.recent-now.Sub(at))
}

// defaultRowCost is the writer's time per row until it measured one
// (#504): about what a batch of a pool at the limits took per row here.
const defaultRowCost = 20 * time.Microsecond

// rowCostFrom is the fewest rows of a batch whose commit time tells the
// time per row (in a smaller one the round trips dominate).
const rowCostFrom = 1000

// noteRowCost folds the time per row of a committed batch of rows rows
// that took took into the writer's estimate.
func (p *Projector) noteRowCost(rows int, took time.Duration) {
	if rows < rowCostFrom {
		return
	}
	per := min(max(took/time.Duration(rows), time.Microsecond), time.Millisecond) // a retried commit tells nothing
	old := time.Duration(p.rowCost.Load())
	if old == 0 {
		old = defaultRowCost
	}
	p.rowCost.Store(int64((3*old + per) / 4))
}

// writeCost is the estimated time the writer takes for rows rows.
func (p *Projector) writeCost(rows int) time.Duration {
	per := time.Duration(p.rowCost.Load())
	if per == 0 {
		per = defaultRowCost
	}
	return time.Duration(rows) * per
}

// foldCharged folds d into b, charging its pool's share and the batch's
// budget with what it costs.
func (p *Projector) foldCharged(ctx context.Context, b *batch, bg *budget, pool string, d *Decoded) error {
	start, rows := time.Now(), b.rows
	err := p.fold(ctx, b, d)
	now := time.Now()
	took := now.Sub(start)
	bg.charge(took)
	if pool != "" {
		p.shares.spend(pool, took+p.writeCost(b.rows-rows), now)
	}
	return err
}

// othersWait tells whether another pool than pool has messages waiting
// (deferred, or among those fetched) or was folded lately.
func (p *Projector) othersWait(pool string, fetched map[string]bool, now time.Time) bool {
	if len(p.deferred.pools) > 1 || (len(p.deferred.pools) == 1 && !p.deferred.has(pool)) {
		return true
	}
	for other := range fetched {
		if other != pool {
			return true
		}
	}
	return p.shares.othersIn(pool, now) > 0
}

// deferredWait is how long until a deferred message may be folded: 0
// when one may now (its pool has credit, or nothing else is going on).
func (p *Projector) deferredWait(now time.Time) time.Duration {
	wait := time.Duration(-1)
	for pool, ds := range p.deferred.pools {
		if len(ds) == 0 {
			continue
		}
		in := p.shares.creditIn(pool, now)
		if len(p.deferred.pools) == 1 {
			in = min(in, p.shares.othersIn(pool, now))
		}
		if wait < 0 || in < wait {
			wait = in
		}
	}
	return max(wait, 0)
}

// fetchedPools is the pools of the messages of msgs.
func fetchedPools(msgs []jetstream.Msg) map[string]bool {
	out := map[string]bool{}
	for _, m := range msgs {
		if pool, err := stream.PoolOf(m.Subject()); err == nil {
			out[pool] = true
		}
	}
	return out
}

// foldDeferred folds the deferred messages of each pool, the one waiting
// longest first, each as its credit allows (or while no other pool
// waits: fetched are the pools of the batch's fetched messages), and
// notes that their pending_events rows go.
func (p *Projector) foldDeferred(ctx context.Context, b *batch, bg *budget, fetched map[string]bool) error {
	for _, pool := range p.deferred.order() {
		for p.deferred.has(pool) && !bg.done() {
			if now := time.Now(); p.shares.credit(pool, now) <= 0 && p.othersWait(pool, fetched, now) {
				break
			}
			d := p.deferred.pools[pool][0]
			p.deferred.pools[pool] = p.deferred.pools[pool][1:]
			p.deferred.bytes -= len(d.data)
			b.pendingDone = append(b.pendingDone, pendingKey{pool, d.seq})
			dec := d.dec
			if dec == nil {
				m := Decode(p.cfg.keys, p.wants(), stream.Msg{Seq: d.seq, Subject: d.subject, Header: d.headers, Data: d.data, Time: d.stored})
				dec = &m
			}
			if err := p.foldCharged(ctx, b, bg, pool, dec); err != nil {
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
		}
		if !p.deferred.has(pool) {
			delete(p.deferred.pools, pool)
		}
	}
	return nil
}

// shouldDefer tells whether a message of pool waits: the pool has
// deferred messages (order), or it is out of credit while another pool's
// message comes later in the batch (otherLater) or another pool was
// folded lately.
func (p *Projector) shouldDefer(pool string, otherLater bool) bool {
	if ps := p.pools[pool]; ps != nil && ps.halted {
		return false // passed over anyway
	}
	if p.deferred.has(pool) {
		return true
	}
	now := time.Now()
	return p.shares.credit(pool, now) <= 0 && (otherLater || p.shares.othersIn(pool, now) > 0) && p.deferred.bytes < maxDeferredBytes
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
