package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/console"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// Defaults of the options.
const (
	DefaultProducer       = "ledger"
	DefaultPublishTimeout = 5 * time.Second
	DefaultMaxAttempts    = 10
	// MaxBatch is the most events one request may carry: the server's
	// limit on an atomic batch (JetStream's default max batch size).
	MaxBatch = 1000
	// MaxBody bounds a request body.
	MaxBody = 16 << 20
)

// Option configures a Server.
type Option func(*Server)

// WithClock sets the clock that stamps event times (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Server) { s.clock = now } }

// WithProducer sets the producer recorded for events whose request names
// none (default "ledger").
func WithProducer(name string) Option { return func(s *Server) { s.producer = name } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithPublishTimeout bounds each round trip to JetStream (default 5s):
// past it the request is answered 503 and the producer retries.
func WithPublishTimeout(d time.Duration) Option { return func(s *Server) { s.timeout = d } }

// WithMaxAttempts bounds how often one request is re-validated after
// conflicting appends of other ledger instances (default 10).
func WithMaxAttempts(n int) Option { return func(s *Server) { s.maxAttempts = n } }

// WithReadMiddleware wraps the console's data endpoints (the read-scope
// check of the API's tokens); default: none.
func WithReadMiddleware(mw func(http.Handler) http.Handler) Option {
	return func(s *Server) { s.readAuth = mw }
}

// WithHaltedPools tells the console which pools' projections stopped, and
// why; default: the console shows no halted column.
func WithHaltedPools(f func(ctx context.Context) (map[string]string, error)) Option {
	return func(s *Server) { s.halted = f }
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
	producer    string
	log         *slog.Logger
	timeout     time.Duration
	maxAttempts int
	mux         *http.ServeMux
	readAuth    func(http.Handler) http.Handler
	halted      func(context.Context) (map[string]string, error)
	console     *console.Console

	hold hold // appends held while the stream heals (hold.go)

	mu    sync.Mutex
	pools map[string]*poolState
}

// New returns a server appending to the LEDGER stream through js (the
// stream is created when missing) and reading the projection from db
// (nil: the read endpoints answer 503).
func New(ctx context.Context, js jetstream.JetStream, db *pgxpool.Pool, opts ...Option) (*Server, error) {
	s := &Server{
		js: js, nc: js.Conn(), db: db, clock: time.Now, producer: DefaultProducer, log: slog.Default(),
		timeout: DefaultPublishTimeout, maxAttempts: DefaultMaxAttempts, pools: map[string]*poolState{},
	}
	for _, o := range opts {
		o(s)
	}
	st, err := stream.Ensure(ctx, js)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	s.stream = st
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/pools/{pool}/events", s.postEvents)
	s.mux.HandleFunc("GET /v1/pools/{pool}/allocations", s.getAllocations)
	s.mux.HandleFunc("GET /v1/pools/{pool}/decisions", s.getDecisions)
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.console = console.New(console.Config{DB: db, JS: js, Auth: s.readAuth, Halted: s.halted, Logger: s.log})
	s.console.Register(s.mux)
	return s, nil
}

// Shutdown ends the console's live streams; call it when the HTTP server
// shuts down (http.Server.RegisterOnShutdown).
func (s *Server) Shutdown() { s.console.Shutdown() }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// poolFor returns the pool's state holder, creating it empty (it is
// folded from the stream on first use).
func (s *Server) poolFor(name string) *poolState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.pools[name]
	if !ok {
		st = newPoolState(name)
		s.pools[name] = st
	}
	return st
}
