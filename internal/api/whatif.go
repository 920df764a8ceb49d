package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/console"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/whatif"
	"github.com/cluster-ledger/ledger/projections"
)

// Bounds of a what-if (POST /v1/pools/{pool}/what-if): besides the body
// (MaxBody), the events it may carry, the time it may take (the replay
// from the pool's snapshot and the hypothetical events together), and
// how many run at once: in all, and per pool, so that one pool's
// what-ifs cannot take every slot.
const (
	MaxWhatIfEvents          = 100
	DefaultWhatIfTimeout     = 10 * time.Second
	DefaultWhatIfConcurrency = 2
)

// ReasonWhatIfTimeout is the answer of a what-if past its time budget.
const ReasonWhatIfTimeout = "what_if_timeout"

// WithWhatIfLimits sets a what-if's time budget and how many run at once
// (defaults DefaultWhatIfTimeout, DefaultWhatIfConcurrency); each pool,
// and each token, has at most one running.
func WithWhatIfLimits(timeout time.Duration, concurrent int) Option {
	return func(s *Server) {
		if timeout > 0 {
			s.whatIf.timeout = timeout
		}
		if concurrent > 0 {
			s.whatIf.slots = make(chan struct{}, concurrent)
		}
	}
}

// whatIfs bounds the what-ifs of a server.
type whatIfs struct {
	timeout time.Duration
	slots   chan struct{} // one token per running what-if
	mu      sync.Mutex
	pools   map[string]bool // the pools with one running
	holders map[string]bool // the bearer tokens (by name) with one running
}

func newWhatIfs() *whatIfs {
	return &whatIfs{timeout: DefaultWhatIfTimeout, slots: make(chan struct{}, DefaultWhatIfConcurrency),
		pools: map[string]bool{}, holders: map[string]bool{}}
}

// acquire takes a slot for a what-if (or a time travel) of pool asked
// with token holder without waiting: the caller is answered 503 busy
// when every slot, the pool's, or the token's is taken. One at a time
// per token: a token that reads two pools would otherwise hold both of
// the default two slots, one what-if after another, and every other
// token's what-ifs and time travel would be answered busy (decision
// 396).
func (w *whatIfs) acquire(pool, holder string) (release func(), ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pools[pool] || (holder != "" && w.holders[holder]) {
		return nil, false
	}
	select {
	case w.slots <- struct{}{}:
	default:
		return nil, false
	}
	w.pools[pool] = true
	if holder != "" {
		w.holders[holder] = true
	}
	return func() {
		w.mu.Lock()
		delete(w.pools, pool)
		if holder != "" {
			delete(w.holders, holder)
		}
		w.mu.Unlock()
		<-w.slots
	}, true
}

// forkHolder names the token of a request for the what-ifs' bound: ""
// for a request another read middleware let in (WithReadMiddleware),
// which names no token and is bounded per pool and in all only.
func forkHolder(ctx context.Context) string {
	if id, ok := IdentityFrom(ctx); ok && id != nil {
		return id.Name
	}
	return ""
}

// whatIfBody is the request of a what-if (client.WhatIfRequest), its
// events decoded one by one.
type whatIfBody struct {
	// AtSeq is a pointer so that an at_seq of 0, which names no point,
	// is told from one left out (now).
	AtSeq  *uint64           `json:"at_seq,omitempty"`
	AtTime *reqTime          `json:"at_time,omitempty"`
	Events []json.RawMessage `json:"events"`
}

// whatIfEvent is client.WhatIfEvent as the API reads it: its time by
// events.ParseTime (a leap second too, decision 520).
type whatIfEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
	Time *reqTime        `json:"time,omitempty"`
}

// reqTime is a time of a request's body, read by events.ParseTime, the
// one reading of a time given to the ledger (decision 520); checkJSON
// checks it as a time.
type reqTime time.Time

func (t *reqTime) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := events.ParseTime(s)
	if err != nil {
		return err
	}
	*t = reqTime(v)
	return nil
}

// postWhatIf answers what hypothetical events would do to a pool, forked
// from the log (internal/whatif). It needs the read scope (Authorize) and
// appends nothing.
func (s *Server) postWhatIf(w http.ResponseWriter, r *http.Request) {
	res, aerr := s.whatIfRequest(w, r)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) whatIfRequest(w http.ResponseWriter, r *http.Request) (*client.WhatIf, *apiError) {
	pool := r.PathValue("pool")
	if err := stream.ValidatePool(pool); err != nil {
		return nil, refusal(err, nil)
	}
	if aerr := requireJSON(r); aerr != nil {
		return nil, aerr
	}
	id, _ := IdentityFrom(r.Context())
	point, evs, aerr := decodeWhatIf(http.MaxBytesReader(w, r.Body, MaxBody), id.Name)
	if aerr != nil {
		return nil, aerr
	}
	release, ok := s.whatIf.acquire(pool, forkHolder(r.Context()))
	if !ok {
		return nil, &apiError{status: http.StatusServiceUnavailable, reason: ReasonBusy, retryAfter: time.Second,
			msg: fmt.Sprintf("as many what-ifs as this ledger runs at once are running (or one of pool %s, or one of this token): retry", pool)}
	}
	defer release()
	if !s.nc.IsConnected() {
		return nil, unavailable(ReasonUnavailable, "NATS is not connected: a what-if reads the pool's events from the log; retry", errors.New(s.nc.Status().String()))
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.whatIf.timeout)
	defer cancel()
	if point.Seq > 0 {
		// A sequence the log does not have yet was forked at the pool's
		// last event as if it were that point (decision 507).
		end, err := stream.LastSeq(ctx, s.nc)
		if err != nil {
			return nil, unavailable(ReasonUnavailable, "the log's last sequence: retry", err)
		}
		if point.Seq > end {
			return nil, badRequest(ReasonBadRequest, "at_seq %d: past the end of the log (its last sequence is %d)", point.Seq, end)
		}
	}
	fork, err := whatif.New(ctx, whatif.Config{DB: s.db, Log: logReader{s}, Trusted: s.trusted, Validate: s.validateOne, Development: s.development}, pool, point, s.clock())
	if err == nil {
		var res *client.WhatIf
		if res, err = fork.Run(ctx, evs); err == nil {
			return res, nil
		}
	}
	if ctx.Err() != nil && r.Context().Err() == nil {
		return nil, &apiError{status: http.StatusServiceUnavailable, reason: ReasonWhatIfTimeout, retryAfter: time.Second,
			msg: fmt.Sprintf("the what-if took longer than %v (the pool's events since its last snapshot, and the hypothetical ones): retry, or ask about fewer events", s.whatIf.timeout)}
	}
	if errors.Is(err, projections.ErrNeedsNewer) {
		return nil, unavailable(ReasonNeedsNewer, err.Error(), err)
	}
	return nil, unavailable(ReasonUnavailable, fmt.Sprintf("pool %s: could not fork its state from the log and its snapshots: retry", pool), err)
}

// decodeWhatIf reads a what-if's body: the point and the events, each
// decoded and bounded as an appended event is (decoder.event), up to
// MaxWhatIfEvents.
func decodeWhatIf(body io.Reader, producer string) (whatif.Point, []whatif.Event, *apiError) {
	b, err := io.ReadAll(body)
	if err != nil {
		return whatif.Point{}, nil, readFailure(err)
	}
	if aerr := checkJSON(b, reflect.TypeFor[whatIfBody](), whatIfRoot); aerr != nil {
		aerr.msg += ` (send {"events": [...], "at_seq" or "at_time"})`
		return whatif.Point{}, nil, aerr
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var rq whatIfBody
	if err := dec.Decode(&rq); err != nil {
		return whatif.Point{}, nil, jsonReadFailure(err, "the what-if")
	}
	if aerr := trailing(dec); aerr != nil {
		return whatif.Point{}, nil, aerr
	}
	switch {
	case rq.AtSeq != nil && rq.AtTime != nil:
		return whatif.Point{}, nil, badRequest(ReasonBadRequest, "at_seq and at_time: give one point, or none for now")
	case rq.AtSeq != nil && *rq.AtSeq == 0:
		// Taken as "not given" it forked the present.
		return whatif.Point{}, nil, badRequest(ReasonBadRequest, "at_seq 0: sequences start at 1 (leave at_seq out for now)")
	case rq.AtTime != nil && time.Time(*rq.AtTime).IsZero():
		return whatif.Point{}, nil, badRequest(ReasonBadRequest, "at_time %s: before every event of every pool (leave at_time out for now)", time.Time(*rq.AtTime).Format(time.RFC3339))
	}
	if len(rq.Events) > MaxWhatIfEvents {
		return whatif.Point{}, nil, badRequest(ReasonTooManyEvents, "%d events: a what-if folds at most %d", len(rq.Events), MaxWhatIfEvents)
	}
	var point whatif.Point
	if rq.AtSeq != nil {
		point.Seq = *rq.AtSeq
	}
	if rq.AtTime != nil {
		point.Time = time.Time(*rq.AtTime)
	}
	evs := make([]whatif.Event, len(rq.Events))
	d := decoder{producer: producer}
	for i, raw := range rq.Events {
		if aerr := checkJSON(raw, reflect.TypeFor[client.WhatIfEvent](), ""); aerr != nil {
			aerr.index = at(i)
			return whatif.Point{}, nil, aerr
		}
		var e whatIfEvent
		if err := json.Unmarshal(raw, &e); err != nil {
			aerr := jsonReadFailure(err, "the event")
			aerr.index = at(i)
			return whatif.Point{}, nil, aerr
		}
		in, aerr := d.event(client.Event{Type: e.Type, Data: e.Data}, i)
		if aerr != nil {
			return whatif.Point{}, nil, aerr
		}
		evs[i] = whatif.Event{Payload: in.payload}
		if e.Time != nil {
			at := time.Time(*e.Time)
			evs[i].Time = &at
		}
	}
	return point, evs, nil
}

// validateOne judges a hypothetical event as an append of it alone would
// be judged: the pool's host limit, then the engine.
func (s *Server) validateOne(p *domain.Pool, payload events.Payload) error {
	if aerr := checkHosts(p, []incoming{{payload: payload}}, []int{0}); aerr != nil {
		return errors.New(aerr.msg)
	}
	return p.Validate(payload)
}

// forkAt is the pool's engine state just after its event seq, for the
// console's time travel: the fork a what-if makes (internal/whatif: the
// nearest snapshot, then the log through the projector's fold), under
// the same bounds (one at a time per pool and per token, the what-ifs' slots, their
// time budget), so time travel cannot starve the ledger either.
func (s *Server) forkAt(ctx context.Context, pool string, seq uint64) (*domain.Pool, error) {
	release, err := s.forkSlot(ctx, pool)
	if err != nil {
		return nil, err
	}
	defer release()
	if !s.nc.IsConnected() {
		return nil, fmt.Errorf("NATS is not connected: %s", s.nc.Status())
	}
	ctx, cancel := context.WithTimeout(ctx, s.whatIf.timeout)
	defer cancel()
	fork, err := whatif.New(ctx, whatif.Config{DB: s.db, Log: logReader{s}, Trusted: s.trusted, Development: s.development}, pool, whatif.Point{Seq: seq}, s.clock())
	if err != nil {
		return nil, err
	}
	return fork.Pool(), nil
}

// forkSlot takes a what-if's slot for the request of ctx on pool, for a
// time travel or an explain story (the console's Config.Slot): they fold
// the pool's log as a what-if does, under its bounds.
func (s *Server) forkSlot(ctx context.Context, pool string) (release func(), err error) {
	release, ok := s.whatIf.acquire(pool, forkHolder(ctx))
	if !ok {
		return nil, fmt.Errorf("%w (pool %s or this token has one running, or every slot is taken)", console.ErrBusy, pool)
	}
	return release, nil
}

// logReader reads a what-if's log with the ledger's identity.
type logReader struct{ s *Server }

func (l logReader) LastSeq(ctx context.Context, pool string) (uint64, error) {
	return l.s.lastPoolSeq(ctx, pool)
}

func (l logReader) Read(ctx context.Context, pool string, from, to uint64, fn func(audit.Message) error) error {
	if from > to {
		return nil
	}
	// Authenticated here, over the cores, against the keys the what-if's
	// replayer trusts (whatif.Config.Trusted is the server's).
	if err := audit.ReadRange(ctx, l.s.nc, from, to, stream.PoolFilter(pool), l.s.trusted, fn); err != nil {
		return fmt.Errorf("read pool %s from %d: %w", pool, from, err)
	}
	return nil
}

// isWhatIf reports whether r asks for a what-if: a POST that only reads,
// which the console's own page may send (checkOrigin).
func isWhatIf(r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/pools/")
	pool, tail, _ := strings.Cut(rest, "/")
	return ok && r.Method == http.MethodPost && pool != "" && tail == "what-if"
}
