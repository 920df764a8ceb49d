package api

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/connect"
	"github.com/cluster-ledger/ledger/internal/connlimit"
	"github.com/cluster-ledger/ledger/internal/logging"
	"github.com/cluster-ledger/ledger/internal/natsauth"
)

// ServeConfig is what Serve needs to run the API as a service.
type ServeConfig struct {
	HTTPAddr string // listen address, e.g. 127.0.0.1:8080 (port 0: any)
	NATSURL  string
	// NATSCreds is the seed file of the ledger's NATS identity
	// (internal/natsauth); "" connects anonymously.
	NATSCreds   string
	DatabaseURL string
	// Migrate applies the schema migrations before serving.
	Migrate bool
	// ConnectWait bounds the wait at start for NATS, PostgreSQL and
	// JetStream to answer; 0 waits until ctx ends.
	ConnectWait time.Duration
	Logger      *slog.Logger
	// Ready, when set, is called once the API accepts requests, with the
	// address it listens on.
	Ready func(addr string)
	// TLSCert and TLSKey, both or neither, are PEM files: the API then
	// serves HTTPS only.
	TLSCert, TLSKey string
	// Options are passed to New (the logger is added). Without
	// WithTokens every request but /healthz is refused.
	Options []Option
	// Conns bounds the HTTP connections (internal/connlimit).
	Conns ConnLimits
}

// ConnLimits bound the HTTP server's connections (internal/connlimit).
type ConnLimits struct {
	// Max is the most connections at once; 0: the process's file
	// descriptors (RLIMIT_NOFILE, raised to its hard limit) less Reserve.
	Max int
	// Unauthenticated is the most connections that have not presented a
	// valid token; past it the oldest is closed. 0: half of Max.
	Unauthenticated int
	// Reserve is the descriptors kept for everything else (0:
	// connlimit.DefaultReserve); `ledger dev` adds its embedded NATS's
	// connections.
	Reserve int
}

// HeaderTimeout bounds the time a client may take to send a request's
// headers (a connection that sends nothing, or a byte a second, is closed
// after it): long enough for any real client on a slow link.
const HeaderTimeout = 5 * time.Second

// listener bounds l by c (connlimit.Listen) and says so in the log.
func (c ConnLimits) listener(l net.Listener, log *slog.Logger) (*connlimit.Listener, error) {
	reserve := cmp.Or(c.Reserve, connlimit.DefaultReserve)
	maxConns := c.Max
	if maxConns <= 0 {
		n, err := connlimit.Budget(reserve)
		if err != nil {
			return nil, err
		}
		maxConns = n
	}
	cl := connlimit.Listen(l, maxConns, c.Unauthenticated)
	log.Info("ledger API connection limits", "max_conns", maxConns, "max_unauthenticated", cl.MaxUnauthenticated(), "fd_reserve", reserve)
	return cl, nil
}

// Serve connects to NATS (reconnecting forever once connected) and
// PostgreSQL, waiting for them at start within cfg.ConnectWait, ensures
// the stream, optionally migrates the schema, and serves the API until ctx
// ends; then it shuts the HTTP server down gracefully. `ledger serve` and
// `ledger dev` run it.
func Serve(ctx context.Context, cfg ServeConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	w := connect.New("ledger", log, cfg.ConnectWait)
	var auth []nats.Option
	if cfg.NATSCreds != "" {
		o, err := natsauth.Option(cfg.NATSCreds)
		if err != nil {
			return err
		}
		auth = append(auth, o)
	}
	nc, err := w.NATS(ctx, cfg.NATSURL, auth...)
	if err != nil {
		return err
	}
	defer nc.Close()
	db, err := w.Postgres(ctx, cfg.DatabaseURL, cfg.Migrate)
	if err != nil {
		return err
	}
	defer db.Close()
	srv, err := waitForServer(ctx, w, cfg.NATSURL, nc, db, append(cfg.Options, WithLogger(log)))
	if err != nil {
		return err
	}
	return listenAndServe(ctx, cfg, srv, log)
}

// waitForServer builds the Server once JetStream answers (New ensures
// the stream).
func waitForServer(ctx context.Context, w *connect.Waiter, url string, nc *nats.Conn, db *pgxpool.Pool, opts []Option) (*Server, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	var srv *Server
	err = w.Retry(ctx, "JetStream", url, func(ctx context.Context) error {
		srv, err = New(ctx, js, db, opts...)
		return err
	})
	return srv, err
}

func listenAndServe(ctx context.Context, cfg ServeConfig, srv *Server, log *slog.Logger) error {
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return errors.New("TLS needs both a certificate and a key (--tls-cert, --tls-key)")
	}
	var tlsCfg *tls.Config
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	l, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.HTTPAddr, err)
	}
	cl, err := cfg.Conns.listener(l, log)
	if err != nil {
		_ = l.Close()
		return err
	}
	l = cl
	srv.metrics.API().Connections(cl)
	// Only authenticated connections idle between requests (an answer
	// without a valid token closes its connection: noKeepAlive).
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: HeaderTimeout, MaxHeaderBytes: 64 << 10,
		ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute, TLSConfig: tlsCfg, ConnContext: connlimit.ConnContext,
		ErrorLog: logging.ServerErrors(log)}
	if tlsCfg != nil {
		l = tls.NewListener(l, tlsCfg)
	}
	hs.RegisterOnShutdown(srv.Shutdown)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	addr := l.Addr().String()
	log.Info("ledger API listening", "addr", addr, "tls", tlsCfg != nil)
	if cfg.Ready != nil {
		cfg.Ready(addr)
	}
	select {
	case err := <-errc:
		return fmt.Errorf("HTTP server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("HTTP shutdown: %w", err)
	}
	log.Info("ledger API stopped")
	return nil
}
