package projections

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// ErrPoolMismatch refuses an envelope that names another pool than the
// subject it was stored under.
var ErrPoolMismatch = events.NewRefusal("pool_mismatch", "envelope names another pool than its subject")

// ErrNeedsNewer is returned by Fold for an event a newer ledger wrote: a
// plan naming a rules version this build does not implement, or an
// envelope of a schema version it does not read (a new event type,
// events.Kind). The caller must stop, never skip it, since skipping would
// record a refusal that the newer build does not make.
var ErrNeedsNewer = errors.New("the log needs a newer ledger")

// NeedsNewerError is the ErrNeedsNewer of one event: its pool and
// sequence, and why (errors.Is matches ErrNeedsNewer).
type NeedsNewerError struct {
	Pool string
	Seq  uint64
	Why  string
}

func (e *NeedsNewerError) Error() string {
	return fmt.Sprintf("%v: pool %s, sequence %d: %s", ErrNeedsNewer, e.Pool, e.Seq, e.Why)
}

func (e *NeedsNewerError) Is(target error) bool { return target == ErrNeedsNewer }

// FoldResult is what one event did to its pool: the engine's Result, and
// for a refused event the refusal in words (the chain covers only its
// code).
type FoldResult struct {
	domain.Result
	RefusalDetail string
}

// Fold applies one stored event to its pool (or skips it when it is
// refused) and returns what it did with the next link of the pool's hash
// chain after prev (the zero Hash before the pool's first event). The
// projector and the audit tools fold through this one function, so they
// cannot disagree on what an event did; the API, which keeps no chain,
// folds through Apply, the same function without the link. The only
// error is ErrNeedsNewer, naming the sequence and the version.
func Fold(p *domain.Pool, ids *IDs, st stream.Stored, prev domain.Hash) (FoldResult, domain.Hash, error) {
	res, err := Apply(p, ids, st)
	if err != nil {
		return res, prev, err
	}
	return res, domain.Chain(prev, st.Raw, &res.Result), nil
}

// Apply decides what one stored event does to its pool and does it: it
// applies the event, or skips it (the pool's sequence moves on, nothing
// else changes) when it is refused, and returns what it did.
//
// ids holds the ids of the events the pool applied (nil: not tracked); an
// event whose id is in it is refused (duplicate_id), and an applied
// event's id is added. An event with st.Gate set is refused as
// unauthenticated. Both are decided before the engine sees the event; an
// envelope naming another pool than its subject is refused
// (pool_mismatch). The only error is ErrNeedsNewer: the pool is then
// left as it was, and the caller must stop folding it.
func Apply(p *domain.Pool, ids *IDs, st stream.Stored) (FoldResult, error) {
	var res FoldResult
	if err := Gate(ids, st); err != nil {
		p.Skip(st.Seq, st.Envelope.Time)
		res.Result, res.RefusalDetail = domain.Refusal(st.Seq, err), err.Error()
		return res, nil
	}
	r, err := apply(p, st)
	switch {
	case errors.Is(err, ErrNeedsNewer):
		return res, err
	case errors.Is(err, domain.ErrUnknownRules):
		return res, &NeedsNewerError{Pool: p.Name(), Seq: st.Seq, Why: err.Error()}
	case err != nil:
		p.Skip(st.Seq, st.Envelope.Time)
		res.Result, res.RefusalDetail = domain.Refusal(st.Seq, err), err.Error()
	default:
		res.Result = r
		ids.Add(st.Envelope.ID)
	}
	return res, nil
}

func apply(p *domain.Pool, st stream.Stored) (domain.Result, error) {
	if st.Envelope.Pool != p.Name() {
		// The subject decides the pool; an envelope that disagrees is
		// not trusted with another pool's state.
		return domain.Result{}, fmt.Errorf("%w: envelope names pool %q but was stored for pool %q", ErrPoolMismatch, st.Envelope.Pool, p.Name())
	}
	if v := st.Envelope.V; v > events.Version {
		return domain.Result{}, &NeedsNewerError{Pool: p.Name(), Seq: st.Seq,
			Why: fmt.Sprintf("a %q event of envelope version %d (this build reads 1 to %d)", st.Envelope.Type, v, events.Version)}
	}
	payload, err := st.Payload()
	if err != nil {
		return domain.Result{}, err
	}
	return p.Apply(domain.Event{Seq: st.Seq, Time: st.Envelope.Time, Payload: payload})
}

// DecodeMessage turns a stored message into its pool and event. ok is
// false for a subject that names no pool (it can only be skipped). A body
// that is not a valid envelope does not stop the projection: it becomes a
// stand-in envelope (type from the subject, time = when the stream stored
// it, data = the body as a JSON string) that the engine always refuses, so
// it is kept in the events table and in the hash chain.
func DecodeMessage(seq uint64, subject string, stored time.Time, data []byte) (pool string, st stream.Stored, ok bool) {
	pool, err := stream.PoolOf(subject)
	if err != nil {
		return "", stream.Stored{}, false
	}
	st, err = stream.DecodeRaw(seq, data)
	if err == nil {
		return pool, st, true
	}
	published := stream.Published(subject) // the type is before the partition
	typ := published[strings.LastIndexByte(published, '.')+1:]
	env := events.Envelope{Type: events.Type(typ), V: events.Version, Pool: pool, Time: stored.UTC(), Data: jsonString(data)}
	return pool, stream.Stored{Seq: seq, Envelope: env, Raw: data}, true
}

// jsonString encodes b as a JSON string PostgreSQL's jsonb accepts (valid
// UTF-8, no NUL).
func jsonString(b []byte) json.RawMessage {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	out, _ := json.Marshal(s)
	return out
}
