package api

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/cluster-ledger/ledger/internal/stream"
)

// accessRecord is what the access log line of a request says that only
// the handlers below learn: the name of the token that was presented
// (Authorize fills it in).
type accessRecord struct {
	token string
}

type accessKey struct{}

// noteToken records the identity's name for the request's access line.
func noteToken(ctx context.Context, name string) {
	if rec, ok := ctx.Value(accessKey{}).(*accessRecord); ok {
		rec.token = name
	}
}

// accessLog writes one line per request once it is answered ("http
// request"): the request id of its answer (requestIDs, the same one an
// error body carries), the name of the token (never the token: the
// Authorization header is not logged, nor the query or the body), the
// pool, the method, the route pattern (not the raw path, which a client
// chooses), the status, the latency and the bytes of the answer's body.
// A request refused before its token was checked has no token name.
func (s *Server) accessLog(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &accessRecord{}
		// The mux sets the pattern and path values on the request it is
		// given: this one (the wrappers between pass it on as it is).
		r = r.WithContext(context.WithValue(r.Context(), accessKey{}, rec))
		aw := &accessWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(aw, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		remote, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			remote = r.RemoteAddr
		}
		// The pool as the client wrote it only when it is a pool's name:
		// anything else (up to the header bound, 64 KiB; or a token
		// pasted where the pool goes) is not the log's to keep.
		pool := r.PathValue("pool")
		if stream.ValidatePool(pool) != nil {
			pool = ""
		}
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "http request",
			slog.String("request_id", w.Header().Get(RequestIDHeader)),
			slog.String("token", rec.token),
			slog.String("pool", pool),
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.Int("status", aw.status),
			slog.Float64("latency_ms", float64(time.Since(start).Microseconds())/1000),
			slog.Int64("bytes", aw.bytes),
			slog.String("remote", remote),
		)
	})
}

// accessWriter remembers the status and counts the body's bytes.
type accessWriter struct {
	http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
}

func (w *accessWriter) WriteHeader(code int) {
	if !w.wroteHeader && code >= 200 {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *accessWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (the
// console's live stream flushes through it).
func (w *accessWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
