package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections/query"
)

// Config is what the console needs.
type Config struct {
	// DB is the projection; nil answers 503 on every data endpoint.
	DB *pgxpool.Pool
	// JS is the log, for the projection lag and the explain stories
	// (re-folded from the nearest snapshot); nil leaves out the lag and
	// answers explain with 503.
	JS jetstream.JetStream
	// Auth wraps every data endpoint (the API's read-scope check); nil
	// lets every request through.
	Auth func(http.Handler) http.Handler
	// StreamAuth wraps the live stream instead of Auth when set (the API
	// counts a stream against the token's streams, not its requests).
	StreamAuth func(http.Handler) http.Handler
	// Halted, when set, tells which pools' projections stopped, with
	// the reason; the pools list shows it.
	Halted func(ctx context.Context) (map[string]string, error)
	// Allowed tells whether the request may read pool (the API: the
	// pools of the request's token). The pools list and the live stream
	// leave out the others, and a live stream of one such pool is
	// refused; routes naming a pool are checked by Auth. Nil allows every
	// pool.
	Allowed func(r *http.Request, pool string) bool
	// ReadTimeout bounds each read of the projection (the live stream
	// excepted): past it the answer is 503 read_timeout with Retry-After,
	// as the API's read endpoints answer (default 5s).
	ReadTimeout time.Duration
	// Poll is how often the live streams' poller reads the checkpoints
	// (default 200ms).
	Poll time.Duration
	// Fork is the pool's engine state just after its event seq, folded
	// from the nearest snapshot and the log exactly as the projector
	// folds it (the API gives internal/whatif's fork, bounded like a
	// what-if); time travel (as-of) shows it. It answers ErrBusy when as
	// many forks as the ledger runs at once are running. Nil answers
	// as-of with 503.
	Fork func(ctx context.Context, pool string, seq uint64) (*domain.Pool, error)
	// Slot takes one of the same slots for the explain stories, which
	// re-fold the pool's log from its nearest snapshot as a fork does
	// (up to a second or two of a core each): it answers ErrBusy when
	// none is free, and release gives it back. Nil: explains are not
	// bounded but by the token's requests in progress.
	Slot   func(ctx context.Context, pool string) (release func(), err error)
	Logger *slog.Logger
	// Replay configures the re-folds of the explain stories (the rules
	// version in development for ledger dev --rules-development).
	Replay []audit.Option
}

// ErrBusy is what Config.Fork answers when it cannot start one more fork
// now: the request is answered 503 busy with Retry-After.
var ErrBusy = errors.New("as many forks of a pool's history as this ledger runs at once are running")

// Console serves the page and its data.
type Console struct {
	cfg  Config
	log  *slog.Logger
	live *hub
	quit chan struct{}
	once sync.Once
}

// Shutdown ends the open live streams, so that a graceful HTTP shutdown
// (which waits for requests to finish) is not held up by them.
func (c *Console) Shutdown() { c.once.Do(func() { close(c.quit) }) }

// New returns a console; Register mounts it.
func New(cfg Config) *Console {
	if cfg.Auth == nil {
		cfg.Auth = func(h http.Handler) http.Handler { return h }
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 200 * time.Millisecond
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Console{cfg: cfg, log: log, quit: make(chan struct{})}
	c.live = newHub(c.pollCheckpoints, cfg.Poll, log)
	return c
}

// Register mounts the page (/console/, and / redirecting to it) and the
// data endpoints on mux.
func (c *Console) Register(mux *http.ServeMux) {
	mux.Handle("GET /console/", http.StripPrefix("/console/", assetHandler()))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusFound)
	})
	data := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, c.cfg.Auth(h)) }
	data("GET /v1/pools", c.timed(c.getPools))
	data("GET /v1/pools/{pool}", c.timed(c.getPool))
	data("GET /v1/pools/{pool}/as-of", c.timed(c.getAsOf))
	data("GET /v1/pools/{pool}/timeline", c.timed(c.getTimeline))
	data("GET /v1/pools/{pool}/decisions/{seq}/{ordinal}/explain", c.getExplain) // its own bound: it re-folds the log
	live := c.cfg.StreamAuth
	if live == nil {
		live = c.cfg.Auth
	}
	mux.Handle("GET /v1/live", live(http.HandlerFunc(c.getLive)))
}

// timed runs h under the read timeout.
func (c *Console) timed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), c.cfg.ReadTimeout)
		defer cancel()
		h(w, r.WithContext(ctx))
	}
}

// allowed reports whether the request may read pool.
func (c *Console) allowed(r *http.Request, pool string) bool {
	return c.cfg.Allowed == nil || c.cfg.Allowed(r, pool)
}

// Reasons of error answers, as in the API.
const (
	reasonBadRequest  = "bad_request"
	reasonNotFound    = "not_found"
	reasonNoDatabase  = "no_database"
	reasonDBFailed    = "database_failed"
	reasonReadTimeout = "read_timeout"
	reasonNotAllowed  = "pool_not_allowed"
	reasonUnavailable = "unavailable"
	reasonBusy        = "busy"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers err's text: the console's own words only (a
// refusal of the request). A failure below (PostgreSQL, NATS) goes
// through failed, which logs it and answers in general words.
func writeError(w http.ResponseWriter, status int, reason string, err error) {
	writeJSON(w, status, ErrorResponse{Error: err.Error(), Reason: reason, RequestID: w.Header().Get(requestIDHeader)})
}

// requestIDHeader is where the API puts each request's id.
const requestIDHeader = "X-Request-Id"

// failed logs cause (a driver's or server's error, whose text may name
// servers, users, tables or queries) under the request's id and answers
// 503 with msg, the console's own words, and Retry-After.
func (c *Console) failed(w http.ResponseWriter, r *http.Request, reason, msg string, cause error) {
	c.log.Warn("console request failed", "request_id", w.Header().Get(requestIDHeader), "path", r.URL.Path, "reason", reason, "err", cause)
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, reason, errors.New(msg))
}

// db returns the projection, or answers 503.
func (c *Console) db(w http.ResponseWriter) *pgxpool.Pool {
	if c.cfg.DB == nil {
		writeError(w, http.StatusServiceUnavailable, reasonNoDatabase, errors.New("this ledger has no database configured"))
	}
	return c.cfg.DB
}

func (c *Console) dbFailure(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errNoPool) {
		writeError(w, http.StatusNotFound, reasonNotFound, err)
		return
	}
	if errors.Is(err, context.DeadlineExceeded) {
		c.failed(w, r, reasonReadTimeout, "reading the projection took too long (PostgreSQL busy or locked): retry", err)
		return
	}
	if errors.Is(err, context.Canceled) {
		return // the client went away
	}
	c.failed(w, r, reasonDBFailed, "reading the projection failed (PostgreSQL unavailable?): retry; the server's log has the details under the request id", err)
}

// pathPool checks the {pool} of the URL.
func pathPool(w http.ResponseWriter, r *http.Request) (string, bool) {
	pool := r.PathValue("pool")
	if err := stream.ValidatePool(pool); err != nil {
		writeError(w, http.StatusBadRequest, reasonBadRequest, err)
		return "", false
	}
	return pool, true
}

// Page sizes of /v1/pools: a site may hold thousands of pools, and each
// row of a page costs a summary query and a look at the stream.
const (
	DefaultPoolsLimit = 100
	MaxPoolsLimit     = 1000
)

// getPools answers a page of the pools the token may read, in name
// order: limit pools after the cursor after, optionally only those whose
// name starts with prefix; "after" in the answer is the next page's cursor.
func (c *Console) getPools(w http.ResponseWriter, r *http.Request) {
	after, prefix, limit, err := parsePoolsPage(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, reasonBadRequest, err)
		return
	}
	db := c.db(w)
	if db == nil {
		return
	}
	res := PoolsResponse{Pools: []PoolSummary{}}
	err = query.ReadOnly(r.Context(), db, func(q query.Querier) error {
		var keep func(string) bool // nil: every pool, and the page is a LIMIT
		if c.cfg.Allowed != nil {
			keep = func(pool string) bool { return c.cfg.Allowed(r, pool) }
		}
		names, more, err := query.PoolNames(r.Context(), q, after, prefix, keep, limit)
		if err != nil || len(names) == 0 {
			return err
		}
		if more {
			res.After = names[len(names)-1]
		}
		sums, _, err := readSummaries(r.Context(), q, names...)
		if sums != nil {
			res.Pools = sums
		}
		return err
	})
	if err != nil {
		c.dbFailure(w, r, err)
		return
	}
	c.addStatus(r.Context(), res.Pools)
	writeJSON(w, http.StatusOK, res)
}

func parsePoolsPage(r *http.Request) (after, prefix string, limit int, err error) {
	q := r.URL.Query()
	after, prefix, limit = q.Get("after"), q.Get("prefix"), DefaultPoolsLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPoolsLimit {
			return "", "", 0, fmt.Errorf("limit %q: want 1..%d", v, MaxPoolsLimit)
		}
		limit = n
	}
	if after != "" {
		if err := stream.ValidatePool(after); err != nil {
			return "", "", 0, fmt.Errorf("after: want the cursor of a previous page: %w", err)
		}
	}
	if prefix != "" {
		if err := stream.ValidatePool(prefix); err != nil {
			return "", "", 0, fmt.Errorf("prefix: %w", err)
		}
	}
	return after, prefix, limit, nil
}

// addStatus adds what the projection does not hold: the lag behind the
// log and whether the pool is halted.
func (c *Console) addStatus(ctx context.Context, sums []PoolSummary) {
	if c.cfg.JS != nil {
		if s, err := c.cfg.JS.Stream(ctx, stream.Name); err == nil {
			for i := range sums {
				m, err := s.GetLastMsgForSubject(ctx, stream.PoolFilter(sums[i].Pool))
				if err != nil {
					continue
				}
				lag := uint64(0)
				if m.Sequence > sums[i].Seq {
					lag = m.Sequence - sums[i].Seq
				}
				sums[i].Lag = &lag
			}
		}
	}
	if c.cfg.Halted != nil {
		halted, err := c.cfg.Halted(ctx)
		if err != nil {
			c.log.Warn("console: halted pools", "err", err)
			return
		}
		for i := range sums {
			reason, ok := halted[sums[i].Pool]
			sums[i].Halted, sums[i].HaltedReason = &ok, reason
		}
	}
}

func (c *Console) getPool(w http.ResponseWriter, r *http.Request) {
	pool, ok := pathPool(w, r)
	if !ok {
		return
	}
	db := c.db(w)
	if db == nil {
		return
	}
	var res *PoolResponse
	// One snapshot, so its reads agree.
	err := query.ReadOnly(r.Context(), db, func(q query.Querier) (err error) {
		res, err = readPool(r.Context(), q, pool)
		return err
	})
	if err != nil {
		c.dbFailure(w, r, err)
		return
	}
	sums := []PoolSummary{res.PoolSummary}
	c.addStatus(r.Context(), sums)
	res.PoolSummary = sums[0]
	writeJSON(w, http.StatusOK, res)
}

// getAsOf answers ?seq=N or ?time=RFC3339 with the pool just after its
// last event at or before that point.
func (c *Console) getAsOf(w http.ResponseWriter, r *http.Request) {
	pool, ok := pathPool(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var seq uint64
	var at time.Time
	var err error
	switch {
	case q.Get("seq") != "" && q.Get("time") != "":
		err = errors.New("give seq or time, not both")
	case q.Get("seq") != "":
		seq, err = parseSeq("seq", q.Get("seq"))
	case q.Get("time") != "":
		at, err = events.ParseTime(q.Get("time"))
		if err != nil {
			err = fmt.Errorf("time: %w", err)
		}
	default:
		err = errors.New("give seq=N or time=RFC3339")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, reasonBadRequest, err)
		return
	}
	db := c.db(w)
	if db == nil {
		return
	}
	if c.cfg.Fork == nil {
		writeError(w, http.StatusServiceUnavailable, reasonUnavailable, errors.New("this ledger reads no log: time travel folds the pool's history"))
		return
	}
	var res *AsOfResponse
	err = query.ReadOnly(r.Context(), db, func(q query.Querier) error {
		s, err := resolveSeq(r.Context(), q, pool, seq, at)
		if err != nil {
			return err
		}
		res, err = readEventAt(r.Context(), q, pool, s)
		return err
	})
	if err != nil {
		c.dbFailure(w, r, err)
		return
	}
	p, err := domain.NewPool(pool), error(nil) // before its first event
	if res.Seq > 0 {
		p, err = c.cfg.Fork(r.Context(), pool, res.Seq)
	}
	switch {
	case errors.Is(err, ErrBusy):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, reasonBusy, err)
		return
	case errors.Is(err, context.Canceled):
		return
	case errors.Is(err, context.DeadlineExceeded):
		c.failed(w, r, reasonReadTimeout, "folding the pool's history took too long: retry", err)
		return
	case err != nil:
		c.failed(w, r, reasonUnavailable, "folding the pool's history failed (NATS unavailable?): retry; the server's log has the details under the request id", err)
		return
	}
	stateOf(p, res)
	writeJSON(w, http.StatusOK, res)
}

// Page sizes of the timeline.
const (
	DefaultTimelineLimit = 50
	MaxTimelineLimit     = 1000
)

func (c *Console) getTimeline(w http.ResponseWriter, r *http.Request) {
	pool, ok := pathPool(w, r)
	if !ok {
		return
	}
	f, err := parseTimelineFilter(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, reasonBadRequest, err)
		return
	}
	db := c.db(w)
	if db == nil {
		return
	}
	f.limit++ // one more, to know whether there is a next page
	ds, err := readTimeline(r.Context(), db, pool, f)
	if err != nil {
		c.dbFailure(w, r, err)
		return
	}
	res := TimelineResponse{Pool: pool, Decisions: ds}
	if len(ds) == f.limit {
		res.Decisions = ds[:f.limit-1]
		last := res.Decisions[len(res.Decisions)-1]
		res.Before = fmt.Sprintf("%d.%d", last.EventSeq, last.Ordinal)
	}
	writeJSON(w, http.StatusOK, res)
}

func parseTimelineFilter(r *http.Request) (timelineFilter, error) {
	q := r.URL.Query()
	f := timelineFilter{consumer: q.Get("consumer"), kind: q.Get("kind"), rule: q.Get("rule"), limit: DefaultTimelineLimit}
	switch {
	case f.consumer == "/":
		f.consumer = "" // the root: every consumer
	case f.consumer != "" && (!strings.HasPrefix(f.consumer, "/") || strings.HasSuffix(f.consumer, "/") || len(f.consumer) > events.MaxPathLen || !filterText(f.consumer)):
		return f, fmt.Errorf("consumer %q: want a consumer's path like /eng/dev (it and its descendants are shown)", f.consumer)
	}
	// What PostgreSQL cannot hold in text (a NUL, bytes that are not
	// UTF-8) is the client's mistake, not a failed read: refused here,
	// it was a 503 "PostgreSQL unavailable?" with Retry-After (decision
	// 426). Kinds and rules are short identifiers.
	for name, v := range map[string]string{"kind": f.kind, "rule": f.rule} {
		if len(v) > maxFilterLen || !filterText(v) {
			return f, fmt.Errorf("%s %q: want a decision's %s (at most %d bytes of UTF-8 without control characters), like %s", name, truncate(v, maxFilterLen), name, maxFilterLen, map[string]string{"kind": "reclaim", "rule": "share_ratio.reclaim"}[name])
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxTimelineLimit {
			return f, fmt.Errorf("limit %q: want 1..%d", v, MaxTimelineLimit)
		}
		f.limit = n
	}
	if v := q.Get("before"); v != "" {
		seq, ord, ok := strings.Cut(v, ".")
		s, err1 := strconv.ParseUint(seq, 10, 64)
		o, err2 := strconv.ParseUint(ord, 10, 64)
		if !ok || err1 != nil || err2 != nil || s < 1 {
			return f, fmt.Errorf("before %q: want the cursor SEQ.ORDINAL of a previous page (SEQ 1 to %d, ORDINAL 0 to %d)", v, uint64(math.MaxUint64), uint64(math.MaxUint64))
		}
		f.beforeSeq, f.beforeOrdinal = timelineCursor(s, o)
	}
	return f, nil
}

// maxFilterLen bounds the timeline's kind and rule filters.
const maxFilterLen = 128

// filterText reports whether a filter of the timeline is text a column
// can be compared with: UTF-8 without control characters (NUL included).
func filterText(v string) bool {
	return utf8.ValidString(v) && !strings.ContainsFunc(v, unicode.IsControl)
}

// truncate shortens v to at most n bytes for an error message.
func truncate(v string, n int) string {
	if len(v) > n {
		return v[:n] + "..."
	}
	return v
}

// timelineCursor puts a cursor "strictly before (seq, ord)" within the
// columns' ranges without changing which decisions precede it: an
// ordinal past any an event can have means "up to the end of event
// seq", that is before (seq+1, 0); a sequence past any stored means
// before every stored decision.
func timelineCursor(seq, ord uint64) (uint64, int) {
	if ord > query.MaxOrdinal {
		if seq == math.MaxUint64 {
			return query.MaxSeq, query.MaxOrdinal
		}
		seq, ord = seq+1, 0
	}
	if seq > query.MaxSeq {
		return query.MaxSeq, query.MaxOrdinal
	}
	return seq, int(ord)
}

// parseSeq reads a sequence parameter: any unsigned 64-bit number (a
// JetStream sequence), clamped to what the projection stores
// (query.ClampSeq: a point after every stored event).
func parseSeq(name, v string) (uint64, error) {
	seq, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a sequence number, 0 to %d", name, v, uint64(math.MaxUint64))
	}
	return query.ClampSeq(seq), nil
}
