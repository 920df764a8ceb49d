package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/logging"
	"github.com/cluster-ledger/ledger/internal/unrouted"
)

// Protect serves h only to a request with a bearer token of tokens
// holding the metrics scope: 401 without a known token, 403 without the
// scope, answered as the API answers them ({"error", "reason"}, the
// API's contract). Without tokens every request is refused. tokens may
// be a watched tokens file (auth.File): a revoked token is refused once
// it reloads.
func Protect(tokens auth.Authenticator, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		var id *auth.Identity
		known := false
		if tokens != nil {
			id, known = tokens.Authenticate(strings.TrimSpace(token))
		}
		switch {
		case !ok || !known:
			w.Header().Set("WWW-Authenticate", `Bearer realm="ledger"`)
			refuse(w, http.StatusUnauthorized, "unauthenticated", "send Authorization: Bearer <token with the metrics scope>")
		case !id.Has(auth.ScopeMetrics):
			refuse(w, http.StatusForbidden, "missing_scope", fmt.Sprintf("token %s lacks the %s scope", id.Name, auth.ScopeMetrics))
		default:
			h.ServeHTTP(w, r)
		}
	})
}

func refuse(w http.ResponseWriter, status int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error  string `json:"error"`
		Reason string `json:"reason"`
	}{msg, reason})
}

// Serve listens on addr and serves GET /metrics (reg's handler behind
// Protect) until ctx ends. ready, when set, is called with the address
// listened on. It is the projector's own listener; the API serves
// /metrics on its HTTP server.
func Serve(ctx context.Context, addr string, reg *Registry, tokens auth.Authenticator, log *slog.Logger, ready func(addr string)) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Protect(tokens, reg.Handler()))
	hs := &http.Server{Handler: unrouted.JSON(mux, nil), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, MaxHeaderBytes: 16 << 10, ErrorLog: logging.ServerErrors(log)}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	log.Info("metrics listening", "addr", l.Addr().String(), "path", "/metrics")
	if ready != nil {
		ready(l.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("metrics: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: shutdown: %w", err)
	}
	return nil
}
