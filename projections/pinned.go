package projections

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/stream"
)

// pinHeader is the header the server puts on each message of a
// pinned-client consumer: the pin of the instance it is delivered to.
const pinHeader = "Nats-Pin-Id"

// errFeed: the partition's message feed ended (consumer deleted, bad
// request); the partition is opened again.
var errFeed = errors.New("projector: partition feed ended")

// errReleased: the instance gave the partition up (Group.rebalance) so
// that another one takes it.
var errReleased = errors.New("projector: partition released to another instance")

// runPartition is Run for one partition (partition.go): it pulls in the
// partition's priority group, rebuilds the partition's pools from
// PostgreSQL whenever it becomes the pinned instance (again), and folds
// what it is given.
func (p *Projector) runPartition(ctx context.Context) error {
	// Refused beside another partitioning now, not when a first event
	// comes: a partition that reads only its own events may wait long.
	if err := p.retry(ctx, "check the partitioning", func() error {
		tx, err := p.db.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		return p.checkPartitioning(ctx, tx)
	}); err != nil {
		return err
	}
	if err := p.healIfBehind(ctx); err != nil {
		return err
	}
	if err := p.retry(ctx, "open the partition consumer", func() error { return p.ensurePartitionConsumer(ctx) }); err != nil {
		return err
	}
	f, err := p.openFeed()
	if err != nil {
		return err
	}
	defer func() {
		f.stop()
		if n := f.inflight.held(); n > 0 {
			// Killed, released, lost or fenced: what it held comes again
			// to the next holder after the ack wait (and is skipped if
			// folded). Tests add these up (TestClusterSurvivesLeaderAndProjectorLoss).
			p.cfg.log.Info("projector: left the partition holding messages not acknowledged; NATS delivers them again",
				"partition", p.offsetName(), "instance", p.cfg.instance, "unacknowledged", n)
		}
	}()
	p.writer = p.startWriter(ctx)
	for err == nil && ctx.Err() == nil {
		err = p.stepPartition(ctx, f)
	}
	werr := p.writer.stop()
	if err == nil {
		err = werr
	}
	if p.holding.Load() && (err == nil || !isFatal(err)) {
		p.saveResident()
	}
	return err
}

func (p *Projector) stepPartition(ctx context.Context, f *feed) error {
	idle := p.cfg.idleWait
	quiet := p.filters != nil && p.advance && p.holding.Load()
	if quiet {
		idle = quietWait // then move the offset to the stream's end (subjects.go)
	}
	if len(p.carry) > 0 || len(p.deferred.pools) > 0 {
		idle = time.Millisecond // something is left to fold: do not wait for more
	}
	msgs, err := f.next(ctx, p.release, max(p.cfg.batchSize-len(p.carry), 0), idle)
	if errors.Is(err, errReleased) {
		return p.giveUp(ctx)
	}
	if err != nil {
		return err
	}
	if rc := p.js.Conn().Stats().Reconnects; rc != p.reconnects {
		// The server may have restarted without its unsynced tail: heal
		// it now (appends are held until then, so no message may come to
		// wake a partition), and rebuild from PostgreSQL before folding
		// more.
		p.reconnects, p.pin = rc, ""
		if err := p.writer.drain(); err != nil {
			return err
		}
		if err := p.healIfBehind(ctx); err != nil {
			return err
		}
	}
	if len(msgs) == 0 {
		if len(p.carry) > 0 || len(p.deferred.pools) > 0 {
			return p.process(ctx, nil) // what is left to fold goes on
		}
		if quiet {
			if err := p.advanceQuiet(ctx); err != nil {
				return err
			}
		}
		if time.Since(p.lastStall) < p.cfg.idleWait {
			return nil // the stall check keeps its own pace, whatever the feed's waits
		}
		p.lastStall = time.Now()
		return p.watchStall(ctx)
	}
	p.stalledAt = 0
	if pin := msgs[0].Headers().Get(pinHeader); pin == "" || pin != p.pin {
		if err := p.takeOver(ctx); err != nil {
			return err
		}
		p.pin = pin
	}
	return p.process(ctx, msgs)
}

// healIfBehind heals a stream that ends before the furthest offset of
// the projection, whoever holds the partitions: the API holds appends
// until then, so waiting for a partition's next message would wait
// forever. The partitions of a group heal one at a time; each checks
// first without the lock, so none waits behind another's requests
// while the stream is not behind (requests.go).
func (p *Projector) healIfBehind(ctx context.Context) error {
	return p.retry(ctx, "check the stream against the projection", func() error {
		var furthest int64
		if err := p.db.QueryRow(ctx, `SELECT coalesce(max(stream_seq), 0) FROM projector_offsets`).Scan(&furthest); err != nil {
			return err
		}
		last, err := p.streamLast(ctx)
		if err != nil || last >= uint64(furthest) {
			return err
		}
		if l := p.cfg.healLock; l != nil {
			l.Lock()
			defer l.Unlock()
		}
		_, err = p.Heal(ctx)
		return err
	})
}

// takeOver rebuilds the partition's pools from what PostgreSQL holds:
// another instance may have folded the partition since this one last did.
func (p *Projector) takeOver(ctx context.Context) error {
	if err := p.writer.drain(); err != nil {
		return err
	}
	if err := p.retry(ctx, "take the partition over", func() error { return p.start(ctx) }); err != nil {
		return err
	}
	p.folded = p.committed
	p.delivered = 0 // the first message is checked against the stream
	p.advance = true
	p.holding.Store(true)
	p.cfg.log.Info("projector: holds partition", "partition", p.offsetName(), "instance", p.cfg.instance, "from_seq", p.committed+1)
	return nil
}

// giveUp commits what was folded, unpins the partition so that the next
// message goes to another instance, and ends Run with errReleased.
func (p *Projector) giveUp(ctx context.Context) error {
	if err := p.writer.drain(); err != nil {
		return err
	}
	p.saveResident() // the next holder takes the pools up from these
	p.holding.Store(false)
	_, err := request(ctx, p, func(ctx context.Context) (struct{}, error) {
		s, err := p.js.Stream(ctx, stream.Name)
		if err == nil {
			err = s.UnpinConsumer(ctx, p.offsetName(), PriorityGroup)
		}
		return struct{}{}, err
	})
	if err != nil {
		// Not unpinned: the pin lapses by itself after the pinned TTL.
		p.cfg.log.Warn("projector: unpin failed", "partition", p.offsetName(), "err", err)
	}
	p.cfg.log.Info("projector: released partition", "partition", p.offsetName(), "instance", p.cfg.instance, "at_seq", p.committed)
	return errReleased
}

// ensurePartitionConsumer opens the partition's durable consumer (making
// it when it does not exist) and aligns it with the partition's offset
// in PostgreSQL (alignPartitionConsumer).
//
// The consumer filters to the partition's subjects when the stream's
// subjects carry partitions that serve it (subjects.go), else to every
// event; one made otherwise (by an older release, or before the stream
// was migrated) is given the filters it needs now, keeping its place.
func (p *Projector) ensurePartitionConsumer(ctx context.Context) error {
	name := p.offsetName()
	s, err := request(ctx, p, func(ctx context.Context) (jetstream.Stream, error) { return p.js.Stream(ctx, stream.Name) })
	if err != nil {
		return fmt.Errorf("stream %s: %w", stream.Name, err)
	}
	p.filters = p.partitionFilters(s.CachedInfo().Config)
	p.partitionedFrom = stream.PartitionedFrom(s.CachedInfo().Config)
	want := p.partitionConsumerConfig()
	consumer := func(ctx context.Context) (jetstream.Consumer, error) { return p.js.Consumer(ctx, stream.Name, name) }
	cons, err := request(ctx, p, consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = request(ctx, p, func(ctx context.Context) (jetstream.Consumer, error) {
			return p.js.CreateConsumer(ctx, stream.Name, want)
		})
		if errors.Is(err, jetstream.ErrConsumerExists) {
			cons, err = request(ctx, p, consumer) // another instance made it first
		}
	}
	if err != nil {
		return fmt.Errorf("open consumer %s: %w", name, p.consumerRefused(err, name))
	}
	if cfg := cons.CachedInfo().Config; cfg.AckWait != want.AckWait || !slices.Equal(consumerFilters(cfg), consumerFilters(want)) {
		// Made by an older release (4 TTLs, every event), with another
		// TTL, or before the stream had partitions.
		cfg.AckWait = want.AckWait
		cfg.FilterSubject, cfg.FilterSubjects = want.FilterSubject, want.FilterSubjects
		update := func(ctx context.Context) (jetstream.Consumer, error) {
			return p.js.UpdateConsumer(ctx, stream.Name, cfg)
		}
		if cons, err = request(ctx, p, update); err != nil {
			return fmt.Errorf("set the ack wait and filters of consumer %s: %w", name, err)
		}
	}
	p.cons = cons
	return p.alignPartitionConsumer(ctx)
}

// partitionAckWait is the partition consumer's ack wait: the pinned TTL.
// What an instance that died had in flight (delivered, not committed)
// comes again after it, and NATS unpins the dead instance after the
// same TTL: so when nothing new is appended to wake the partition, the
// redelivery is what pins the next instance, and the partition is
// folded again within the TTL of the death (issue 20; with four TTLs a
// quiet partition waited 20 s at the default). A live holder that takes
// longer than that to commit is delivered its messages again; it skips
// what it has folded.
func (p *Projector) partitionAckWait() time.Duration { return p.cfg.pinnedTTL }

// watchStall runs when this instance's feed of the partition stayed idle
// for a while. If the stream holds events after the partition's offset
// and the offset did not move since the previous idle spell, nobody is
// folding them: messages may be stuck as pending on an instance that died
// (until the ack wait), or held by a reset the server did not act on.
// The partition is then handed back (delivered again from its offset),
// which costs a live holder only skipped redeliveries. Whatever the
// cause, a partition cannot stay stuck longer than two idle spells.
func (p *Projector) watchStall(ctx context.Context) error {
	committed, err := p.storedOffset(ctx)
	if err != nil {
		return nil // PostgreSQL is down: the commit path reports it
	}
	last, err := p.streamLast(ctx)
	if err != nil || last <= committed {
		p.stalledAt = 0
		return nil
	}
	if p.filters != nil {
		// The stream moved on; the partition is stalled only if some of
		// its own events lie after its offset. If none does, its offset
		// moves: by its holder when quiet, by any instance when nobody
		// holds it.
		own, err := p.ownAfter(ctx, committed+1, last)
		if err != nil {
			return nil // NATS away: the next spell checks again
		}
		if !own {
			p.stalledAt = 0
			if p.holding.Load() {
				return p.advanceQuiet(ctx)
			}
			if err := p.advanceUnheld(ctx, committed, last); err != nil {
				p.cfg.log.Warn("projector: could not move the offset of a partition nobody holds", "partition", p.offsetName(), "err", err)
			}
			return nil
		}
	}
	if p.stalledAt != committed+1 {
		p.stalledAt = committed + 1 // seen once: wait one more spell
		return nil
	}
	p.cfg.log.Warn("projector: partition stalled behind the stream; delivering again from its offset",
		"partition", p.offsetName(), "committed", committed, "stream_last_seq", last)
	if err := p.resetPartition(ctx, committed+1); err != nil {
		p.cfg.log.Warn("projector: could not deliver the partition again; its messages come after the ack wait", "partition", p.offsetName(), "err", err)
	}
	p.stalledAt = 0
	return nil
}

// storedOffset is the partition's offset in PostgreSQL (0 before its
// first commit).
func (p *Projector) storedOffset(ctx context.Context) (uint64, error) {
	var committed int64
	err := p.db.QueryRow(ctx, `SELECT stream_seq FROM projector_offsets WHERE name = $1`, p.offsetName()).Scan(&committed)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return uint64(committed), err
}

// resetPartition makes the partition's consumer deliver again from seq:
// whoever holds the partition skips what it folded already. Only where
// nobody is reading it (new, ahead of the database, stalled): a reset
// under a consumer being read and acknowledged mixes delivery sequences
// from before and after it, which stalls it.
func (p *Projector) resetPartition(ctx context.Context, seq uint64) error {
	_, err := request(ctx, p, func(ctx context.Context) (struct{}, error) {
		s, err := p.js.Stream(ctx, stream.Name)
		if err == nil {
			_, err = s.ResetConsumerToSequence(ctx, p.offsetName(), seq)
		}
		return struct{}{}, err
	})
	if err != nil {
		return fmt.Errorf("reset consumer %s to %d: %w", p.offsetName(), seq, err)
	}
	return nil
}

// alignPartitionConsumer resets the partition's consumer to the
// partition's offset + 1 when it is new (so it does not deliver what is
// projected already) or when it has acknowledged more than PostgreSQL
// holds (the database was restored from an older backup): otherwise no
// message would ever come again for what the database lost. A consumer
// in normal use acknowledges only after the commit, so it is never
// ahead, and is left alone.
func (p *Projector) alignPartitionConsumer(ctx context.Context) error {
	// The consumer first: what it acknowledged was committed before, so
	// the offset read after it is at least as far unless the database
	// went back.
	info, err := request(ctx, p, p.cons.Info)
	if err != nil {
		return fmt.Errorf("consumer %s: %w", p.offsetName(), err)
	}
	committed, err := p.storedOffset(ctx)
	if err != nil {
		return err
	}
	fresh := info.Delivered.Stream == 0 && committed > 0
	ahead := info.AckFloor.Stream > committed
	if !fresh && !ahead {
		return nil
	}
	if err := p.resetPartition(ctx, committed+1); err != nil {
		return err
	}
	if ahead {
		p.cfg.log.Warn("projector: partition consumer was ahead of PostgreSQL (restored from an older backup?); delivering again after the offset",
			"partition", p.offsetName(), "acked", info.AckFloor.Stream, "committed", committed)
	}
	return nil
}

// fill folds into b the messages b.to+1 .. to-1 that the partition
// consumer did not deliver in order (an instance that died had them in
// flight; they come again later and are skipped), read from the stream
// with direct gets (stream.Read: no consumer).
func (p *Projector) fill(ctx context.Context, b *batch, to uint64, bg *budget) error {
	if p.filters != nil {
		return p.fillFiltered(ctx, b, to, bg) // the partition's own subjects only
	}
	from := b.to + 1
	// The fold's own error goes to process as it is, as any fold's: a
	// fatal one stays fatal, and a pool's load cut short by the
	// projector's stop is the stop (made fatal here, it ended Run with
	// an error, its pools unsaved).
	var folding error
	err := p.readDecoded(ctx, "ledger.>", from, to-1, func(m *Decoded) error {
		if m.Seq != b.to+1 {
			return fmt.Errorf("read the stream from %d: message %d came after %d", from, m.Seq, b.to)
		}
		if folding = p.take(ctx, b, bg, m, true); folding != nil {
			return folding
		}
		b.to = m.Seq
		return nil
	})
	if folding != nil {
		return folding
	}
	if err != nil {
		return fmt.Errorf("read the stream from %d: %w", from, err)
	}
	if b.to+1 < to {
		return fmt.Errorf("read the stream from %d: no message after %d before %d", from, b.to, to)
	}
	return nil
}

// feed turns the partition consumer's pull iterator into batches: the
// first message waited for, then whatever else is already buffered.
type feed struct {
	it       jetstream.MessagesContext
	msgs     chan jetstream.Msg
	errs     chan error
	done     chan struct{}
	stopping atomic.Bool
	inflight *inFlight     // what was delivered here and is not acknowledged
	kept     chan struct{} // closed when keepAlive has returned
}

func (p *Projector) openFeed() (*feed, error) {
	// Pull requests expire well within the pinned TTL: each new one
	// renews the pin, so an idle but live instance keeps its partitions.
	// Heartbeats: 500ms at least, half the expiry at most (nats.go's
	// bounds).
	expiry := p.cfg.pinnedTTL / 2
	it, err := p.cons.Messages(jetstream.PullPriorityGroup(PriorityGroup), jetstream.PullMaxMessages(2*p.cfg.batchSize),
		jetstream.PullExpiry(expiry), jetstream.PullHeartbeat(max(expiry/4, 500*time.Millisecond)))
	if err != nil {
		return nil, fmt.Errorf("pull from consumer %s: %w", p.offsetName(), err)
	}
	// The buffer holds what the consumer lets be unacknowledged at once
	// (MaxAckPending), so that every message delivered is seen, and kept
	// from being delivered again, at once (inflight.go).
	f := &feed{it: it, msgs: make(chan jetstream.Msg, p.maxAckPending()), errs: make(chan error, 1), done: make(chan struct{}),
		inflight: newInFlight(p.partitionAckWait()), kept: make(chan struct{})}
	p.inflight = f.inflight
	go f.run()
	go func() {
		defer close(f.kept)
		f.inflight.keepAlive(f.done)
	}()
	return f, nil
}

func (f *feed) run() {
	defer close(f.done)
	for {
		m, err := f.it.Next()
		switch {
		case errors.Is(err, jetstream.ErrMsgIteratorClosed):
			if !f.stopping.Load() { // closed under us (the connection closed)
				f.errs <- fmt.Errorf("%w: %w", errFeed, err)
			}
			return
		case errors.Is(err, jetstream.ErrConsumerDeleted), errors.Is(err, jetstream.ErrConsumerNotFound), errors.Is(err, jetstream.ErrBadRequest):
			f.errs <- fmt.Errorf("%w: %w", errFeed, err)
			return
		case err != nil:
			continue // missed heartbeats, pin changes, leader changes: the iterator goes on by itself
		}
		f.inflight.add(m, time.Now())
		f.msgs <- m
	}
}

// next returns the next messages: it waits up to idle for one, then takes
// what is buffered, up to max.
func (f *feed) next(ctx context.Context, release <-chan struct{}, max int, idle time.Duration) ([]jetstream.Msg, error) {
	t := time.NewTimer(idle)
	defer t.Stop()
	var msgs []jetstream.Msg
	select {
	case <-release:
		return nil, errReleased
	case m := <-f.msgs:
		msgs = append(msgs, m)
	case err := <-f.errs:
		return nil, err
	case <-t.C:
		return nil, nil
	case <-ctx.Done():
		return nil, nil
	}
	for len(msgs) < max {
		select {
		case m := <-f.msgs:
			msgs = append(msgs, m)
		default:
			return msgs, nil
		}
	}
	return msgs, nil
}

func (f *feed) stop() {
	f.stopping.Store(true)
	f.it.Stop()
	for {
		select {
		case <-f.msgs: // unblock run
		case <-f.done:
			<-f.kept
			return
		}
	}
}
