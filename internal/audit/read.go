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
// Messages whose subject names no pool are passed over. It reads with
// direct gets (stream.Read) and creates no consumer, so the auditor's
// identity, which may hold none, can run it.
func ReadLog(ctx context.Context, js jetstream.JetStream, from uint64, filter string, fn func(Message) error) error {
	last, err := stream.LastSeq(ctx, js.Conn())
	if err != nil {
		return fmt.Errorf("open stream %s: %w", stream.Name, err)
	}
	return ReadRange(ctx, js.Conn(), from, last, filter, fn)
}

// ReadRange is ReadLog up to sequence to.
//
// Reading, decoding and folding overlap: stream.Read fetches the next
// batch while this decodes in its own goroutine, in chunks, and fn folds.
func ReadRange(ctx context.Context, nc *nats.Conn, from, to uint64, filter string, fn func(Message) error) error {
	if from < 1 {
		from = 1
	}
	if to < from {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunks := make(chan []Message, 4)
	errc := make(chan error, 1)
	go func() {
		defer close(chunks)
		var msgs []Message
		err := stream.Read(ctx, nc, filter, from, to, func(m stream.Msg) error {
			if pool, st, ok := projections.DecodeMessage(m.Seq, m.Subject, m.Time, m.Data); ok {
				st.Predecode()
				msgs = append(msgs, Message{Pool: pool, Stored: st, Subject: m.Subject, Header: m.Header})
			}
			if len(msgs) == 512 {
				select {
				case chunks <- msgs:
				case <-ctx.Done():
					return ctx.Err()
				}
				msgs = nil
			}
			return nil
		})
		if err == nil && len(msgs) > 0 {
			select {
			case chunks <- msgs:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		errc <- err
	}()
	for c := range chunks {
		for _, m := range c {
			if err := fn(m); err != nil {
				cancel()
				for range chunks {
				}
				<-errc
				return err
			}
		}
	}
	return <-errc
}
