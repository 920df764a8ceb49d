package api

import (
	"cmp"
	"context"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/signing"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/console"
	"github.com/cluster-ledger/ledger/internal/health"
	"github.com/cluster-ledger/ledger/internal/metrics"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// Defaults of the options.
const (
	DefaultPublishTimeout = 5 * time.Second
	DefaultMaxAttempts    = 10
	// DefaultReadTimeout bounds a read endpoint's queries: past it the
	// answer is 503 with Retry-After, never a hang.
	DefaultReadTimeout = 5 * time.Second
	// MaxBatch is the most events one request may carry: the server's
	// limit on an atomic batch (JetStream's default max batch size).
	MaxBatch = 1000
	// MaxBody bounds a request body: NATS's default largest message (a
	// plan at every limit of events/limits.go fits in it), read once.
	MaxBody = 1 << 20
)

// A plan may not name more consumers than the engine accepts.
var _ [domain.MaxConsumers - events.MaxPlanConsumers]struct{}

// Option configures a Server.
type Option func(*Server)

// WithClock sets the clock that stamps event times (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Server) { s.clock = now } }

// WithReadTimeout bounds the queries of each read request (default 5s).
func WithReadTimeout(d time.Duration) Option { return func(s *Server) { s.readTimeout = d } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithPublishTimeout bounds each round trip to JetStream (default 5s):
// past it the request is answered 503 and the producer retries.
func WithPublishTimeout(d time.Duration) Option { return func(s *Server) { s.timeout = d } }

// WithSigner signs every appended event (internal/signing): the
// projector refuses, as unauthenticated, events no trusted key signed.
// Without it events are appended unsigned.
func WithSigner(sg *signing.Signer) Option { return func(s *Server) { s.signer = sg } }

// WithTrustedKeys makes the server's view of each pool refuse, as the
// projector does, the events in the log that none of keys signed
// (published around the ledger), so a forged event cannot change what the
// ledger validates new events against. Without it every event counts
// (and nothing is signed-checked), as with a projector without
// --trusted-keys.
func WithTrustedKeys(keys *signing.Keyring) Option { return func(s *Server) { s.trusted = keys } }

// WithReadMiddleware wraps the console's data endpoints instead of the
// default, the API's own read-scope check (Authorize with auth.ScopeRead).
func WithReadMiddleware(mw func(http.Handler) http.Handler) Option {
	return func(s *Server) { s.readAuth = mw }
}

// WithReadyLag is how far behind the stream the projection may be while
// GET /readyz answers ready (default health.DefaultMaxLag, 30 s).
func WithReadyLag(d time.Duration) Option { return func(s *Server) { s.readyLag = d } }

// WithHaltedPools tells the console which pools' projections stopped, and
// why; default: the console shows no halted column.
func WithHaltedPools(f func(ctx context.Context) (map[string]string, error)) Option {
	return func(s *Server) { s.halted = f }
}

// WithDevelopmentRules makes the server accept plans that name the rules
// version in development (domain.RulesDevelopment), folding them as a
// projector made with projections.WithDevelopmentRules does (its view of
// each pool, and the console's explain stories). A plan that names no
// version is still stamped with the newest released one. For tests and
// development only (ledger dev --rules-development): such a log means
// nothing to a ledger or projector without the switch.
func WithDevelopmentRules() Option {
	return func(s *Server) {
		s.development = true
		s.poolOpts = append(s.poolOpts, domain.WithDevelopmentRules())
		s.replayOpts = append(s.replayOpts, audit.WithDevelopmentRules())
	}
}

// Server is the HTTP API. It is safe for concurrent use; appends to one
// pool are serialised inside the process, and across processes by
// JetStream's expected-last-sequence check.
type Server struct {
	js          jetstream.JetStream
	nc          *nats.Conn
	stream      jetstream.Stream
	db          *pgxpool.Pool
	clock       func() time.Time
	tokens      auth.Authenticator
	origins     []string
	readTimeout time.Duration
	readyLag    time.Duration // /readyz's bound on the projection's lag
	log         *slog.Logger
	timeout     time.Duration
	maxAttempts int
	signer      *signing.Signer
	window      time.Duration    // the stream's duplicate window
	trusted     *signing.Keyring // events none of these signed are refused in the pools' views (nil: none checked)
	mux         *http.ServeMux
	handler     http.Handler
	readAuth    func(http.Handler) http.Handler
	tokenLimits TokenLimits
	perToken    *perToken // the state of tokenLimits (tokenlimits.go)
	halted      func(context.Context) (map[string]string, error)
	console     *console.Console
	metrics     *metrics.Registry
	development bool                // WithDevelopmentRules
	poolOpts    []domain.PoolOption // the engine's options for each pool's view
	replayOpts  []audit.Option      // the console's re-folds

	hold hold // appends held while the stream heals (hold.go)
	// poolNames are the stream's pool names, to refuse a new pool's
	// name that differs from one only by case (folds.go).
	poolNames poolNames
	whatIf    *whatIfs // the what-ifs running (whatif.go)

	mu       sync.Mutex
	pools    map[string]*poolState // the pools' views in memory (poolFor)
	resident int                   // how many views stay in memory (WithResidentPools)
	floor    int64                 // the priority of the view let go last (poolFor)
	uses     uint64                // views taken so far: the order of their last use
}

// DefaultResidentPools is how many pools' views the API keeps in memory
// by default: a site may have thousands of pools, most of them idle.
const DefaultResidentPools = 1024

// ResidentPools is how many pools' views the server holds in memory now.
func (s *Server) ResidentPools() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pools)
}

// WithResidentPools sets how many pools' views (engine state, the
// duplicate window's ids) the server keeps in memory (default
// DefaultResidentPools), letting the cheapest to make again go first
// (poolFor). A pool let go is made again at its next append, from the
// projection's newest state of it when that passes its checks (base.go)
// and the log after it.
func WithResidentPools(n int) Option {
	return func(s *Server) {
		if n > 0 {
			s.resident = n
		}
	}
}

// New returns a server appending to the LEDGER stream through js (the
// stream is created when missing) and reading the projection from db
// (nil: the read endpoints answer 503).
func New(ctx context.Context, js jetstream.JetStream, db *pgxpool.Pool, opts ...Option) (*Server, error) {
	s := &Server{
		tokenLimits: DefaultTokenLimits,
		js:          js, nc: js.Conn(), db: db, clock: time.Now, log: slog.Default(), readTimeout: DefaultReadTimeout,
		timeout: DefaultPublishTimeout, maxAttempts: DefaultMaxAttempts, pools: map[string]*poolState{}, resident: DefaultResidentPools, whatIf: newWhatIfs(),
	}
	for _, o := range opts {
		o(s)
	}
	s.perToken = newPerToken(s.tokenLimits)
	s.trusted.UseHistory(stream.HistorySource(js)) // a restored log's keys, from the stream
	st, err := stream.Ensure(ctx, js)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	s.stream = st
	// The ids of the window are compared by content for as long as
	// JetStream recognises them (ledger nats setup --duplicate-window).
	s.window = stream.DuplicateWindow
	if w := st.CachedInfo().Config.Duplicates; w > 0 {
		s.window = w
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/pools/{pool}/events", s.postEvents)
	s.HandleRead("GET /v1/pools/{pool}/allocations", s.timed(s.getAllocations))
	s.HandleRead("GET /v1/pools/{pool}/decisions", s.timed(s.getDecisions))
	s.HandleRead("GET /v1/status", http.HandlerFunc(s.getStatus))                 // bounded by StatusTimeout
	s.HandleRead("POST /v1/pools/{pool}/what-if", http.HandlerFunc(s.postWhatIf)) // bounded by its own limits (whatif.go)
	(&health.Checker{NC: s.nc, JS: js, DB: db, Writable: true, MaxLag: s.readyLag, Log: s.log}).Register(s.mux)
	s.mux.HandleFunc("GET /v1/openapi.json", getOpenAPI)
	if s.halted == nil && db != nil {
		s.halted = s.haltedByPool // the projector's halted_pools table
	}
	readAuth, streamAuth := s.readAuth, s.readAuth
	if readAuth == nil {
		readAuth = func(h http.Handler) http.Handler { return s.Authorize(auth.ScopeRead, h) }
		streamAuth = func(h http.Handler) http.Handler { return s.AuthorizeStream(auth.ScopeRead, h) }
	}
	s.console = console.New(console.Config{DB: db, JS: js, Auth: readAuth, StreamAuth: streamAuth, Allowed: readable, ReadTimeout: s.readTimeout,
		Halted: s.halted, Fork: s.forkAt, Slot: s.forkSlot, Logger: s.log, Replay: s.replayOpts})
	s.console.Register(s.mux)
	s.handler = requestIDs(boundBody(s.accessLog(noFraming(noKeepAlive(s.cors(jsonErrors(s.mountMetrics(strictQuery(s.mux)))))))))
	return s, nil
}

// readable tells the console whether the request's token may read pool:
// the pools list and the live stream show only those. A request without
// the API's identity went through another read middleware
// (WithReadMiddleware), which decided.
func readable(r *http.Request, pool string) bool {
	id, ok := IdentityFrom(r.Context())
	return !ok || id.Allows(auth.ScopeRead, pool)
}

// Shutdown ends the console's live streams; call it when the HTTP server
// shuts down (http.Server.RegisterOnShutdown).
func (s *Server) Shutdown() { s.console.Shutdown() }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// timed bounds a read handler's work by the read timeout: the context
// cancels its queries (pgx cancels them on the server too).
func (s *Server) timed(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.readTimeout)
		defer cancel()
		h(w, r.WithContext(ctx))
	})
}

// poolFor returns the pool's state holder, creating it empty (it is
// folded from the stream on first use).
//
// At most the resident bound of views stay: when a new one is made, views
// that no request holds are let go (their next append folds the pool
// again, from the projection's state or the log, as after a restart),
// the cheapest to make again first (decision 476): each view's priority
// is the floor when a request last took it plus what it cost to build
// (poolState.cost), the floor rising to the priority of each view let
// go (GreedyDual). So a view that took a minute to fold outlives the
// views of many small pools used since, yet not forever: once the floor
// passes it, it goes; ties go to the least recently used. A request
// that took a view just before it was let go finishes with it: the view
// is still the pool's fold, and the stream's expected-last-sequence
// check orders its append against any other.
func (s *Server) poolFor(name string) *poolState {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uses++
	if st, ok := s.pools[name]; ok {
		st.touched, st.used = s.floor, s.uses
		return st
	}
	st := newPoolState(name, s.poolOpts...)
	st.touched, st.used = s.floor, s.uses
	s.pools[name] = st
	if len(s.pools) <= s.resident {
		return st
	}
	type candidate struct {
		st   *poolState
		prio int64
	}
	cands := make([]candidate, 0, len(s.pools)-1)
	for _, v := range s.pools {
		if v != st {
			cands = append(cands, candidate{v, v.touched + v.cost.Load()})
		}
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		if a.prio != b.prio {
			return cmp.Compare(a.prio, b.prio)
		}
		return cmp.Compare(a.st.used, b.st.used)
	})
	for _, c := range cands {
		if len(s.pools) <= s.resident {
			break
		}
		if c.st.mu.TryLock() { // no request holds it
			delete(s.pools, c.st.name)
			s.floor = max(s.floor, c.prio)
			c.st.mu.Unlock()
		}
	}
	return st
}
