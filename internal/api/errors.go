package api

import (
	"encoding/json"

	"fmt"
	"net/http"
	"strconv"
	"time"

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
	msg        string
	index      *int
	retryAfter time.Duration
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
// the producer should retry the same request (same ids) later.
func unavailable(reason string, err error) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, reason: reason, msg: err.Error(), retryAfter: time.Second}
}

func at(i int) *int { return &i }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ledger"`)
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.retryAfter+time.Second-1)/time.Second)))
	}
	writeJSON(w, e.status, ErrorResponse{Error: e.msg, Reason: e.reason, Index: e.index})
}
