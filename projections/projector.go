package projections

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// Projector folds the LEDGER stream into PostgreSQL. Create it with New and
// run it with Run; Applied may be called from any goroutine.
type Projector struct {
	js  jetstream.JetStream
	db  *pgxpool.Pool
	cfg config

	// Owned by Run.
	pools     map[string]*poolState // the resident pools (resident.go)
	lru       list.List             // their names, most recently used first
	committed uint64                // projector_offsets.stream_seq, as committed (the writer's)
	folded    uint64                // last sequence folded and handed to the writer
	cons      jetstream.Consumer
	writer    *writer
	// inflight is what the consumer delivered to this projector and it
	// has not acknowledged (inflight.go); nil with WithUntil.
	inflight *inFlight
	// reconnects is the NATS connection's reconnect count when the stream
	// was last known to hold everything committed (see afterReconnect).
	reconnects uint64
	// pin is the partition consumer's pin this instance last folded
	// under; a message with another pin means the partition came back
	// to it and must be rebuilt from PostgreSQL first (pinned.go).
	pin     string
	holding atomic.Bool // a partition folded here (pinned.go)
	// filters are the partition consumer's filter subjects when the
	// stream's subjects carry the partition (subjects.go), nil when it
	// reads every event; partitionedFrom is the stream's
	// stream.PartitionedFrom.
	filters         []string
	partitionedFrom uint64
	// delivered is the consumer delivery sequence of the last message
	// taken under the current pin, 0 when unknown (subjects.go: gaps).
	delivered uint64
	// advance: the partition folded since its offset was last moved to
	// the stream's end (advanceQuiet); quietSince is when the feed went
	// quiet (or watchStall last ran).
	advance   bool
	lastStall time.Time
	// carry is what the last batch fetched but had no time to fold; deferred
	// the messages set aside for busy pools (fair.go).
	carry    []carried
	deferred backlog
	setAside setAsideCount // what the set-aside gauge adds up (metrics.go)
	// requestsTimedOut counts the NATS requests that timed out in a row
	// (requests.go).
	requestsTimedOut atomic.Int32
	// rereadDelay is the pause before a gap's fill is tried again after
	// the stream did not answer (process), doubling from minBackoff.
	rereadDelay time.Duration
	// stalledAt is the partition offset + 1 seen behind the stream at the
	// last idle spell (0: none), for watchStall.
	stalledAt uint64
	release   chan struct{} // Group.rebalance asks the partition to move

	// committedSeq is committed, for the folding goroutine (eviction)
	// and Resident's callers.
	committedSeq  atomic.Uint64
	residentCount atomic.Int64
	// overlapped counts the batches committed in the transaction the
	// writer's first stage began (pipeline.go).
	overlapped atomic.Int64

	mu      sync.Mutex
	applied map[string]uint64
	halted  map[string]uint64 // halted pool -> sequence whose fold failed

	// offsetMoved is when the committed offset last moved ahead under
	// this projector (errOffsetMoved), zero if never.
	offsetMoved time.Time

	// pools halted before they had a checkpoint (start recreates them halted)
	haltedNoCheckpoint []string
}

func (p *Projector) isHalted(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.halted[name]
	return ok
}

// New returns a projector reading js and writing db.
func New(js jetstream.JetStream, db *pgxpool.Pool, opts ...Option) *Projector {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	// A restored log's keys are in the stream (ledger restore records
	// them): the trusted keys are completed from there when an event
	// names a key they lack.
	cfg.keys.UseHistory(stream.HistorySource(js))
	p := &Projector{js: js, db: db, cfg: cfg, applied: map[string]uint64{}, halted: map[string]uint64{}, release: make(chan struct{}, 1)}
	p.deferred.reset()
	return p
}

// Applied returns the sequence of the last event of pool that is committed
// to PostgreSQL (0 when none is).
func (p *Projector) Applied(pool string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied[pool]
}

func (p *Projector) setApplied(pool string, seq uint64) {
	p.mu.Lock()
	p.applied[pool] = seq
	p.mu.Unlock()
}

// Run rebuilds the pools from PostgreSQL and the log, then projects every
// new event until ctx is done, and returns nil then. NATS or PostgreSQL
// being unavailable is logged and retried with backoff; Run returns an
// error only for what retrying cannot fix (the rebuilt state disagrees with
// the recorded checkpoint, a row PostgreSQL rejects, another projector
// writing the same offset) or when a failpoint fires.
func (p *Projector) Run(ctx context.Context) error {
	if err := p.checkPartition(); err != nil {
		return fatal(err)
	}
	p.reconnects = p.js.Conn().Stats().Reconnects
	defer p.observeStop()
	if p.cfg.until == 0 && !p.cfg.groupLocked {
		// Before anything of the consumer or the projection is touched:
		// a second projector of this name stops here (lock.go).
		var release func()
		var err error
		if ctx, _, release, err = p.lockHeld(ctx); release == nil {
			return err
		}
		defer release()
	}
	err := p.run(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, ErrLockLost) {
		return cause
	}
	return err
}

// run is Run once the lock is held.
func (p *Projector) run(ctx context.Context) error {
	var err error
	if p.cfg.until > 0 {
		err = p.runUntil(ctx)
	} else if p.cfg.part != nil {
		err = p.runPartition(ctx)
	} else {
		err = p.runWhole(ctx)
	}
	if ctx.Err() != nil && !isFatal(err) {
		return nil
	}
	return err
}

// runWhole is run for the unpartitioned projector: one durable
// consumer of every event, fetched a batch at a time.
func (p *Projector) runWhole(ctx context.Context) error {
	stopKeepAlive := p.keepInFlightAlive()
	defer stopKeepAlive() // after the writer's last ack
	err := p.retry(ctx, "start", func() error { return p.start(ctx) })
	if err != nil {
		return err
	}
	p.folded = p.committed
	p.writer = p.startWriter(ctx)
	for err == nil && ctx.Err() == nil {
		err = p.step(ctx)
		if errors.Is(err, errOffsetBehind) || errors.Is(err, errOffsetMoved) {
			err = p.startAgain(ctx, err)
		}
	}
	werr := p.writer.stop()
	if err == nil {
		err = werr
	}
	if err == nil || !isFatal(err) {
		p.saveResident()
	}
	return err
}

// startAgain starts the projector again from what PostgreSQL holds after
// it found the committed offset behind its own (errOffsetBehind):
// PostgreSQL lost commits it had acknowledged, which asynchronous commit
// allows in a crash. Those batches are folded again from the log.
func (p *Projector) startAgain(ctx context.Context, cause error) error {
	_ = p.writer.stop() // it failed with cause: nothing after it was written
	p.mu.Lock()
	p.applied = map[string]uint64{} // start sets what PostgreSQL holds
	p.mu.Unlock()
	if errors.Is(cause, errOffsetBehind) {
		p.cfg.log.Warn("projector: PostgreSQL lost committed batches (a crash under asynchronous commit); starting again from what it holds", "err", cause)
	} else {
		p.cfg.log.Warn("projector: a batch of a projector that stopped landed after this one started; starting again from what PostgreSQL holds", "err", cause)
	}
	if err := p.retry(ctx, "start again", func() error { return p.start(ctx) }); err != nil {
		return err
	}
	p.folded = p.committed
	p.writer = p.startWriter(ctx)
	return nil
}

// step fetches and projects one batch, retrying transient failures.
func (p *Projector) step(ctx context.Context) error {
	msgs, err := p.fetch(ctx)
	now := time.Now()
	for _, m := range msgs {
		p.inflight.add(m, now) // kept alive until acknowledged (inflight.go)
	}
	if rc := p.js.Conn().Stats().Reconnects; rc != p.reconnects {
		// What was fetched is dropped unacked: the consumer is made
		// again after the committed sequence.
		p.reconnects = rc
		return p.afterReconnect(ctx)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		p.cfg.failures.failed(p.offsetName())
		p.cfg.log.Warn("projector: fetch from NATS failed; retrying", "err", err)
		return p.restartConsumer(ctx)
	}
	p.cfg.failures.succeeded(p.offsetName())
	return p.process(ctx, msgs)
}

// fetch returns the next messages: whatever is pending, up to a batch,
// else it waits for the next one, so a lone event is projected at once
// and a backlog goes in full batches.
func (p *Projector) fetch(ctx context.Context) ([]jetstream.Msg, error) {
	room := p.cfg.batchSize - len(p.carry)
	if room <= 0 {
		return p.readAhead(nil), nil // the messages carried over are the next batch
	}
	msgs, err := collect(p.cons.FetchNoWait(room))
	if err == nil {
		msgs = p.readAhead(msgs)
	}
	if err != nil || len(msgs) > 0 || len(p.carry) > 0 || p.deferred.bytes > 0 || len(p.deferred.pools) > 0 {
		return msgs, err // never wait while something is left to fold
	}
	wctx, cancel := context.WithTimeout(ctx, p.cfg.idleWait)
	defer cancel()
	msgs, err = collect(p.cons.Fetch(1, jetstream.FetchContext(wctx)))
	if errors.Is(err, context.DeadlineExceeded) || (err == nil && len(msgs) == 0) {
		return nil, nil
	}
	if err != nil || p.cfg.batchSize == 1 {
		return msgs, err
	}
	more, err := collect(p.cons.FetchNoWait(p.cfg.batchSize - 1))
	return append(msgs, more...), err
}

func collect(b jetstream.MessageBatch, err error) ([]jetstream.Msg, error) {
	if err != nil {
		return nil, err
	}
	var msgs []jetstream.Msg
	for m := range b.Messages() {
		msgs = append(msgs, m)
	}
	if err := b.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return msgs, err
	}
	return msgs, nil
}

// process folds the messages that follow the committed sequence (after
// the messages carried over from the last batch, and each pool's deferred
// messages first: fair.go), writes them in one transaction, then acks.
func (p *Projector) process(ctx context.Context, fetched []jetstream.Msg) error {
	msgs := fetched
	var decoded []*Decoded // the carried messages' decodings
	if len(p.carry) > 0 {
		msgs = make([]jetstream.Msg, 0, len(p.carry)+len(fetched))
		decoded = make([]*Decoded, len(p.carry))
		for i, c := range p.carry {
			msgs, decoded[i] = append(msgs, c.msg), c.dec
		}
		msgs = append(msgs, fetched...)
		p.carry = nil
	}
	if err := p.prefetch(ctx, msgs); err != nil {
		return err
	}
	b := newBatch(p.folded)
	bg := newBudget(p.cfg.batchWork)
	var last jetstream.Msg // highest message covered by the batch or already committed
	gap := false
	fillUnread := false // a gap's fill failed to read the stream
	// an event this build cannot fold: commit what came before, then stop
	beyond := p.othersBeyond(ctx, msgs)
	stop := p.foldDeferred(ctx, b, bg, msgs, beyond)
	later := otherPoolLater(msgs)
	if beyond {
		for i := range later {
			later[i] = true
		}
	}
	rest := -1 // the index of the message being folded: what a break leaves from there on
	took := 0  // messages folded (not set aside) by this batch
	dec, err := p.decodeBatch(msgs, decoded)
	if err != nil {
		return err
	}
	defer dec.abandon()
	for i, m := range msgs {
		rest = i
		if stop != nil {
			break
		}
		seq := dec.seq[i]
		if seq <= b.to { // committed before (redelivery): ack, never apply twice
			p.delivered = dec.delivery[i]
			last, rest = m, -1
			continue
		}
		if bg.done() || took >= p.cfg.batchSize {
			// This batch has folded enough (its work, or a batch of
			// messages: what is read ahead past that is only looked
			// at, fair.go): the rest is the next one's.
			p.carry = dec.carry(msgs, i)
			break
		}
		follows := p.delivered != 0 && dec.delivery[i] != 0 && dec.delivery[i] == p.delivered+1
		p.delivered = dec.delivery[i]
		switch {
		case seq == b.to+1 || p.cfg.part == nil:
		case p.filters != nil && follows:
			// Delivered right after the last message taken: none of the
			// partition's events lies between (subjects.go).
			b.to = seq - 1
		default:
			// A partition consumer is shared: fill the gap from the stream.
			if stop = p.fill(ctx, b, seq, bg); stop != nil {
				// No answer, or no server answering direct gets (while
				// the stream elects a leader or its replicas catch up),
				// as a pool's rebuild retries it.
				fillUnread = !isFatal(stop) && (errors.Is(stop, stream.ErrRead) || errors.Is(stop, stream.ErrNoDirect))
				break
			}
		}
		if stop != nil {
			break
		}
		if seq != b.to+1 {
			gap = true
			break
		}
		dec.wait(i)
		aside := len(b.pending)
		if stop = p.take(ctx, b, bg, &dec.dec[i], later[i]); stop != nil {
			break
		}
		if len(b.pending) == aside {
			took++ // folded, not set aside
		}
		b.to, last = seq, m
		rest = -1
	}
	if stop != nil && errors.Is(stop, signing.ErrHistory) {
		// NATS did not answer for the restored log's keys: commit what
		// came before and read this event again, never refuse it for that.
		p.cfg.log.Warn("projector: could not read the historical signing keys; reading again", "at", b.to+1, "err", stop)
		stop, gap = nil, true
	}
	reread := false
	if stop != nil && fillUnread {
		// A gap's fill went unanswered (the stream electing a leader):
		// commit what came before, keep the rest (alive: inflight.go)
		// and fill again after a pause, never stop for that.
		p.cfg.log.Warn("projector: could not read the stream to fill a gap; reading again", "partition", p.offsetName(), "at", b.to+1, "err", stop)
		p.carry, p.delivered = nil, 0
		if rest >= 0 {
			p.carry = dec.carry(msgs, rest)
		}
		stop, reread = nil, true
	}
	p.evict(b)
	var f *finalRows
	if b.to > b.from || len(b.events) > 0 {
		f = b.finish() // the rows are fixed now: the next fold may go on
	}
	p.observeFold(b, msgs)
	p.folded = b.to
	if err := p.writer.submit(writeJob{b: b, f: f, last: last}); err != nil {
		return err
	}
	if stop != nil {
		if err := p.writer.drain(); err != nil {
			return err
		}
		if ctx.Err() != nil && !isFatal(stop) {
			return ctx.Err() // a pool's load cut short by the shutdown
		}
		return fatalf("%v", stop)
	}
	if b.to > b.from {
		p.advance = true // the partition's offset may move to the stream's end when quiet
	}
	if reread {
		p.rereadDelay = min(max(2*p.rereadDelay, minBackoff), maxBackoff)
		select {
		case <-ctx.Done():
		case <-time.After(p.rereadDelay):
		}
		return nil
	}
	p.rereadDelay = 0
	if gap && p.cfg.part != nil {
		// The rest of the batch is delivered again or read from the
		// stream by the next gap fill, which the unknown delivery
		// sequence makes sure of.
		p.delivered = 0
		if p.inflight != nil {
			if rest >= 0 {
				p.inflight.drop(msgs[rest:]) // let go unacknowledged: NATS may deliver them again
			}
		}
		return nil
	}
	if gap { // out of order delivery: start the consumer again after the commit
		p.cfg.log.Warn("projector: gap in delivered sequences; restarting the consumer", "after", b.to)
		return p.restartConsumer(ctx)
	}
	return nil
}

// take folds a message of the batch, or sets it aside when its pool has
// had its share while others wait (fair.go).
func (p *Projector) take(ctx context.Context, b *batch, bg *budget, d *Decoded, otherLater bool) error {
	pool, err := stream.PoolOf(d.Subject)
	if err == nil && p.mine(pool) && p.shouldDefer(pool, bg, otherLater) {
		p.deferMsg(b, pool, deferredMsg{seq: d.Seq, subject: d.Subject, headers: d.Header, data: d.Data, stored: d.Time, dec: d})
		return nil
	}
	start := time.Now()
	err = p.fold(ctx, b, d)
	bg.charge(pool, time.Since(start))
	return err
}

// afterReconnect runs when the connection to NATS was lost and made
// again: the server may have restarted without the messages it had not
// synced to disk. If the stream now ends before the committed sequence,
// the projector starts over as on a restart (heal, rebuild, verify the
// chain); otherwise it recreates its consumer, whose state may be older
// than the projection.
func (p *Projector) afterReconnect(ctx context.Context) error {
	if err := p.writer.drain(); err != nil {
		return err
	}
	return p.retry(ctx, "check the stream after reconnecting", func() error {
		last, err := p.streamLast(ctx)
		if err != nil {
			return err
		}
		if last >= p.committed {
			return p.resetConsumer(ctx)
		}
		if err := p.start(ctx); err != nil {
			return err
		}
		p.folded = p.committed
		return nil
	})
}

// restartConsumer recreates the durable consumer after everything handed
// to the writer is committed, so it starts right after the committed
// sequence.
func (p *Projector) restartConsumer(ctx context.Context) error {
	if err := p.writer.drain(); err != nil {
		return err
	}
	return p.retry(ctx, "recreate consumer", func() error { return p.resetConsumer(ctx) })
}

// batchDecoding is a fetched batch being decoded and authenticated over
// the cores while the fold takes its messages in order (decision #314):
// decoding, signatures above all, and folding overlap within a batch
// instead of the fold waiting for the whole batch. seq and delivery are
// known at once (the messages' metadata); dec[i] only once wait(i)
// returned.
type batchDecoding struct {
	seq      []uint64
	delivery []uint64 // Decoded.Delivery
	dec      []Decoded
	ready    []chan struct{} // one per chunk of decodeChunk messages
	stop     atomic.Bool
	// need[i]: message i follows the folded sequence, so it is decoded;
	// given[i]: its decoding came with it (carried over); decoded[c]:
	// chunk c was decoded, not spared (read once ready[c] is closed).
	need, given []bool
	decoded     []bool
}

// carried is a message fetched and not folded yet, carried over to the
// next batch with its decoding when this batch had it (nil: the next
// batch decodes it). A batch whose fold is slow carries most of what it
// fetched, and decoding it again each batch spent a core's time on
// signatures checked already.
type carried struct {
	msg jetstream.Msg
	dec *Decoded
}

// carry returns msgs from index from on, to carry over, each with its
// decoding when it is done and final: not when it must be read again
// (Err: the historical keys were not read) or was passed over.
func (d *batchDecoding) carry(msgs []jetstream.Msg, from int) []carried {
	out := make([]carried, len(msgs)-from)
	for i := from; i < len(msgs); i++ {
		out[i-from].msg = msgs[i]
		if d.doneAt(i) && d.dec[i].Err == nil && !d.dec[i].Passed {
			dec := d.dec[i]
			out[i-from].dec = &dec
		}
	}
	return out
}

// doneAt tells, without waiting, whether message i is decoded.
func (d *batchDecoding) doneAt(i int) bool {
	if !d.need[i] {
		return false
	}
	if d.given[i] {
		return true
	}
	select {
	case <-d.ready[i/decodeChunk]:
		return d.decoded[i/decodeChunk]
	default:
		return false
	}
}

// wait returns once dec[i] is decoded.
func (d *batchDecoding) wait(i int) { <-d.ready[i/decodeChunk] }

// abandon spares the decoding of the chunks no worker started: the rest
// of the batch is not folded now (carried over, or the batch stopped).
func (d *batchDecoding) abandon() { d.stop.Store(true) }

// decodeBatch starts decoding and authenticating a fetched batch ahead
// of its fold, a chunk per core at a time, in order; the messages at or
// below the folded sequence (redeliveries) carry only their sequence.
// given holds the decodings of the first messages carried over from the
// batch before (nil where there is none); those are not decoded again.
func (p *Projector) decodeBatch(msgs []jetstream.Msg, given []*Decoded) (*batchDecoding, error) {
	n := len(msgs)
	chunks := (n + decodeChunk - 1) / decodeChunk
	d := &batchDecoding{seq: make([]uint64, n), delivery: make([]uint64, n), dec: make([]Decoded, n), ready: make([]chan struct{}, chunks),
		need: make([]bool, n), given: make([]bool, n), decoded: make([]bool, chunks)}
	todo := make([]stream.Msg, n)
	need := d.need
	for i, m := range msgs {
		md, err := m.Metadata()
		if err != nil {
			return nil, fatalf("message without JetStream metadata: %v", err)
		}
		seq := md.Sequence.Stream
		d.seq[i], d.dec[i].Seq = seq, seq
		if md.NumDelivered == 1 { // a redelivery follows nothing (subjects.go)
			d.delivery[i] = md.Sequence.Consumer
		}
		if seq > p.folded {
			need[i] = true
			if i < len(given) && given[i] != nil && given[i].Seq == seq {
				d.dec[i], d.given[i] = *given[i], true
				d.dec[i].Delivery = d.delivery[i]
				continue
			}
			todo[i] = stream.Msg{Seq: seq, Subject: m.Subject(), Header: m.Headers(), Data: m.Data(), Time: md.Timestamp}
		}
	}
	keys, want := p.cfg.keys, p.wants()
	decodeChunkAt := func(c int) {
		if !d.stop.Load() {
			d.decoded[c] = true
			for i := c * decodeChunk; i < min((c+1)*decodeChunk, n); i++ {
				if need[i] && !d.given[i] {
					d.dec[i] = Decode(keys, want, todo[i])
					d.dec[i].Delivery = d.delivery[i]
				}
			}
		}
		close(d.ready[c])
	}
	for c := range d.ready {
		d.ready[c] = make(chan struct{})
	}
	workers := min(runtime.GOMAXPROCS(0), chunks)
	if keys == nil && n < parallelFrom {
		workers = 1 // a few microseconds each: not worth a goroutine
	}
	if workers <= 1 {
		for c := range chunks {
			decodeChunkAt(c)
		}
		return d, nil
	}
	var next atomic.Int64 // the chunks are taken in order: the first ones are ready first
	for range workers {
		go func() {
			for {
				c := int(next.Add(1) - 1)
				if c >= chunks {
					return
				}
				decodeChunkAt(c)
			}
		}()
	}
	return d, nil
}

// wants is the filter of the messages this projector folds: its
// partition's pools, and subjects that name no pool (skipped with a
// warning); nil, every message, when it is not partitioned.
func (p *Projector) wants() func(subject string) bool {
	if p.cfg.part == nil {
		return nil
	}
	return func(subject string) bool {
		pool, err := stream.PoolOf(subject)
		return err != nil || p.mine(pool)
	}
}

// readDecoded reads the stream's messages matching filter from from to
// to, decoded and authenticated ahead of fn (ReadDecoded).
func (p *Projector) readDecoded(ctx context.Context, filter string, from, to uint64, fn func(*Decoded) error) error {
	return ReadDecoded(ctx, p.js.Conn(), p.cfg.keys, p.wants(), filter, from, to, fn)
}

func (p *Projector) fold(ctx context.Context, b *batch, d *Decoded) error {
	if d.Passed {
		return nil // another partition's event
	}
	name, st, ok := d.Pool, d.Stored, d.OK
	subject, h, seq := d.Subject, d.Header, d.Seq
	if d.Err != nil {
		return d.Err // the historical keys were not read: neither folded nor refused
	}
	if !ok {
		p.cfg.log.Warn("projector: message on a subject that names no pool; skipped", "seq", seq, "subject", subject)
		return nil
	}
	ps, err := p.poolFor(ctx, name)
	if err != nil {
		return err
	}
	if seq <= ps.lastSeq {
		// Folded before: a partition's offset can trail its pools'
		// checkpoints (a new partitioning starts its rows at 0).
		return nil
	}
	if err := b.add(name, ps, st, storedMsg{subject: subject, headers: headersJSON(h)}, p.cfg.snapshotRule(), p.cfg.foldHook); err != nil {
		return err
	}
	if h, ok := b.halts[name]; ok && ps.halted && !p.isHalted(name) {
		p.cfg.log.Error("projector: pool halted; the other pools go on", "pool", name, "seq", h.seq, "reason", h.reason)
		p.mu.Lock()
		p.halted[name] = h.seq
		p.mu.Unlock()
		p.dropDeferred(b, name)
	}
	return nil
}

// commit writes the batch, retrying while PostgreSQL is unavailable. The
// rows are computed once; a retry writes the same rows.
func (p *Projector) commit(ctx context.Context, b *batch, f *finalRows) error {
	if b.to == b.from && !b.catchUp && len(b.events) == 0 && len(b.pendingDone) == 0 {
		return p.commitSaved(ctx, b)
	}
	start := time.Now()
	err := p.retry(ctx, "write batch", func() error {
		var err error
		if f != nil && p.pipelined(b, f) {
			err = p.writePipelined(ctx, b, f)
		} else {
			err = pgx.BeginFunc(ctx, p.db, func(tx pgx.Tx) error { return p.writeTx(ctx, tx, b, f) })
		}
		if errors.Is(err, errCommitted) {
			return nil // the previous attempt's commit went through
		}
		return classify(err)
	})
	if err != nil {
		return err
	}
	return p.committedBatch(b, start)
}

// committedBatch records that batch b, whose write began at start, is
// committed.
func (p *Projector) committedBatch(b *batch, start time.Time) error {
	p.committed = b.to
	p.committedSeq.Store(b.to)
	p.setAside.committed(p, len(b.pendingDone))
	for name, pb := range b.pools {
		p.setApplied(name, pb.lastSeq)
	}
	p.observeCommit(b, time.Since(start))
	return p.fail(StageAfterCommitBeforeAck)
}

// commitPrepared commits batch b in pre, the transaction the writer's
// first stage began and appended b's new rows in (pipeline.go); without
// pre, or when finishing it fails in a way worth retrying (it is rolled
// back), it is commit's: the batch is written whole, the offset checked
// first.
func (p *Projector) commitPrepared(ctx context.Context, b *batch, f *finalRows, pre pgx.Tx) error {
	if pre == nil {
		return p.commit(ctx, b, f)
	}
	start := time.Now()
	err := p.finishPrepared(ctx, pre, b, f)
	if err == nil || errors.Is(err, errCommitted) {
		p.cfg.failures.succeeded(p.offsetName())
		p.overlapped.Add(1)
		return p.committedBatch(b, start)
	}
	if err = classify(err); isFatal(err) {
		return err // a failpoint, a row PostgreSQL rejects: as commit returns it
	}
	return p.commit(ctx, b, f)
}

// finishPrepared checks the offset in tx (the batch before is
// committed), writes the rest of batch b and commits, or rolls back.
func (p *Projector) finishPrepared(ctx context.Context, tx pgx.Tx, b *batch, f *finalRows) error {
	err := p.checkOffset(ctx, tx, b)
	if err == nil {
		err = p.writeChanges(ctx, tx, b, f)
	}
	if err == nil {
		return tx.Commit(ctx)
	}
	_ = tx.Rollback(context.WithoutCancel(ctx))
	return err
}

// ack acknowledges everything up to m (AckAll). A lost ack only means a
// redelivery, which process skips.
func (p *Projector) ack(m jetstream.Msg) {
	if m == nil {
		return
	}
	if p.cfg.dropAck == nil || !p.cfg.dropAck() { // tests: sent, and lost on its way
		if err := m.Ack(); err != nil {
			// Still held (inflight.go) until the next ack covers them.
			p.cfg.log.Warn("projector: ack failed; the messages will be redelivered and skipped", "err", err)
			return
		}
	}
	if p.inflight != nil {
		if md, err := m.Metadata(); err == nil {
			p.inflight.ackedTo(md.Sequence.Stream)
		}
	}
}

func (p *Projector) fail(stage string) error {
	if p.cfg.failpoint == nil {
		return nil
	}
	if err := p.cfg.failpoint(stage); err != nil {
		return fatal(fmt.Errorf("failpoint %s: %w", stage, err))
	}
	return nil
}

// resetConsumer (re)creates the durable consumer so that it delivers from
// the committed sequence + 1: a durable's start cannot be moved, and
// PostgreSQL, not the consumer's ack floor, says where the projection is.
func (p *Projector) resetConsumer(ctx context.Context) error {
	_, err := request(ctx, p, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, p.js.DeleteConsumer(ctx, stream.Name, p.cfg.name)
	})
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("delete consumer %s: %w", p.cfg.name, p.consumerRefused(err, p.cfg.name))
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       p.cfg.name,
		Description:   "ledger projector: folds the log into PostgreSQL",
		FilterSubject: "ledger.>",
		AckPolicy:     jetstream.AckAllPolicy,
		AckWait:       p.cfg.ackWait,
		MaxAckPending: p.maxAckPending(),
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   p.committed + 1,
	}
	cons, err := request(ctx, p, func(ctx context.Context) (jetstream.Consumer, error) {
		return p.js.CreateConsumer(ctx, stream.Name, cfg)
	})
	if err != nil {
		return fmt.Errorf("create consumer %s: %w", p.cfg.name, p.consumerRefused(err, p.cfg.name))
	}
	p.cons = cons
	p.carry = nil // delivered again by the new consumer
	if p.inflight != nil {
		p.inflight.reset() // likewise
	}
	return nil
}
