package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/cluster-ledger/ledger/internal/logging"
	"github.com/cluster-ledger/ledger/internal/unrouted"
)

// Serve listens on addr and serves the checker's GET /healthz and GET
// /readyz until ctx ends (the projector's --health-listen; the API
// serves them on its own server). ready, when set, is called with the
// address listened on. Probes need no token and say one word per part;
// timeouts are short, since a probe that does not answer in a few
// seconds has failed anyway.
func Serve(ctx context.Context, addr string, c *Checker, log *slog.Logger, ready func(addr string)) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("health: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	c.Register(mux)
	hs := &http.Server{Handler: unrouted.JSON(mux, nil), ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second,
		WriteTimeout: 2 * Timeout, IdleTimeout: 30 * time.Second, MaxHeaderBytes: 8 << 10, ErrorLog: logging.ServerErrors(log)}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	log.Info("health probes listening", "addr", l.Addr().String(), "paths", "/healthz /readyz")
	if ready != nil {
		ready(l.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("health: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("health: %w", err)
	}
	return nil
}
