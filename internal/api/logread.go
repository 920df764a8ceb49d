package api

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

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

// readLog calls fn with each message of pool stored from sequence from up
// to to, in order, read with direct gets (stream.Read): the ledger's
// identity may create no consumer (internal/natsauth), so no number of
// reads, the API's catch-ups or what-ifs, can fill the server's consumer
// limit or leave anything behind. An error of fn ends the read.
func (s *Server) readLog(ctx context.Context, pool string, from, to uint64, fn func(storedMsg) error) error {
	if from > to {
		return nil
	}
	err := stream.Read(ctx, s.nc, stream.PoolFilter(pool), from, to, func(m stream.Msg) error {
		return fn(storedMsg{seq: m.Seq, subject: m.Subject, header: m.Header, data: m.Data, stored: m.Time})
	})
	if err != nil {
		return fmt.Errorf("read pool %s from %d: %w", pool, from, err)
	}
	return nil
}
