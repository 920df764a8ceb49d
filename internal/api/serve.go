package api

import (
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

	"github.com/cluster-ledger/ledger/migrations"
)

// ServeConfig is what Serve needs to run the API as a service.
type ServeConfig struct {
	HTTPAddr    string // listen address, e.g. 127.0.0.1:8080 (port 0: any)
	NATSURL     string
	DatabaseURL string
	// Migrate applies the schema migrations before serving.
	Migrate bool
	Logger  *slog.Logger
	// Ready, when set, is called once the API accepts requests, with the
	// address it listens on.
	Ready func(addr string)
	// TLSCert and TLSKey, both or neither, are PEM files: the API then
	// serves HTTPS only.
	TLSCert, TLSKey string
	// Options are passed to New (the logger is added). Without
	// WithTokens every request but /healthz is refused.
	Options []Option
}

// Serve connects to NATS (waiting and reconnecting forever) and
// PostgreSQL, ensures the stream, optionally migrates the schema, and
// serves the API until ctx ends; then it shuts the HTTP server down
// gracefully. `ledger serve` and `ledger dev` run it.
func Serve(ctx context.Context, cfg ServeConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	nc, err := ConnectNATS(cfg.NATSURL, "ledger", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	db, err := ConnectPostgres(ctx, cfg.DatabaseURL, cfg.Migrate, log)
	if err != nil {
		return err
	}
	defer db.Close()
	srv, err := waitForServer(ctx, nc, db, append(cfg.Options, WithLogger(log)), log)
	if err != nil {
		return err
	}
	return listenAndServe(ctx, cfg, srv, log)
}

// ConnectNATS connects to url and keeps reconnecting forever, logging
// each loss and recovery. It returns at once even while NATS is down:
// the connection comes up when NATS does.
func ConnectNATS(url, name string, log *slog.Logger) (*nats.Conn, error) {
	nc, err := nats.Connect(url,
		nats.Name(name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500*time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.ConnectHandler(func(c *nats.Conn) { log.Info("NATS connected", "url", c.ConnectedUrlRedacted()) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: closed on purpose
				log.Warn("NATS disconnected; reconnecting", "url", url, "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("NATS reconnected", "url", c.ConnectedUrlRedacted()) }),
	)
	if err != nil {
		return nil, fmt.Errorf("NATS %s: %w", url, err)
	}
	return nc, nil
}

// ConnectPostgres opens a pool on url, waits until PostgreSQL answers
// (logging while it does not) and, with migrate, applies the migrations.
func ConnectPostgres(ctx context.Context, url string, migrate bool, log *slog.Logger) (*pgxpool.Pool, error) {
	if url == "" {
		return nil, errors.New("no database URL: set DATABASE_URL or --database-url")
	}
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	err = retry(ctx, log, "PostgreSQL", func(ctx context.Context) error { return db.Ping(ctx) })
	if err == nil && migrate {
		err = migrations.Up(ctx, url)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// waitForServer builds the Server once JetStream answers (New ensures
// the stream).
func waitForServer(ctx context.Context, nc *nats.Conn, db *pgxpool.Pool, opts []Option, log *slog.Logger) (*Server, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	var srv *Server
	err = retry(ctx, log, "JetStream", func(ctx context.Context) error {
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
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10,
		ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute, TLSConfig: tlsCfg}
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

// retry calls f until it succeeds or ctx ends, backing off from 200ms to
// 5s and logging each failure, so an operator sees what is awaited.
func retry(ctx context.Context, log *slog.Logger, what string, f func(context.Context) error) error {
	wait := 200 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := f(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), err)
		}
		log.Warn("waiting for "+what, "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}
