package api

import (
	"net/http"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/metrics"
)

// WithMetrics records the API's figures in reg and serves reg at
// GET /metrics, to tokens with the metrics scope (auth.ScopeMetrics).
// Without it there is no /metrics route.
func WithMetrics(reg *metrics.Registry) Option { return func(s *Server) { s.metrics = reg } }

// mountMetrics adds GET /metrics and wraps h to count every request by
// route and status.
func (s *Server) mountMetrics(h http.Handler) http.Handler {
	if s.metrics == nil {
		return h
	}
	s.mux.Handle("GET /metrics", s.Authorize(auth.ScopeMetrics, s.metrics.Handler()))
	rec := s.metrics.API()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		rec.HTTP(r.Pattern, sw.status) // the mux sets r.Pattern on the request it was given
	})
}

// observeAppend records an answered append request.
func (s *Server) observeAppend(pool string, ins []incoming, res []client.Appended, aerr *apiError, d time.Duration) {
	if s.metrics == nil {
		return
	}
	rec := s.metrics.API()
	if aerr != nil {
		if pool != "" && s.poolHasEvents(pool) {
			rec.PoolExists(pool)
		}
		rec.Request(pool, aerr.status, aerr.reason, d)
		return
	}
	for i, a := range res {
		rec.Event(pool, string(ins[i].payload.EventType()), a.Duplicate)
	}
	rec.Request(pool, http.StatusOK, "", d)
}

// poolHasEvents reports whether the server's view of pool holds events
// of the log; false when it does not know (no view, or a request holds
// the view: the metrics do not wait for it).
func (s *Server) poolHasEvents(name string) bool {
	s.mu.Lock()
	st, ok := s.pools[name]
	s.mu.Unlock()
	if !ok || !st.mu.TryLock() {
		return false
	}
	defer st.mu.Unlock()
	return st.loaded && st.pool.Seq() > 0
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (the
// console's live stream flushes through it).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
