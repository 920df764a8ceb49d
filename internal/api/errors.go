package api

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// Reasons that are not a domain or decoding refusal.
const (
	ReasonBadRequest     = "bad_request"
	ReasonTooManyEvents  = "too_many_events"
	ReasonTrailingData   = "trailing_data"
	ReasonRepeatedID     = "repeated_id"
	ReasonDuplicateID    = "duplicate_id"
	ReasonTooLarge       = "too_large"
	ReasonUnavailable    = "unavailable"
	ReasonNeedsNewer     = "needs_newer_ledger" // 503: the pool's log names a rules version this build lacks
	ReasonBusy           = "busy"
	ReasonNoDatabase     = "no_database"
	ReasonDatabaseFailed = "database_error"
)

// statusOf gives the HTTP status of each refusal code. The codes
// themselves come with the errors (events.Refusal: one table, shared by
// the engine, decoding and this API); producers branch on them.
var statusOf = map[events.Code]int{
	stream.ErrInvalidPool.Code():        http.StatusBadRequest,
	events.ErrUnknownType.Code():        http.StatusBadRequest,
	events.ErrUnsupportedVersion.Code(): http.StatusBadRequest,
	events.ErrMalformed.Code():          http.StatusBadRequest,
	domain.ErrUnknownRules.Code():       http.StatusBadRequest,
	events.CodeUnclassified:             http.StatusBadRequest,
}

// apiError is an answer other than 200.
type apiError struct {
	status     int
	reason     string
	msg        string // the answer's words: the ledger's own, never a driver's
	index      *int
	retryAfter time.Duration
	// cause is what went wrong below (a NATS or PostgreSQL error): logged
	// with the request id, never sent (its text may name servers, users,
	// tables or queries).
	cause error
}

func (e *apiError) Error() string { return e.msg }

// refusal classifies err (a domain or decoding error) for the event at
// index (nil for the request as a whole).
// Every other refusal is the engine's: the event is well formed but does
// not fit the pool's state (422).
func refusal(err error, index *int) *apiError {
	code := events.CodeOf(err)
	status, ok := statusOf[code]
	if !ok {
		status = http.StatusUnprocessableEntity
	}
	reason := string(code)
	if code == events.CodeUnclassified {
		reason = ReasonBadRequest
	}
	return &apiError{status: status, reason: reason, msg: err.Error(), index: index}
}

func badRequest(reason, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, reason: reason, msg: fmt.Sprintf(format, args...)}
}

// unavailable is the answer while NATS (or PostgreSQL) cannot be reached:
// the producer should retry the same request (same ids) later. msg is
// what the answer says; cause, logged only, what failed.
func unavailable(reason, msg string, cause error) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, reason: reason, msg: msg, retryAfter: time.Second, cause: cause}
}

func at(i int) *int { return &i }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers e. Its cause is not sent: use Server.fail where
// there may be one, so that it is logged.
func writeError(w http.ResponseWriter, e *apiError) {
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ledger"`)
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.retryAfter+time.Second-1)/time.Second)))
	}
	writeJSON(w, e.status, client.ErrorBody{Error: e.msg, Reason: e.reason, Index: e.index, RequestID: w.Header().Get(RequestIDHeader)})
}

// fail logs e's cause, if any, under the request's id and answers e.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, e *apiError) {
	s.logCause(w, r, e)
	writeError(w, e)
}

// logCause logs what made e, with the request id the answer carries.
func (s *Server) logCause(w http.ResponseWriter, r *http.Request, e *apiError) {
	if e == nil || e.cause == nil {
		return
	}
	s.log.Warn("request failed", "request_id", w.Header().Get(RequestIDHeader), "method", r.Method, "path", r.URL.Path,
		"status", e.status, "reason", e.reason, "err", e.cause)
}

// RequestIDHeader carries each answer's request id (requestIDs).
const RequestIDHeader = "X-Request-Id"

// requestIDs gives every request a random id, in the X-Request-Id
// header of its answer and in the body of an error: the log lines about
// a failure carry it, so an operator finds them from what a client saw.
// An id a client sends is not used (it could forge or flood the log's
// keys).
func requestIDs(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(RequestIDHeader, newRequestID())
		h.ServeHTTP(w, r)
	})
}

// newRequestID is 64 random bits in hex.
func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
