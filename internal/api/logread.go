package api

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/stream"
)

// storedMsg is a message of the stream as stored.
type storedMsg struct {
	seq     uint64
	subject string
	header  nats.Header
	data    []byte
	stored  time.Time // when the stream stored it
}

// smallGap is how many events a read takes with one message get each
// (the usual catch-up: a few events of another instance) rather than a
// consumer.
const smallGap = 32

// readLog calls fn with each message of pool stored from sequence from up
// to to, in order, with the ledger's own identity (internal/natsauth: it
// may get messages, and create and fetch from an ephemeral consumer, not
// ask a consumer's info or delete one). An error of fn ends the read.
func (s *Server) readLog(ctx context.Context, pool string, from, to uint64, fn func(storedMsg) error) error {
	if from > to {
		return nil
	}
	if to-from < smallGap {
		return s.readLogByGet(ctx, pool, from, to, fn)
	}
	return s.readLogByConsumer(ctx, pool, from, to, fn)
}

func (s *Server) readLogByGet(ctx context.Context, pool string, from, to uint64, fn func(storedMsg) error) error {
	filter := stream.PoolFilter(pool)
	for next := from; next <= to; {
		m, err := s.stream.GetMsg(ctx, next, jetstream.WithGetMsgSubject(filter))
		if err != nil {
			return fmt.Errorf("read pool %s from %d: %w", pool, next, err)
		}
		if m.Sequence > to {
			return nil
		}
		if err := fn(storedMsg{seq: m.Sequence, subject: m.Subject, header: m.Header, data: m.Data, stored: m.Time}); err != nil {
			return err
		}
		next = m.Sequence + 1
	}
	return nil
}

func (s *Server) readLogByConsumer(ctx context.Context, pool string, from, to uint64, fn func(storedMsg) error) error {
	cons, err := s.stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		FilterSubject: stream.PoolFilter(pool), DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq: from, AckPolicy: jetstream.AckNonePolicy,
		// The ledger's identity may not delete consumers (internal/natsauth):
		// the server removes this one once it is idle.
		InactiveThreshold: 5 * time.Second, MemoryStorage: true,
	})
	if err != nil {
		return fmt.Errorf("read pool %s: %w", pool, err)
	}
	// Ask for no more than the consumer holds: a fetch returns as soon as
	// it has what it asked for, rather than waiting for a full batch.
	pending := cons.CachedInfo().NumPending
	for at := from - 1; at < to; {
		want := int(min(max(pending, 1), 256))
		n, last, err := fetchInto(ctx, pool, cons, want, to, fn)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("read pool %s: no event after %d", pool, at)
		}
		at, pending = last, pending-min(pending, uint64(n))
	}
	return nil
}

// fetchInto fetches up to want messages and calls fn with those up to to;
// it returns how many it fetched and the last sequence it saw.
func fetchInto(ctx context.Context, pool string, cons jetstream.Consumer, want int, to uint64, fn func(storedMsg) error) (n int, last uint64, err error) {
	wait := time.Second
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		wait = max(time.Until(dl), time.Millisecond)
	}
	batch, err := cons.Fetch(want, jetstream.FetchMaxWait(wait))
	if err != nil {
		return 0, 0, fmt.Errorf("read pool %s: %w", pool, err)
	}
	for msg := range batch.Messages() {
		md, err := msg.Metadata()
		if err != nil {
			return n, last, fmt.Errorf("read pool %s: %w", pool, err)
		}
		n, last = n+1, md.Sequence.Stream
		if last > to {
			continue // past the end of the read: drained, not passed on
		}
		if err := fn(storedMsg{seq: last, subject: msg.Subject(), header: msg.Headers(), data: msg.Data(), stored: md.Timestamp}); err != nil {
			return n, last, err
		}
	}
	if err := batch.Error(); err != nil {
		return n, last, fmt.Errorf("read pool %s: %w", pool, err)
	}
	return n, last, nil
}
