package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
)

// A view made after a restart, or after the pool's view was let go, does
// not fold the pool from its first event when the projection holds a
// state of it (decision 475): it starts from the newest snapshot or
// saved state at or below the pool's last event in the stream, and
// folds only the events after it from the stream, as before. The
// projection is trusted only as far as checked here:
//
//   - the state restores, is the pool's, is at the sequence it is
//     stored with and hashes to its stored state_hash;
//   - the stream holds an event of the pool at that sequence, and the
//     state's time is that event's (a state at a sequence of another
//     pool, or of a stream recreated since, is refused);
//   - the ids of the events up to it (the projection's events table,
//     read as the projector and the audit read the applied ones when
//     they resume) are hints until one is used: when a request carries
//     one, the event the table names is read from the stream and must
//     be the pool's, signed (when keys are trusted) and carry that id
//     (checkRestored). Only then does it answer a retry, as a duplicate
//     of the window (compared by content) or of an applied event; a row
//     PostgreSQL made up cannot make the API drop a new event as a
//     duplicate. No event before the state is read eagerly: a restart
//     within the duplicate window of thousands of appends costs no more.
//
// What is not checked, the state's content, a writer of PostgreSQL can
// choose: it can make the API accept appends the engine would refuse
// (the projector and the audit fold them from the log and refuse them
// there) or refuse appends. A state that fails a check is not used: the
// pool is folded from its first event, and the log says why.

// maxBaseTries is how many requests may end while the projection's state
// of a pool is looked up before the view gives it up and folds the pool
// from its first event: a PostgreSQL that hangs delays a pool's appends
// by a few requests, it does not stop them.
const maxBaseTries = 3

// startFromBase starts st (empty) from the projection's newest state of
// the pool at or below last. A state refused or absent leaves st empty,
// to be folded from the first event; the error is the request's only
// when the request ended meanwhile (the next one tries again).
func (s *Server) startFromBase(ctx context.Context, st *poolState, last uint64) error {
	start := time.Now()
	b, ok, err := query.NewestBase(ctx, s.db, st.name, last, domain.SnapshotFormat)
	if err == nil && !ok {
		return nil
	}
	if err == nil {
		err = s.restoreBase(ctx, st, b)
	}
	if err != nil {
		st.reset()
		if ctx.Err() != nil {
			if st.baseTries++; st.baseTries == maxBaseTries {
				s.log.Warn("pool view: the projection's state was not read within "+strconv.Itoa(maxBaseTries)+" requests; the next folds the pool from its first event",
					"pool", st.name, "last_seq", last, "err", err)
			}
			return &rebuildingError{pool: st.name, last: last, err: err}
		}
		s.log.Warn("pool view: the projection's state of the pool is not used; folding the pool from its first event",
			"pool", st.name, "state_seq", b.Seq, "saved_state", b.Saved, "last_seq", last, "err", err)
		return nil
	}
	st.cost.Add(int64(time.Since(start)))
	s.log.Info("pool view: started from the projection's state", "pool", st.name, "state_seq", b.Seq, "saved_state", b.Saved,
		"last_seq", last, "ids", len(st.restored), "took", time.Since(start))
	return nil
}

// restoreBase checks b and, when it passes, makes it st's state with the
// ids applied up to it.
func (s *Server) restoreBase(ctx context.Context, st *poolState, b query.Base) error {
	p, err := domain.Restore(b.State, st.opts...)
	if err != nil {
		return fmt.Errorf("state at sequence %d: %w", b.Seq, err)
	}
	if p.Name() != st.name || p.Seq() != b.Seq {
		return fmt.Errorf("the state stored at sequence %d is pool %q's at sequence %d", b.Seq, p.Name(), p.Seq())
	}
	if h := p.StateHash(); !bytes.Equal(h[:], b.StateHash) {
		return fmt.Errorf("the state at sequence %d does not hash to its stored state_hash", b.Seq)
	}
	found := false
	err = s.readLog(ctx, st.name, b.Seq, b.Seq, func(d *projections.Decoded) error {
		found = d.Seq == b.Seq && d.OK && d.Stored.Envelope.Time.Equal(p.Time())
		return nil
	})
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("the stream holds no event of the pool at sequence %d stamped %s, the state's time", b.Seq, p.Time().Format(time.RFC3339Nano))
	}
	ids, err := query.StoredIDs(ctx, s.db, st.name, b.Seq)
	if err != nil {
		return err
	}
	accepted, err := query.LastAcceptedTime(ctx, s.db, st.name, b.Seq)
	if err != nil {
		return err
	}
	st.reset()
	st.pool, st.base, st.restored, st.accepted = p, b.Seq, make(map[string]restoredID, len(ids)), accepted
	for _, id := range ids {
		if id.Applied != 0 {
			st.applied.Add(id.ID)
		}
		st.restored[id.ID] = restoredID{first: id.First, applied: id.Applied}
	}
	return nil
}

// restoredID is where the projection says an id before the view's base
// was first stored, and applied (0: never).
type restoredID struct{ first, applied uint64 }

// checkRestored checks, against the stream, each id of ins that the view
// knows only from the projection (restored), then forgets the hint: the
// event stored where the projection says must be the pool's, signed
// (when keys are trusted) and carry that id. Its first event, if still
// in the duplicate window, joins the window (compared by content, as if
// folded); the event that applied it answers a retry past the window
// (appSeq). An id the projection says was applied and the stream does
// not hold refuses the request, since the projection and the log
// disagree; the hint of a refused event that fails is dropped (a forged
// event leaves no trace, as in the fold).
func (s *Server) checkRestored(ctx context.Context, st *poolState, ins []incoming) *apiError {
	for _, in := range ins {
		r, ok := st.restored[in.id]
		if !ok || in.id == "" {
			continue
		}
		first, err := s.storedAt(ctx, st, r.first, in.id)
		var applied *projections.Decoded
		if err == nil {
			if applied = first; r.applied != r.first && r.applied != 0 {
				applied, err = s.storedAt(ctx, st, r.applied, in.id)
			}
		}
		if err != nil {
			return unavailable(ReasonUnavailable, fmt.Sprintf("pool %s: could not read its events from the stream; nothing was stored: retry", st.name), err)
		}
		if r.applied != 0 && applied == nil {
			err := fmt.Errorf("the projection's events table says pool %s applied id %q at sequence %d; the stream holds no such event", st.name, in.id, r.applied)
			s.log.Error("pool view: the projection disagrees with the log; append refused", "pool", st.name, "id", in.id, "seq", r.applied, "err", err)
			return &apiError{status: http.StatusServiceUnavailable, reason: ReasonUnavailable, retryAfter: time.Minute, cause: err,
				msg: fmt.Sprintf("pool %s: the projection says id %q was applied at sequence %d, which the log does not hold: nothing was stored; the operator must check the projection", st.name, in.id, r.applied)}
		}
		delete(st.restored, in.id)
		if r.applied != 0 {
			st.appSeq[in.id] = r.applied
		}
		if first != nil {
			if _, known := st.ids[in.id]; !known && !first.Stored.Envelope.Time.Before(s.clock().Add(-s.window)) {
				env := first.Stored.Envelope
				st.rememberAt(in.id, first.Seq, env.Time, contentDigest(env.Type, env.Data))
			}
		}
	}
	return nil
}

// learnStored takes into the duplicate window the pool's event at seq,
// stored before the view's base, when it carries id, is signed (when
// keys are trusted) and is still in the window.
func (s *Server) learnStored(ctx context.Context, st *poolState, seq uint64, id string) {
	d, err := s.storedAt(ctx, st, seq, id)
	if err != nil || d == nil {
		return
	}
	if _, known := st.ids[id]; !known && !d.Stored.Envelope.Time.Before(s.clock().Add(-s.window)) {
		st.rememberAt(id, seq, d.Stored.Envelope.Time, contentDigest(d.Stored.Envelope.Type, d.Stored.Envelope.Data))
	}
}

// storedAt reads the pool's event at seq: nil when the stream holds none
// of the pool there, or one no trusted key signed, or of another id.
func (s *Server) storedAt(ctx context.Context, st *poolState, seq uint64, id string) (*projections.Decoded, error) {
	var out *projections.Decoded
	err := s.readLog(ctx, st.name, seq, seq, func(d *projections.Decoded) error {
		if d.Err != nil {
			return d.Err
		}
		if d.Seq == seq && d.OK && d.Stored.Gate == "" && d.Stored.Envelope.ID == id {
			dd := *d
			out = &dd
		}
		return nil
	})
	return out, err
}

// isRebuilding reports whether err is a fold cut by the request's end.
func isRebuilding(err error) (*rebuildingError, bool) {
	var re *rebuildingError
	return re, errors.As(err, &re)
}
