package natsserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Errors returned by Start; match them with errors.Is.
var (
	// ErrNoStoreDir: Start was called without WithStoreDir.
	ErrNoStoreDir = errors.New("natsserver: no JetStream store directory given (use WithStoreDir)")
	// ErrBadListen: the WithListen address is not host:port.
	ErrBadListen = errors.New("natsserver: bad listen address")
	// ErrStart: the server could not be created or started.
	ErrStart = errors.New("natsserver: cannot start server")
	// ErrNotReady: the server did not accept connections in time.
	ErrNotReady = errors.New("natsserver: server not ready for connections")
)

// Defaults.
const (
	DefaultListen       = "127.0.0.1:4222"
	DefaultName         = "ledger"
	DefaultReadyTimeout = 10 * time.Second
	// DefaultMaxConns bounds the client connections of an embedded
	// server (nats-server's own max_connections, 64K by default): the
	// ledger's processes hold a handful each, so a thousand leaves room
	// for many tools and tests, and keeps NATS's share of the process's
	// file descriptors known, apart from the HTTP server's (`ledger dev`
	// reserves it: internal/connlimit), so a flood of one cannot take the
	// other's.
	DefaultMaxConns = 1024
	// DefaultAuthTimeout is how long a client connection may stay
	// without authenticating (nats-server's authorization timeout, 2 s
	// by default; the auth timer starts once the TLS handshake, if any,
	// is done). nats-server counts a connection against max_connections
	// from its accept, before it authenticates: a local process without
	// credentials that opens connections as fast as it can holds each
	// slot this long at most, so the ledger's own clients (which retry
	// every 0.5 to 1.5 s) get one as slots free. An nkey client answers
	// the server's INFO with its signed nonce in one round trip (a few
	// milliseconds; a second is a slow WAN link and a loaded machine).
	DefaultAuthTimeout = time.Second
)

// Option configures Start.
type Option func(*config)

type config struct {
	storeDir     string
	listen       string
	name         string
	logging      bool
	readyTimeout time.Duration
	users        []User
	sync         Sync
	cluster      *clusterConfig
	routeUser    string
	routePass    string
	maxConns     int
	authTimeout  time.Duration
}

// WithStoreDir sets the JetStream file store directory (required). It is
// created when missing and kept: a later server on the same directory
// sees the same streams and messages.
func WithStoreDir(dir string) Option { return func(c *config) { c.storeDir = dir } }

// WithListen sets the client address, host:port (default
// "127.0.0.1:4222"). Port 0 or -1 picks a free port; URL tells which.
func WithListen(addr string) Option { return func(c *config) { c.listen = addr } }

// WithName sets the server name (default "ledger").
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithLogging turns the server's own log (to stderr) on or off (default
// off).
func WithLogging(on bool) Option { return func(c *config) { c.logging = on } }

// WithReadyTimeout bounds the wait for the server to accept connections
// (default 10s).
func WithReadyTimeout(d time.Duration) Option { return func(c *config) { c.readyTimeout = d } }

// Server is a running embedded nats-server.
type Server struct {
	ns   *server.Server
	sync Sync
	once sync.Once
}

// Start starts the server and waits until it accepts connections, ctx's
// end, or the ready timeout, whichever comes first.
func Start(ctx context.Context, opts ...Option) (*Server, error) {
	cfg := config{listen: DefaultListen, name: DefaultName, readyTimeout: DefaultReadyTimeout, sync: SyncAlways, maxConns: DefaultMaxConns, authTimeout: DefaultAuthTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.storeDir == "" {
		return nil, ErrNoStoreDir
	}
	if !cfg.sync.Always && cfg.sync.Interval <= 0 {
		return nil, fmt.Errorf("%w: interval %v", ErrBadSync, cfg.sync.Interval)
	}
	storeDir, err := filepath.Abs(cfg.storeDir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	host, portStr, err := net.SplitHostPort(cfg.listen)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrBadListen, cfg.listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < -1 || port > 65535 {
		return nil, fmt.Errorf("%w %q: port must be 0..65535 or -1", ErrBadListen, cfg.listen)
	}
	if port == 0 {
		port = server.RANDOM_PORT // to nats-server, 0 means the default 4222
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if port > 0 {
		if err := canListen(net.JoinHostPort(host, strconv.Itoa(port))); err != nil {
			return nil, err
		}
	}
	sopts := &server.Options{
		ServerName: cfg.name,
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   storeDir,
		NoLog:      !cfg.logging,
		MaxConn:    cfg.maxConns,
		// Seconds; nats-server takes 0 for its default.
		AuthTimeout: cfg.authTimeout.Seconds(),
		NoSigs:      true,
		// As nats-server's own "sync_interval: always" sets them: the
		// interval stays for the background flush of other files.
		SyncAlways:   cfg.sync.Always,
		SyncInterval: cmp.Or(cfg.sync.Interval, 2*time.Minute),
	}
	var auth *userAuth
	if len(cfg.users) > 0 {
		if auth, err = newUserAuth(cfg.users); err != nil {
			return nil, err
		}
		// The nonce the clients sign, which nats-server sends by itself
		// only when it checks nkeys itself.
		sopts.CustomClientAuthentication, sopts.AlwaysEnableNonce = auth, true
	}
	if err := cfg.applyCluster(sopts); err != nil {
		return nil, err
	}
	ns, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	if auth != nil {
		auth.srv.Store(ns)
	}
	if cfg.logging {
		ns.ConfigureLogger()
	}
	ns.Start()

	wait := cfg.readyTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		wait = time.Until(dl)
	}
	if !ns.ReadyForConnections(wait) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("%w: %s after %v (is the address in use?)", ErrNotReady, cfg.listen, wait)
	}
	if !ns.JetStreamEnabled() {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("%w: JetStream did not come up in %s", ErrStart, storeDir)
	}
	if err := ctx.Err(); err != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	return &Server{ns: ns, sync: cfg.sync}, nil
}

// canListen checks that addr is free: nats-server reports a failed
// listen through its logger, whose Fatalf exits the process when logging
// is on.
func canListen(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%w: cannot listen on %s: %w", ErrStart, addr, err)
	}
	return l.Close()
}

// URL is the client URL, nats://host:port (with a loopback host when the
// server listens on all interfaces).
func (s *Server) URL() string {
	addr, ok := s.ns.Addr().(*net.TCPAddr)
	if !ok {
		return s.ns.ClientURL()
	}
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
		if addr.IP.To4() == nil {
			host = "::1"
		}
	}
	return "nats://" + net.JoinHostPort(host, strconv.Itoa(addr.Port))
}

// Sync is the server's sync policy.
func (s *Server) Sync() Sync { return s.sync }

// NATS returns the underlying server, for what this package does not wrap.
func (s *Server) NATS() *server.Server { return s.ns }

// Shutdown stops the server gracefully (JetStream flushes its store) and
// waits until it is down. Calling it again is a no-op.
func (s *Server) Shutdown() {
	s.once.Do(func() {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
	})
}
