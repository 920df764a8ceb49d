package api

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/cluster-ledger/ledger/internal/unrouted"
)

// BodyTimeout bounds the time a client may take to send a request's
// body once its headers are in: 1 MiB (MaxBody) in 10 s is 100 kB/s,
// within any real producer's reach; a body trickled slower is answered
// 408 body_timeout and nothing is stored (docs/decisions.md 195).
const BodyTimeout = 10 * time.Second

// boundBody bounds the reading of a request's body, and never waits for
// a body the answer did not need. net/http, once a handler returns
// without reading all of a small body, reads (and discards) the rest so
// that the connection may be kept, for as long as the server's read
// timeout lets it: a client without a token trickling a body was
// answered 401 at once and then held a connection and a goroutine for a
// minute. Here the body's deadline is BodyTimeout from its headers, and
// when the handler answered without reading the body to its end (a
// refusal by token, scope, origin, media type or size, checked before
// the body is read) the deadline is now: the connection is closed after
// the answer, without reading any more of it.
func boundBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(BodyTimeout))
		body := &readToEnd{ReadCloser: r.Body}
		r.Body = body
		h.ServeHTTP(w, r)
		if !body.done {
			_ = rc.SetReadDeadline(time.Now())
		}
	})
}

// readToEnd notes whether its body was read to its end.
type readToEnd struct {
	io.ReadCloser
	done bool
}

func (b *readToEnd) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.done = true
	}
	return n, err
}

// Reasons of requests no route takes (internal/unrouted).
const (
	ReasonNotFound         = unrouted.ReasonNotFound         // 404: no such endpoint
	ReasonMethodNotAllowed = unrouted.ReasonMethodNotAllowed // 405: the endpoint takes other methods (Allow)
)

// jsonErrors answers in the API's error shape ({"error","reason",
// "request_id"}) where net/http would answer text: a path no route
// takes (404 not_found), a method the route does not take (405
// method_not_allowed, with net/http's Allow header), and any other 404
// or 405 some handler writes with http.Error or http.NotFound.
func jsonErrors(h http.Handler) http.Handler {
	return unrouted.JSON(h, func(w http.ResponseWriter, _ *http.Request, status int, reason, msg string) {
		if status == http.StatusNotFound {
			msg += ": see the README's HTTP API"
		}
		writeError(w, &apiError{status: status, reason: reason, msg: msg})
	})
}
