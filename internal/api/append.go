package api

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections"
)

// postEvents appends a request's events and records the request's
// figures (metrics.go).
func (s *Server) postEvents(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	pool, ins, res, aerr := s.appendRequest(w, r)
	if aerr != nil {
		s.fail(w, r, aerr)
	} else {
		writeJSON(w, http.StatusOK, client.AppendResponse{Pool: pool, Events: res})
	}
	s.observeAppend(pool, ins, res, aerr, time.Since(start))
}

// appendRequest checks and appends a request's events. Checks run
// cheapest first: origin and token, any write scope on the pool,
// Content-Type, pool name, then the body, streamed under its size limit
// (each event's scope, size limits and form as it is read), then the
// engine's validation. pool is "" until the token may write to it and
// the name is valid.
func (s *Server) appendRequest(w http.ResponseWriter, r *http.Request) (pool string, ins []incoming, res []client.Appended, aerr *apiError) {
	name := r.PathValue("pool")
	id, aerr := s.authenticate(r)
	if aerr == nil {
		s.authenticated(w, r, id.Name)
		var release func()
		if release, aerr = s.perToken.admit(id.Name, false); aerr == nil {
			defer release() // the whole append, body and publish included
		}
	}
	if aerr == nil && !id.Allows(auth.ScopeAppend, name) && !id.Allows(auth.ScopePlan, name) {
		aerr = allow(id, auth.ScopeAppend, name)
		if id.Has(auth.ScopeAppend) || id.Has(auth.ScopePlan) {
			aerr = allow(id, writeScopeOf(id), name)
		}
	}
	if aerr == nil {
		aerr = requireJSON(r)
	}
	if aerr == nil || aerr.reason == ReasonUnsupportedMedia {
		if err := stream.ValidatePool(name); err == nil {
			pool = name // allowed and valid: a label for the figures
		} else if aerr == nil {
			aerr = refusal(err, nil)
		}
	}
	if aerr != nil {
		return pool, nil, nil, aerr
	}
	dec := decoder{producer: id.Name, authorize: func(t events.Type, i int) *apiError {
		aerr := allow(id, scopeOf(t), name)
		if aerr != nil {
			aerr.index = at(i)
		}
		return aerr
	}}
	if ins, aerr = dec.decode(http.MaxBytesReader(w, r.Body, MaxBody)); aerr != nil {
		return name, nil, nil, aerr
	}
	res, aerr = s.appendEvents(r.Context(), name, ins)
	return name, ins, res, aerr
}

// scopeOf is the scope an event type needs, as the table of event types
// says (events.Kind.Scope); a type it does not know needs plan, the
// narrower grant, and is refused when decoded anyway.
func scopeOf(t events.Type) auth.Scope {
	if k, ok := events.KindOf(t); ok && k.Scope == events.ScopeAppend {
		return auth.ScopeAppend
	}
	return auth.ScopePlan
}

// writeScopeOf names a write scope the identity has, for the message of
// a refusal on a pool it does not cover.
func writeScopeOf(id *auth.Identity) auth.Scope {
	if id.Has(auth.ScopeAppend) {
		return auth.ScopeAppend
	}
	return auth.ScopePlan
}

// appendEvents validates events against the pool's current state and
// appends them, all or none. It retries after conflicting appends of other
// ledger instances.
func (s *Server) appendEvents(ctx context.Context, pool string, ins []incoming) ([]client.Appended, *apiError) {
	if !s.nc.IsConnected() {
		return nil, unavailable(ReasonUnavailable, "NATS is not connected: nothing was stored; retry", fmt.Errorf("NATS connection %s", s.nc.Status()))
	}
	if aerr := s.checkHold(ctx); aerr != nil {
		return nil, aerr
	}
	st := s.poolFor(pool)
	st.mu.Lock()
	defer st.mu.Unlock()
	a := attempt{s: s, st: st, ins: ins}
	if !st.loaded {
		if err := a.refresh(ctx); err != nil {
			return nil, err
		}
	}
	// Conflicts mean other instances are appending to the pool: keep
	// trying (with a growing random backoff) for the publish timeout, at
	// least maxAttempts times, so that a slower instance is not starved
	// into a 5xx. If the pool has not moved after maxAttempts, no other
	// instance is winning: an earlier append is pending (below).
	from, start := st.pool.Seq(), time.Now()
	for n := 0; n < s.maxAttempts || (st.pool.Seq() != from && time.Since(start) < s.timeout); n++ {
		res, done, aerr := a.try(ctx)
		if done {
			return res, aerr
		}
	}
	s.log.Warn("append gave up after conflicts", "pool", pool, "conflicts", a.conflicts)
	if st.pool.Seq() == from {
		// JetStream refused the expected sequence each time, yet the pool
		// has no newer stored event: an earlier append is in flight (its
		// leader proposed it and cannot commit it yet).
		return nil, &apiError{status: http.StatusServiceUnavailable, reason: ReasonUnavailable, retryAfter: time.Second,
			msg: fmt.Sprintf("pool %s: an earlier append is still pending in JetStream (a leader change, or most of its servers down); nothing of this request was stored: retry", pool)}
	}
	return nil, &apiError{status: http.StatusServiceUnavailable, reason: ReasonBusy, retryAfter: time.Second,
		msg: fmt.Sprintf("pool %s: %d conflicting appends by other ledger instances in a row, for %v; retry", pool, a.conflicts, s.timeout)}
}

// attempt is the retry state of one appendEvents call.
type attempt struct {
	s       *Server
	st      *poolState
	ins     []incoming
	current bool // the state was caught up with the stream during this request
	dupSeen bool // JetStream already called an id of ours a duplicate once
	// conflicts counts appends refused because another instance appended
	// first.
	conflicts int
}

// backoff waits a random time, growing with the number of conflicts, so
// that an instance whose round trip is longer is not starved by one that
// keeps appending to the same pool.
func backoff(ctx context.Context, conflicts int) error {
	d := time.Duration(rand.Int64N(int64(time.Millisecond) << min(conflicts, 6)))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func (a *attempt) refresh(ctx context.Context) *apiError {
	if err := a.s.catchUp(ctx, a.st); err != nil {
		if errors.Is(err, projections.ErrNeedsNewer) {
			// Not a driver's error: the engine's own words, naming the
			// sequence and the version, are for the operator to read.
			return unavailable(ReasonNeedsNewer, err.Error(), err)
		}
		if re, ok := isRebuilding(err); ok {
			return unavailable(ReasonUnavailable, fmt.Sprintf("pool %s: its state is being folded from the log (up to sequence %d of %d so far); nothing was stored: retry, the next request continues the fold", re.pool, re.at, re.last), err)
		}
		return unavailable(ReasonUnavailable, fmt.Sprintf("pool %s: could not read its events from the stream; nothing was stored: retry", a.st.name), err)
	}
	a.current = true
	return nil
}

// try makes one attempt; done reports whether res/aerr is the answer.
func (a *attempt) try(ctx context.Context) (res []client.Appended, done bool, aerr *apiError) {
	if aerr := a.s.checkRestored(ctx, a.st, a.ins); aerr != nil {
		return nil, true, aerr
	}
	d := a.s.draft(a.st, a.ins)
	if d.refusal != nil {
		if a.current {
			return nil, true, d.refusal
		}
		// Judged on a state that may be stale: refuse only if the
		// current state refuses too.
		aerr := a.refresh(ctx)
		return nil, aerr != nil, aerr
	}
	if len(d.fresh) == 0 {
		return d.results, true, nil
	}
	pctx, cancel := context.WithTimeout(ctx, a.s.timeout)
	defer cancel()
	created := a.st.pool.Seq() == 0
	if created {
		release, aerr := a.s.checkPoolName(pctx, a.st.name)
		if aerr != nil {
			return nil, true, aerr
		}
		defer release() // after added, when stored: a variant is refused throughout
	}
	seq, dup, err := a.s.publish(pctx, a.st, d)
	switch {
	case err == nil && !dup:
		a.s.commit(a.st, a.ins, d, seq)
		if created {
			a.s.poolNames.added(a.st.name)
		}
		return d.results, true, nil
	case err == nil || isAtomicDuplicate(err):
		if err == nil && seq <= a.st.base && len(d.fresh) == 1 {
			// JetStream knows the id, stored before the view's base, and
			// the projection did not list it: the stream says where.
			a.s.learnStored(ctx, a.st, seq, d.ids[0])
		}
		return a.duplicate(ctx, d)
	case isConflict(err):
		a.s.log.Debug("append conflict; catching up", "pool", a.st.name, "expected", a.st.pool.Seq(), "err", err)
		a.conflicts++
		if err := backoff(ctx, a.conflicts); err != nil {
			return nil, true, unavailable(ReasonUnavailable, "the request ended while other ledger instances were appending to the pool; nothing was stored: retry", err)
		}
		aerr := a.refresh(ctx)
		return nil, aerr != nil, aerr
	}
	return nil, true, publishFailure(err, a.s.timeout)
}

// duplicate handles JetStream calling an event a duplicate of a stored
// one: after catching up, the next draft answers it with the stored
// sequence. If the id is still unknown it belongs to another pool.
func (a *attempt) duplicate(ctx context.Context, d *draft) ([]client.Appended, bool, *apiError) {
	if a.dupSeen {
		return nil, true, &apiError{status: http.StatusConflict, reason: ReasonDuplicateID,
			msg: fmt.Sprintf("an id among %q was already used for an event of another pool", d.ids)}
	}
	a.dupSeen = true
	aerr := a.refresh(ctx)
	return nil, aerr != nil, aerr
}

// draft is one attempt's plan: events already in the log (answered with
// their sequence) and the others, stamped, validated and encoded.
type draft struct {
	results  []client.Appended
	fresh    []int // indexes of the events to append
	at       time.Time
	ids      []string
	payloads []events.Payload
	envs     []events.Envelope
	data     [][]byte
	digests  [][sha256.Size]byte
	refusal  *apiError
	// msgs are the messages to publish, signed by the goroutines of
	// signAhead while the events are validated; signed is closed when
	// they are.
	msgs   []*nats.Msg
	signed chan struct{}
}

func (s *Server) draft(st *poolState, ins []incoming) *draft {
	now := s.clock()
	st.forgetBefore(now.Add(-s.window))
	d := &draft{results: make([]client.Appended, len(ins)), at: stamp(now, st.accepted)}
	for i, in := range ins {
		if sid, ok := st.ids[in.id]; ok {
			if aerr := sameContent(in, sid, i); aerr != nil {
				d.refusal = aerr
				return d
			}
			d.results[i] = client.Appended{ID: in.id, Seq: sid.seq, Duplicate: true}
			continue
		}
		if seq, ok := st.appSeq[in.id]; ok && in.id != "" {
			// A retry after the duplicate window: the pool applied this
			// id already (the projector would refuse it as duplicate_id),
			// so it is answered as a duplicate and not stored again. Its
			// content is no longer compared: only the window keeps it.
			d.results[i] = client.Appended{ID: in.id, Seq: seq, Duplicate: true}
			continue
		}
		d.fresh = append(d.fresh, i)
	}
	if d.refusal = checkHosts(st.pool, ins, d.fresh); d.refusal != nil {
		return d
	}
	if d.refusal = checkFolds(st.pool, ins, d.fresh); d.refusal != nil {
		return d
	}
	// The envelopes are encoded, and signed on other cores, while the
	// engine validates the events: the signature (tens of microseconds an
	// event) is off the request's path where the validation is as long.
	// An encoding failure is answered after the validation, as before.
	encodeErr := s.encode(st, ins, d)
	if encodeErr == nil {
		s.signAhead(st.name, d)
	}
	if d.refusal = validate(st.pool, ins, d.fresh, d.at); d.refusal != nil {
		return d
	}
	d.refusal = encodeErr
	return d
}

// encode builds the envelopes of the events to append.
func (s *Server) encode(st *poolState, ins []incoming, d *draft) *apiError {
	for _, i := range d.fresh {
		env, err := events.New(ins[i].id, st.name, ins[i].producer, d.at, ins[i].payload)
		if err == nil {
			var b []byte
			b, err = json.Marshal(env)
			d.data = append(d.data, b)
		}
		if err != nil {
			return refusal(fmt.Errorf("%w: %v", events.ErrMalformed, err), at(i))
		}
		d.payloads = append(d.payloads, ins[i].payload)
		d.envs = append(d.envs, env)
		d.ids = append(d.ids, ins[i].id)
		d.digests = append(d.digests, contentDigest(env.Type, env.Data))
	}
	return nil
}

// signAhead makes the draft's messages and signs them (when the server
// has a signer) in the background, over the cores; publish waits for
// them (signed).
func (s *Server) signAhead(pool string, d *draft) {
	d.msgs = make([]*nats.Msg, len(d.data))
	for k, p := range d.payloads {
		d.msgs[k] = nats.NewMsg(stream.Subject(pool, p.EventType()))
		d.msgs[k].Data = d.data[k]
	}
	d.signed = make(chan struct{})
	if s.signer == nil || len(d.msgs) == 0 {
		close(d.signed)
		return
	}
	go func() {
		defer close(d.signed)
		s.signer.SignAll(d.msgs)
	}()
}

// sameContent refuses a retry whose id is stored with other content: the
// producer reused an id, and answering "duplicate" would drop its event.
func sameContent(in incoming, sid storedID, i int) *apiError {
	data, err := json.Marshal(in.payload)
	if err == nil && contentDigest(in.payload.EventType(), data) == sid.digest {
		return nil
	}
	return &apiError{status: http.StatusConflict, reason: ReasonIDConflict, index: at(i),
		msg: fmt.Sprintf("id %q is already stored (seq %d) with other content: use a new id for a new event", in.id, sid.seq)}
}

// stamp is the time of a new event: the clock, but never earlier than the
// last event the pool applied (last), in microseconds (what PostgreSQL
// keeps), so the projection shows exactly what the log holds and the
// events the ledger took are in time order (decision 523's time travel
// counts only those; a refused event's time is not the pool's clock,
// decision 530).
func stamp(now, last time.Time) time.Time {
	at := now.UTC().Truncate(time.Microsecond)
	if at.Before(last) {
		return last
	}
	return at
}

// checkHosts refuses host_up events that would give the pool more than
// events.MaxHostsPerPool hosts (a host once up is kept while down).
func checkHosts(p *domain.Pool, ins []incoming, fresh []int) *apiError {
	var known map[string]bool
	for _, i := range fresh {
		hu, ok := ins[i].payload.(*events.HostUp)
		if !ok {
			continue
		}
		if known == nil { // only for requests that bring hosts up
			hosts := p.Hosts()
			known = make(map[string]bool, len(hosts))
			for _, h := range hosts {
				known[h.Name] = true
			}
		}
		if known[hu.Host] {
			continue
		}
		if len(known) >= events.MaxHostsPerPool {
			return refusal(fmt.Errorf("%w: pool %s has %d hosts; %s would be one more (at most %d)",
				events.ErrTooManyHosts, p.Name(), len(known), hu.Host, events.MaxHostsPerPool), at(i))
		}
		known[hu.Host] = true
	}
	return nil
}

// validate checks the events to append in order, as one change: an array
// is folded on a copy of the state, so each event is judged on the state
// after the ones before it.
func validate(p *domain.Pool, ins []incoming, fresh []int, now time.Time) *apiError {
	if len(fresh) == 1 {
		if err := p.Validate(ins[fresh[0]].payload); err != nil {
			return refusal(err, at(fresh[0]))
		}
		return nil
	}
	c := p.Clone()
	for _, i := range fresh {
		if _, err := c.Apply(domain.Event{Seq: c.Seq() + 1, Time: now, Payload: ins[i].payload}); err != nil {
			return refusal(err, at(i))
		}
	}
	return nil
}

// commit folds the appended events (the last at seq, contiguous) into the
// pool's state, through the projector's own function (projections.Apply).
func (s *Server) commit(st *poolState, ins []incoming, d *draft, last uint64) {
	first, start := last-uint64(len(d.fresh))+1, time.Now()
	defer func() { st.cost.Add(int64(time.Since(start))) }()
	for k, i := range d.fresh {
		seq := first + uint64(k)
		sd := stream.Stored{Seq: seq, Envelope: d.envs[k], Raw: d.data[k]}
		sd.Decoded(d.payloads[k])
		res, err := projections.Apply(st.pool, st.applied, sd)
		switch {
		case err != nil || res.Refused != "":
			// Validated under the pool's lock against the same state: a
			// bug if it happens. The pool keeps in step with the log.
			s.log.Error("appended event refused by the engine", "pool", st.name, "seq", seq, "refused", res.Refused, "err", err)
		default:
			st.accepted = d.at
			if ins[i].id != "" {
				st.appSeq[ins[i].id] = seq
			}
		}
		st.remember(ins[i].id, seq, d.at, d.digests[k])
		d.results[i] = client.Appended{ID: ins[i].id, Seq: seq}
	}
}

// publish appends the draft's events with the pool's expected last
// sequence. It returns the sequence of the last one, or dup when
// JetStream already holds the (single) event.
func (s *Server) publish(ctx context.Context, st *poolState, d *draft) (uint64, bool, error) {
	<-d.signed
	if len(d.fresh) > 1 {
		return s.publishBatch(ctx, st, d.msgs, d.ids)
	}
	ack, err := s.js.PublishMsg(ctx, d.msgs[0], jetstream.WithMsgID(d.ids[0]), jetstream.WithExpectStream(stream.Name),
		jetstream.WithExpectLastSequenceForSubject(st.pool.Seq(), stream.PoolFilter(st.name)))
	if err != nil {
		return 0, false, err
	}
	return ack.Sequence, ack.Duplicate, nil
}

// JetStream error codes this package tells apart.
const (
	errCodeWrongLastSeq         = jetstream.JSErrCodeStreamWrongLastSequence
	errCodeWrongLastSeqConstant = jetstream.JSErrCodeStreamWrongLastSequenceConstant
	errCodeAtomicDuplicate      = jetstream.ErrorCode(10201) // atomic publish batch contains duplicate message id
	errCodeMessageTooLarge      = jetstream.ErrorCode(10054) // message size exceeds maximum allowed
)

func apiCode(err error) jetstream.ErrorCode {
	var je jetstream.JetStreamError
	if errors.As(err, &je) && je.APIError() != nil {
		return je.APIError().ErrorCode
	}
	return 0
}

// isConflict: another writer appended to the pool since the state the
// publish expected.
func isConflict(err error) bool {
	c := apiCode(err)
	return c == errCodeWrongLastSeq || c == errCodeWrongLastSeqConstant
}

func isAtomicDuplicate(err error) bool { return apiCode(err) == errCodeAtomicDuplicate }

// publishFailure answers a publish that failed for another reason than a
// conflict: too large, or JetStream unavailable (retry later, same ids).
// On a cluster the two unavailable cases differ: no server leads the
// stream (nothing was stored), or the leader did not answer in time (the
// events may be stored, now or once a majority is back; the retry with
// the same ids is answered with their sequences).
func publishFailure(err error, timeout time.Duration) *apiError {
	switch {
	case errors.Is(err, nats.ErrMaxPayload) || apiCode(err) == errCodeMessageTooLarge:
		return &apiError{status: http.StatusRequestEntityTooLarge, reason: ReasonTooLarge,
			msg: "the events are larger than the stream takes in one message: send fewer or smaller events", cause: err}
	case errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse):
		return unavailable(ReasonUnavailable, fmt.Sprintf(
			"append to JetStream: no server leads stream %s (most of its servers are down, or they are electing a leader); nothing was stored: retry", stream.Name), err)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return unavailable(ReasonUnavailable, fmt.Sprintf(
			"append to JetStream: not acknowledged within %v (a leader change, or most of its servers down); the events may be stored or not: retry with the same ids, which stores them once", timeout), err)
	}
	return unavailable(ReasonUnavailable, "append to JetStream failed; the events may be stored or not: retry with the same ids, which stores them once", err)
}
