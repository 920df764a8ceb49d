package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/stream"
)

// Atomic batch publish headers (nats-server 2.12+; nats.go's jetstream
// package has no client for them yet, so the protocol is spoken here).
const (
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
)

// batchAck is the server's answer to a batch commit: a PubAck of the last
// message with the batch id and size, or an error.
type batchAck struct {
	Stream    string              `json:"stream"`
	Seq       uint64              `json:"seq"`
	Duplicate bool                `json:"duplicate"`
	Batch     string              `json:"batch"`
	Count     int                 `json:"count"`
	Error     *jetstream.APIError `json:"error"`
}

// publishBatch appends messages as one atomic batch: the server stages
// them and stores all of them, contiguously, when the commit arrives and
// every check passes, or none. The pool's expected last sequence is
// checked on the first message, which covers the whole batch. Only the
// commit asks for an answer, so the batch costs one round trip.
//
// The messages come signed (signAhead). It returns the sequence of the
// last message.
func (s *Server) publishBatch(ctx context.Context, st *poolState, msgs []*nats.Msg, ids []string) (uint64, bool, error) {
	batchID := newID()
	last := len(msgs) - 1
	for k, m := range msgs {
		m.Header.Set(jetstream.MsgIDHeader, ids[k])
		m.Header.Set(jetstream.ExpectedStreamHeader, stream.Name)
		m.Header.Set(hdrBatchID, batchID)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(k+1))
		if k == 0 {
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(st.pool.Seq(), 10))
			m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, stream.PoolFilter(st.name))
		}
		if k < last {
			if err := s.nc.PublishMsg(m); err != nil {
				return 0, false, err
			}
			continue
		}
		m.Header.Set(hdrBatchCommit, "1")
		return commitBatch(ctx, s.nc, m, batchID, len(msgs))
	}
	return 0, false, fmt.Errorf("empty batch")
}

func commitBatch(ctx context.Context, nc *nats.Conn, m *nats.Msg, batchID string, n int) (uint64, bool, error) {
	resp, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return 0, false, err
	}
	var ack batchAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return 0, false, fmt.Errorf("batch commit: unexpected answer %q: %w", resp.Data, err)
	}
	if ack.Error != nil {
		return 0, false, ack.Error
	}
	if ack.Batch != batchID || ack.Count != n || ack.Seq < uint64(n) {
		return 0, false, fmt.Errorf("batch commit: answer %q does not acknowledge batch %s of %d", resp.Data, batchID, n)
	}
	return ack.Seq, ack.Duplicate, nil
}
