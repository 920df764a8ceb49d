package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/nats-io/nats.go/jetstream"
)

// Message is one event read back from the log.
type Message struct {
	Pool   string
	Stored stream.Stored
}

// ReadLog calls fn for every message of the stream matching filter, from
// sequence from up to the last one stored when ReadLog started, in order.
// Messages whose subject names no pool are passed over.
func ReadLog(ctx context.Context, js jetstream.JetStream, from uint64, filter string, fn func(Message) error) error {
	s, err := js.Stream(ctx, stream.Name)
	if err != nil {
		return fmt.Errorf("open stream %s: %w", stream.Name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream info: %w", err)
	}
	last := info.State.LastSeq
	if from < 1 {
		from = 1
	}
	if last < from {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    from,
	})
	if err != nil {
		return fmt.Errorf("read stream from %d: %w", from, err)
	}
	return drain(ctx, cons, last, fn)
}

func drain(ctx context.Context, cons jetstream.Consumer, last uint64, fn func(Message) error) error {
	for {
		batch, err := cons.Fetch(2000, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("message metadata: %w", err)
			}
			seq := md.Sequence.Stream
			if seq > last {
				return nil
			}
			if pool, st, ok := projections.DecodeMessage(seq, m.Subject(), md.Timestamp, m.Data()); ok {
				if err := fn(Message{Pool: pool, Stored: st}); err != nil {
					return err
				}
			}
			if seq == last || md.NumPending == 0 {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("fetch: %w", err)
		}
		if n == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			return nil // nothing more matches the filter
		}
	}
}
