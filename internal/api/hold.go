package api

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/cluster-ledger/ledger/projections/query"
)

// ReasonHealing answers an append while the stream ends before the
// projection: the projector is storing the events the stream lost again,
// at their original sequences, and an append now would take one of them.
const ReasonHealing = "healing"

// holdRecheck is how often a held (or undecided) check is repeated; the
// answer's Retry-After.
const holdRecheck = time.Second

// hold decides whether appends must wait while the projector heals the
// stream (docs/decisions.md, "appends held while the stream heals").
//
// The stream can only end before the projection after it lost messages,
// that is after the NATS server restarted, which this process sees as a
// reconnection. So the check (the stream's last sequence against the
// highest projector offset in PostgreSQL) runs once per NATS connection:
// on the first append, and after each reconnection; while it holds it is
// repeated at most every holdRecheck. Appends in between cost nothing.
type hold struct {
	mu         sync.Mutex
	reconnects uint64    // nats.Conn's reconnect count at the last check
	checked    time.Time // when it was made
	clear      bool      // it found the stream not behind the projection
	verdict    *apiError // the last held answer
}

// checkHold returns the answer for an append while the stream is behind
// the projection, or nil. Without a database nothing is known: nil.
func (s *Server) checkHold(ctx context.Context) *apiError {
	if s.db == nil {
		return nil
	}
	h := &s.hold
	rc := s.nc.Stats().Reconnects
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.clear && h.reconnects == rc {
		return nil
	}
	if h.reconnects == rc && time.Since(h.checked) < holdRecheck {
		return h.verdict
	}
	h.checked, h.reconnects, h.clear = time.Now(), rc, false
	cctx, cancel := context.WithTimeout(ctx, holdRecheck)
	defer cancel()
	last, projected, err := s.streamAndProjection(cctx)
	switch {
	case err != nil:
		// Unknown: let appends through (they do not depend on
		// PostgreSQL) and ask again after holdRecheck.
		s.log.Warn("cannot compare the stream with the projection; appends go on", "err", err)
		h.verdict = nil
	case last < projected:
		h.verdict = &apiError{status: http.StatusServiceUnavailable, reason: ReasonHealing, retryAfter: holdRecheck,
			msg: fmt.Sprintf("the stream ends at sequence %d but the projection has reached %d: the projector is appending the lost events again from PostgreSQL; appends resume once it has", last, projected)}
		s.log.Warn("appends held: the stream is behind the projection", "stream_last_seq", last, "projected_seq", projected)
	default:
		if h.verdict != nil {
			s.log.Info("appends resume: the stream has caught up with the projection", "stream_last_seq", last)
		}
		h.clear, h.verdict = true, nil
	}
	return h.verdict
}

func (s *Server) streamAndProjection(ctx context.Context) (last, projected uint64, err error) {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("stream info: %w", err)
	}
	p, err := query.FurthestOffset(ctx, s.db)
	if err != nil {
		return 0, 0, err
	}
	return info.State.LastSeq, p, nil
}
