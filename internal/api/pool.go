package api

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections"
)

// poolState is this process's view of one pool: the engine state folded
// from the stream exactly as the projector folds it (events no trusted
// key signed and ids the pool already applied are refused before the
// engine, projections.Gate), the ids of the events of the duplicate
// window with their content, and every id the pool applied. mu is held
// for a whole append, so one process appends to a pool one request at a
// time.
type poolState struct {
	mu      sync.Mutex
	name    string
	opts    []domain.PoolOption // how the engine's pool is made (WithDevelopmentRules)
	pool    *domain.Pool
	loaded  bool // folded from the stream at least once
	ids     map[string]storedID
	recent  []seenID // ids in stream order, to forget them after the window
	applied *projections.IDs
	appSeq  map[string]uint64 // the sequence of each applied id
	// accepted is the time of the last event the pool applied: a new
	// event is stamped no earlier (stamp). The pool's own time is that of
	// its last event, refused ones included, whose time whoever published
	// it chose: one forged event dated 2099 would stamp every later
	// event 2099.
	accepted time.Time
	// base is the sequence of the projection's state the view started
	// from (0: folded from the pool's first event, base.go); restored
	// holds the ids applied up to it as the projection's events table
	// lists them, each checked against the stream before it answers a
	// retry (checkRestored), then moved to appSeq.
	base     uint64
	restored map[string]restoredID
	// baseTries counts the requests that ended while the projection's
	// state was looked up (PostgreSQL slow or hung): after maxBaseTries
	// the view is folded from the pool's first event instead.
	baseTries int
	// cost is the time spent building the view (base restored, events
	// folded, in nanoseconds): what letting it go would cost the next
	// append (poolFor keeps the costly views longer). touched and used
	// are the server's floor and use count when a request last took the
	// view, under the server's mu.
	cost    atomic.Int64
	touched int64
	used    uint64
}

// storedID is where an event id of the window is, and a digest of the
// content stored under it: a retry with the same id and other content is
// a conflict, not a duplicate.
type storedID struct {
	seq    uint64
	digest [sha256.Size]byte
}

// contentDigest is the digest of an event's type and data as stored
// (the ledger encodes payloads deterministically, so the same content
// always has the same bytes).
func contentDigest(t events.Type, data []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(t))
	h.Write([]byte{0})
	h.Write(data)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

type seenID struct {
	id  string
	seq uint64
	at  time.Time
}

func newPoolState(name string, opts ...domain.PoolOption) *poolState {
	st := &poolState{name: name, opts: opts}
	st.reset()
	return st
}

// reset forgets everything, to fold the pool again from the start.
func (st *poolState) reset() {
	st.pool, st.ids, st.recent, st.loaded = domain.NewPool(st.name, st.opts...), map[string]storedID{}, nil, false
	st.applied, st.appSeq = projections.NewIDs(), map[string]uint64{}
	st.base, st.restored, st.accepted = 0, nil, time.Time{}
}

// remember records an event id stored at seq with content digest.
func (st *poolState) remember(id string, seq uint64, at time.Time, digest [sha256.Size]byte) {
	if id == "" {
		return
	}
	st.ids[id] = storedID{seq: seq, digest: digest}
	st.recent = append(st.recent, seenID{id, seq, at})
}

// rememberAt is remember for an event stored before the ones remembered
// last (an id of the view's base, checkRestored): it takes its place in
// stream order, so that forgetBefore forgets it in time.
func (st *poolState) rememberAt(id string, seq uint64, at time.Time, digest [sha256.Size]byte) {
	st.ids[id] = storedID{seq: seq, digest: digest}
	i, _ := slices.BinarySearchFunc(st.recent, seq, func(e seenID, seq uint64) int { return cmp.Compare(e.seq, seq) })
	st.recent = slices.Insert(st.recent, i, seenID{id, seq, at})
}

// forgetBefore drops ids of events stamped before cutoff: JetStream has
// forgotten them too, so an old id is a new event again.
func (st *poolState) forgetBefore(cutoff time.Time) {
	n := 0
	for n < len(st.recent) && st.recent[n].at.Before(cutoff) {
		if e := st.recent[n]; st.ids[e.id].seq == e.seq {
			delete(st.ids, e.id)
		}
		n++
	}
	st.recent = st.recent[n:]
}

// fold applies one stored event as the projector does, through the same
// function (projections.Apply): an event the gate refuses (not signed by
// a trusted key, or an id the pool already applied), whose envelope
// names another pool, or that the engine refuses is skipped, so the
// sequence stays that of the last stored event. A refused forged event
// leaves no trace in the ids: it cannot make a real retry a conflict.
// An event that needs a newer ledger (a rules version this build lacks)
// leaves the pool where it was: catchUp then refuses to append to it.
func (st *poolState) fold(sd stream.Stored) error {
	env := sd.Envelope
	res, err := projections.Apply(st.pool, st.applied, sd)
	if err != nil {
		return err
	}
	if res.Refused == "" {
		st.accepted = env.Time
	}
	if sd.Gate != "" {
		return nil
	}
	if res.Refused == "" && env.ID != "" {
		st.appSeq[env.ID] = sd.Seq
	}
	if _, known := st.ids[env.ID]; !known {
		st.remember(env.ID, sd.Seq, env.Time, contentDigest(env.Type, env.Data))
	}
	return nil
}

// catchUp folds every event of the pool stored after the state's
// sequence. A view that holds nothing yet starts from the projection's
// newest state of the pool when it passes the checks of startFromBase,
// and from the pool's first event otherwise. The fold stops at the
// request's deadline, checked before each event: what was folded stays
// in the view, and the next request continues from there
// (*rebuildingError).
func (s *Server) catchUp(ctx context.Context, st *poolState) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	last, err := s.lastPoolSeq(ctx, st.name)
	if err != nil {
		return err
	}
	if last < st.pool.Seq() {
		// The stream is younger than what was folded: it was recreated.
		s.log.Warn("pool state ahead of the stream; folding again", "pool", st.name, "state_seq", st.pool.Seq(), "stream_seq", last)
		st.reset()
	}
	if st.pool.Seq() == 0 && last > 0 && s.db != nil && st.baseTries < maxBaseTries {
		if err := s.startFromBase(ctx, st, last); err != nil {
			return err
		}
	}
	if last > st.pool.Seq() {
		from, start := st.pool.Seq(), time.Now()
		err := s.readPool(ctx, st, last)
		st.cost.Add(int64(time.Since(start)))
		if err != nil {
			if ctx.Err() != nil {
				s.log.Info("pool view: fold cut by the request's deadline; the next request continues it", "pool", st.name,
					"from_seq", from, "at_seq", st.pool.Seq(), "last_seq", last)
				return &rebuildingError{pool: st.name, at: st.pool.Seq(), last: last, err: err}
			}
			return err
		}
	}
	st.loaded = true
	return nil
}

// rebuildingError: the request's deadline came before the view was
// folded up to the pool's last event.
type rebuildingError struct {
	pool     string
	at, last uint64
	err      error
}

func (e *rebuildingError) Error() string {
	return fmt.Sprintf("pool %s: folded up to sequence %d of %d: %v", e.pool, e.at, e.last, e.err)
}

func (e *rebuildingError) Unwrap() error { return e.err }

// lastPoolSeq is the sequence of the pool's last stored event (0: none),
// as the stream leader holds it.
func (s *Server) lastPoolSeq(ctx context.Context, pool string) (uint64, error) {
	m, ok, err := stream.Last(ctx, s.nc, stream.PoolFilter(pool))
	if err != nil {
		return 0, fmt.Errorf("last event of pool %s: %w", pool, err)
	}
	if !ok {
		return 0, nil
	}
	return m.Seq, nil
}

// readPool folds the pool's events stored after the state's sequence up
// to last. It stops at ctx's deadline, between two events (the reader
// stops there too, but what it had read, up to a thousand events of a
// large pool, would be folded past it: a request answered 20 s late);
// what was folded stays, so a retry goes on from there.
func (s *Server) readPool(ctx context.Context, st *poolState, last uint64) error {
	return s.readLog(ctx, st.name, st.pool.Seq()+1, last, func(d *projections.Decoded) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return foldDecoded(st, d)
	})
}

// foldDecoded folds a stored message as the projector does: a body that
// is not an envelope (written by something other than a ledger) is a
// stand-in the engine refuses (projections.DecodeMessage), and one no
// trusted key signed is refused (WithTrustedKeys).
func foldDecoded(st *poolState, d *projections.Decoded) error {
	if !d.OK { // a subject that names no pool: the filter never gives one
		return fmt.Errorf("read pool %s: sequence %d has subject %q, which names no pool", st.name, d.Seq, d.Subject)
	}
	if d.Err != nil { // the historical keys were not read: neither accepted nor refused
		return d.Err
	}
	return st.fold(d.Stored)
}
