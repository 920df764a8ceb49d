package audit

import (
	"context"
	"fmt"

	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Message is one event read back from the log.
type Message struct {
	Pool   string
	Stored stream.Stored
	// Subject and Header as stored, to check the ledger's signature.
	Subject string
	Header  nats.Header
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

// drain reads with Messages, which keeps a window of messages in flight
// (a Fetch per chunk on an ordered consumer would re-create the consumer
// each time), and decodes in its own goroutine, in chunks, while fn folds:
// reading, decoding and folding overlap.
func drain(ctx context.Context, cons jetstream.Consumer, last uint64, fn func(Message) error) error {
	info, err := cons.Info(ctx)
	if err != nil {
		return fmt.Errorf("consumer info: %w", err)
	}
	if info.NumPending == 0 {
		return nil // nothing matches the filter from there
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		return fmt.Errorf("read stream: %w", err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	chunks := make(chan chunk, 4)
	go decodeAhead(it, last, chunks)
	for c := range chunks {
		for _, m := range c.msgs {
			if err := fn(m); err != nil {
				go discard(chunks)
				return err
			}
		}
		if c.err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return c.err
		}
	}
	return nil
}

// chunk is a run of decoded messages; err ends the stream.
type chunk struct {
	msgs []Message
	err  error
}

// decodeAhead reads messages up to last, decodes them and sends them in
// chunks; it closes out when done.
func decodeAhead(it jetstream.MessagesContext, last uint64, out chan<- chunk) {
	defer close(out)
	var msgs []Message
	for {
		m, err := it.Next()
		if err != nil {
			out <- chunk{msgs: msgs, err: fmt.Errorf("read stream: %w", err)}
			return
		}
		md, err := m.Metadata()
		if err != nil {
			out <- chunk{msgs: msgs, err: fmt.Errorf("message metadata: %w", err)}
			return
		}
		seq := md.Sequence.Stream
		if seq > last {
			out <- chunk{msgs: msgs}
			return
		}
		if pool, st, ok := projections.DecodeMessage(seq, m.Subject(), md.Timestamp, m.Data()); ok {
			st.Predecode()
			msgs = append(msgs, Message{Pool: pool, Stored: st, Subject: m.Subject(), Header: m.Headers()})
		}
		if seq == last || md.NumPending == 0 {
			out <- chunk{msgs: msgs}
			return
		}
		if len(msgs) == 512 {
			out <- chunk{msgs: msgs}
			msgs = nil
		}
	}
}

func discard(chunks <-chan chunk) {
	for range chunks {
	}
}
