package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
)

// Timeout bounds each probe.
const Timeout = 2 * time.Second

// CacheFor is how long an answer is reused: the probes need no token,
// and each check asks JetStream and PostgreSQL, so without it anyone
// could make the ledger do that work at any rate (a flood of /healthz
// would compete with the appends for JetStream's API). A load balancer
// probes every few seconds: a second old is current for it.
const CacheFor = time.Second

// DefaultMaxLag is how far behind the stream the projection may be and
// still be ready: a projector keeps up within a second or two under
// load, so half a minute means it is stopped, stuck or overwhelmed, and
// reads would show a state too old to act on.
const DefaultMaxLag = 30 * time.Second

// MaxHalted bounds how many halted pools a probe lists: a few are an
// incident, thousands a bug to fix first.
const MaxHalted = 1000

// maxProjectors bounds the projector_offsets rows read (one per
// partition: a few dozen in any sane deployment).
const maxProjectors = 1024

// Checker answers the probes of one process.
type Checker struct {
	NC *nats.Conn
	JS jetstream.JetStream
	// DB is the projection (nil: readiness says "not configured" and is
	// not ready).
	DB *pgxpool.Pool
	// Writable makes liveness need a stream that accepts appends (the
	// API); otherwise one that answers (the projector).
	Writable bool
	// Running, when set, is part of liveness (the projector: its fold
	// loop has not ended).
	Running func() bool
	// Stuck, when set, is part of liveness too (the projector: its
	// retries have failed without a success for long, as when NATS or
	// PostgreSQL refuses one of its permissions).
	Stuck func() bool
	// Projectors selects the projector_offsets rows readiness looks at
	// (nil: every row, the whole projection).
	Projectors func(name string) bool
	// MaxLag is readiness's bound (DefaultMaxLag when 0).
	MaxLag time.Duration
	Log    *slog.Logger

	live  cached[Liveness]
	ready cached[Readiness]
}

// cached is the last answer of a check and when it was made; concurrent
// callers wait for one check rather than each making theirs.
type cached[T any] struct {
	mu  sync.Mutex
	at  time.Time
	val T
}

func (c *cached[T]) get(check func() T) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= CacheFor {
		c.val, c.at = check(), time.Now()
	}
	return c.val
}

// Liveness is the body of /healthz.
type Liveness struct {
	Status string `json:"status"` // ok | down
	NATS   string `json:"nats"`   // ok | down
	// Stream is ok, missing, full, not writable, down (no answer) or
	// unknown (NATS down).
	Stream string `json:"stream"`
	// Running is the projector's fold loop: ok, stopped, or stuck (it
	// runs, but has failed without a success for long: its log says
	// why); absent for the API.
	Running string `json:"running,omitempty"`
}

// Readiness is the body of /readyz.
type Readiness struct {
	Status   string `json:"status"`   // ok | degraded (halted pools) | not ready
	Postgres string `json:"postgres"` // ok | down | not configured
	// Projection is current (every projector it looks at less than
	// MaxLag behind), behind, or unknown (the stream or PostgreSQL
	// could not be asked).
	Projection string `json:"projection"`
	// LagSeconds is the age of the oldest unprojected message of the
	// projector furthest behind (0 when caught up).
	LagSeconds  *float64     `json:"lag_seconds,omitempty"`
	HaltedPools []HaltedPool `json:"halted_pools,omitempty"`
}

// HaltedPool is a pool whose projection stopped (the reason is left out:
// it may name consumers, and the probes need no token).
type HaltedPool struct {
	Pool string `json:"pool"`
	Seq  uint64 `json:"seq"`
}

// Register mounts GET /healthz and GET /readyz on mux.
func (c *Checker) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", c.ServeLive)
	mux.HandleFunc("GET /readyz", c.ServeReady)
}

// ServeLive answers /healthz: 200 ok, or 503 down with Retry-After (an
// answer at most CacheFor old).
func (c *Checker) ServeLive(w http.ResponseWriter, r *http.Request) {
	l := c.live.get(func() Liveness { return c.Live(context.WithoutCancel(r.Context())) })
	answer(w, l.Status == "ok", l)
}

// ServeReady answers /readyz: 200 ok or degraded, or 503 not ready with
// Retry-After (an answer at most CacheFor old).
func (c *Checker) ServeReady(w http.ResponseWriter, r *http.Request) {
	rd := c.ready.get(func() Readiness { return c.Ready(context.WithoutCancel(r.Context())) })
	answer(w, rd.Status != "not ready", rd)
}

func answer(w http.ResponseWriter, ok bool, v any) {
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (c *Checker) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// Live checks NATS, the stream and (for a projector) its fold loop.
func (c *Checker) Live(ctx context.Context) Liveness {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	l := Liveness{Status: "ok", NATS: "ok", Stream: "ok"}
	if !c.NC.IsConnected() {
		l.NATS, l.Stream = "down", "unknown"
	} else if c.Writable {
		if state, err := StreamWritable(ctx, c.JS); err != nil {
			l.Stream = state
			c.log().Warn("healthz: stream", "state", state, "err", err)
		}
	} else if _, err := c.JS.Stream(ctx, stream.Name); err != nil {
		l.Stream = "down"
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			l.Stream = "missing"
		}
		c.log().Warn("healthz: stream", "err", err)
	}
	if c.Running != nil {
		l.Running = "ok"
		if !c.Running() {
			l.Running = "stopped"
		} else if c.Stuck != nil && c.Stuck() {
			l.Running = "stuck"
		}
	}
	if l.NATS != "ok" || l.Stream != "ok" || (l.Running != "" && l.Running != "ok") {
		l.Status = "down"
	}
	return l
}

// Ready checks PostgreSQL and how far behind the stream the projection
// is.
func (c *Checker) Ready(ctx context.Context) Readiness {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	rd := Readiness{Status: "ok", Postgres: "ok", Projection: "unknown"}
	if c.DB == nil {
		rd.Postgres, rd.Status = "not configured", "not ready"
		return rd
	}
	if err := c.DB.Ping(ctx); err != nil {
		rd.Postgres, rd.Status = "down", "not ready"
		c.log().Warn("readyz: PostgreSQL", "err", err)
		return rd
	}
	lag, err := c.lag(ctx)
	switch {
	case err != nil:
		rd.Status = "not ready"
		c.log().Warn("readyz: projection lag", "err", err)
	case lag > c.maxLag():
		rd.Projection, rd.Status, rd.LagSeconds = "behind", "not ready", &lag
	default:
		rd.Projection, rd.LagSeconds = "current", &lag
	}
	if halted, err := query.HaltedPools(ctx, c.DB, MaxHalted); err == nil {
		for _, h := range halted {
			rd.HaltedPools = append(rd.HaltedPools, HaltedPool{Pool: h.Pool, Seq: h.Seq})
		}
	}
	if rd.Status == "ok" && len(rd.HaltedPools) > 0 {
		rd.Status = "degraded"
	}
	return rd
}

func (c *Checker) maxLag() float64 {
	if c.MaxLag > 0 {
		return c.MaxLag.Seconds()
	}
	return DefaultMaxLag.Seconds()
}

// lag is the age, in seconds, of the oldest message not projected by the
// projectors readiness looks at: after the lowest of their offsets (0,
// the whole stream, while none has committed yet).
func (c *Checker) lag(ctx context.Context) (float64, error) {
	if !c.NC.IsConnected() {
		return 0, errors.New("NATS is not connected")
	}
	offsets, err := query.ProjectorOffsets(ctx, c.DB, maxProjectors)
	if err != nil {
		return 0, err
	}
	var lowest uint64
	found := false
	var mine []query.Offset
	for _, o := range offsets {
		if c.Projectors != nil && !c.Projectors(o.Name) {
			continue
		}
		mine = append(mine, o)
		if !found || o.Seq < lowest {
			lowest, found = o.Seq, true
		}
	}
	// Events set aside for a busy pool are below the offsets but not
	// folded: the projection is behind by the oldest of them too
	// (decision 465).
	aside, err := query.SetAsidePools(ctx, c.DB, maxSetAsidePools)
	if err != nil {
		return 0, err
	}
	asideAge := 0.0
	for _, a := range aside {
		for _, o := range mine {
			if o.Covers(a.Pool, projections.PartitionOf) {
				asideAge = max(asideAge, time.Since(a.Oldest).Seconds())
				break
			}
		}
	}
	st, err := c.JS.Stream(ctx, stream.Name)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream.Name, err)
	}
	if st.CachedInfo().State.LastSeq <= lowest {
		return asideAge, nil
	}
	age, err := FirstUnprojectedAge(ctx, st, lowest)
	if err != nil {
		return 0, err
	}
	return max(age, asideAge), nil
}

// maxSetAsidePools bounds the pools with events set aside that readiness
// reads.
const maxSetAsidePools = 10000

// FirstUnprojectedAge is how long ago the first message after seq was
// stored, in seconds. The lookup is "next at or after seq+1": a gap in
// the sequence does not make it fail.
func FirstUnprojectedAge(ctx context.Context, st jetstream.Stream, seq uint64) (float64, error) {
	m, err := st.GetMsg(ctx, seq+1, jetstream.WithGetMsgSubject("ledger.>"))
	if err != nil {
		return 0, fmt.Errorf("first message after %d: %w", seq, err)
	}
	return max(time.Since(m.Time).Seconds(), 0), nil
}

// StreamWritable checks that the stream exists and that an append would
// be stored: not sealed, not at its own limits, and the account not out
// of storage. It returns a one-word state for the answer.
func StreamWritable(ctx context.Context, js jetstream.JetStream) (string, error) {
	st, err := js.Stream(ctx, stream.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return "missing", err
	}
	if err != nil {
		return "down", err
	}
	info := st.CachedInfo()
	cfg, state := info.Config, info.State
	switch {
	case cfg.Sealed:
		return "not writable", errors.New("stream is sealed")
	case cfg.MaxBytes > 0 && state.Bytes >= uint64(cfg.MaxBytes):
		return "full", fmt.Errorf("stream holds %d bytes of at most %d", state.Bytes, cfg.MaxBytes)
	case cfg.MaxMsgs > 0 && state.Msgs >= uint64(cfg.MaxMsgs):
		return "full", fmt.Errorf("stream holds %d messages of at most %d", state.Msgs, cfg.MaxMsgs)
	}
	acc, err := js.AccountInfo(ctx)
	if err != nil {
		return "down", fmt.Errorf("account info: %w", err)
	}
	if max := acc.Limits.MaxStore; max > 0 && acc.Store >= uint64(max) {
		return "full", fmt.Errorf("account stores %d bytes of at most %d", acc.Store, max)
	}
	return "ok", nil
}

// Instance is whether a projector (or a partition) has a live instance,
// as NATS sees its durable consumer (the consumer is named as the
// projector's projector_offsets row).
type Instance struct {
	Live bool
	// Pulling is the number of pull requests waiting on the consumer:
	// one per live instance of a partitioned projector, at most one for
	// an unpartitioned one.
	Pulling int
	// Pinned: a partition's pinned-client group holds an instance (NATS
	// unpins one that stopped pulling after the pinned TTL).
	Pinned bool
	// Why it is not live, in words.
	Why string
}

// ProjectorInstance asks NATS whether the consumer name has a live
// instance. Every live instance of a partition keeps a pull request
// waiting on its consumer, except the holder while its buffer is full
// (it is then folding messages it has not acknowledged yet); the server
// drops the requests of a closed connection at once. So a partition is
// live while a request waits, or while an instance is pinned with
// messages delivered and not acknowledged: a holder killed idle shows
// dead at once, one killed with messages in flight once NATS unpins it
// (the pinned TTL). An unpartitioned projector has no pin: it is live
// while a request waits or it was delivered a message within window (it
// folds and commits between two pulls). Between two pulls of a live
// instance there may be none for an instant: a consumer that looks dead
// is asked once more after a short pause.
func ProjectorInstance(ctx context.Context, js jetstream.JetStream, name string, window time.Duration) (Instance, error) {
	var in Instance
	for try := 0; try < 2; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return in, nil
			case <-time.After(200 * time.Millisecond):
			}
		}
		cons, err := js.Consumer(ctx, stream.Name, name)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return Instance{Why: fmt.Sprintf("its consumer %s does not exist (never started, or deleted)", name)}, nil
		}
		if err != nil {
			return Instance{}, err
		}
		info := cons.CachedInfo()
		in = Instance{Pulling: info.NumWaiting}
		for _, g := range info.PriorityGroups {
			in.Pinned = in.Pinned || g.PinnedClientID != ""
		}
		partitioned := len(info.Config.PriorityGroups) > 0
		folding := partitioned && in.Pinned && info.NumAckPending > 0
		busy := !partitioned && info.Delivered.Last != nil && time.Since(*info.Delivered.Last) < window
		if in.Live = in.Pulling > 0 || folding || busy; in.Live {
			return in, nil
		}
	}
	in.Why = fmt.Sprintf("no instance pulls from its consumer %s (stopped, crashed, or still starting)", name)
	return in, nil
}
