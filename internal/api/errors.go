package api

import (
	"encoding/json"
	"errors"
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
	ReasonRepeatedID     = "repeated_id"
	ReasonDuplicateID    = "duplicate_id"
	ReasonTooLarge       = "too_large"
	ReasonUnavailable    = "unavailable"
	ReasonBusy           = "busy"
	ReasonNoDatabase     = "no_database"
	ReasonDatabaseFailed = "database_error"
)

// reasons maps every refusal of the engine and of strict decoding to a
// stable machine-readable reason. Producers branch on these strings.
var reasons = []struct {
	err    error
	reason string
	status int
}{
	{stream.ErrInvalidPool, "invalid_pool", http.StatusBadRequest},
	{events.ErrUnknownType, "unknown_type", http.StatusBadRequest},
	{events.ErrUnsupportedVersion, "unsupported_version", http.StatusBadRequest},
	{events.ErrMalformed, "malformed", http.StatusBadRequest},
	{domain.ErrNoPlan, "no_plan", http.StatusUnprocessableEntity},
	{domain.ErrUnknownConsumer, "unknown_consumer", http.StatusUnprocessableEntity},
	{domain.ErrDemandOnParent, "demand_on_parent", http.StatusUnprocessableEntity},
	{domain.ErrNegativeSlots, "negative_slots", http.StatusUnprocessableEntity},
	{domain.ErrNonPositive, "non_positive_slots", http.StatusUnprocessableEntity},
	{domain.ErrReleaseTooMany, "release_too_many", http.StatusUnprocessableEntity},
	{domain.ErrUnknownHost, "unknown_host", http.StatusUnprocessableEntity},
	{domain.ErrHostAlreadyUp, "host_already_up", http.StatusUnprocessableEntity},
	{domain.ErrHostAlreadyDown, "host_already_down", http.StatusUnprocessableEntity},
	{domain.ErrInvalidPlan, "invalid_plan", http.StatusUnprocessableEntity},
	{domain.ErrInvalidPath, "invalid_path", http.StatusUnprocessableEntity},
	{domain.ErrDuplicatePath, "duplicate_path", http.StatusUnprocessableEntity},
	{domain.ErrZeroShare, "invalid_share", http.StatusUnprocessableEntity},
	{domain.ErrPercentRange, "percent_range", http.StatusUnprocessableEntity},
	{domain.ErrOverflow, "overflow", http.StatusUnprocessableEntity},
	{domain.ErrEmptyEvent, "empty_event", http.StatusUnprocessableEntity},
	{domain.ErrInvalidHost, "invalid_host", http.StatusUnprocessableEntity},
	{domain.ErrUnknownEventType, "unknown_type", http.StatusUnprocessableEntity},
	{domain.ErrSeqOrder, "seq_order", http.StatusUnprocessableEntity},
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
func refusal(err error, index *int) *apiError {
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return &apiError{status: r.status, reason: r.reason, msg: err.Error(), index: index}
		}
	}
	return &apiError{status: http.StatusBadRequest, reason: ReasonBadRequest, msg: err.Error(), index: index}
}

// ReasonOf returns the reason string the API uses for err, or "" when err
// is not a refusal it knows.
func ReasonOf(err error) string {
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return ""
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
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.retryAfter+time.Second-1)/time.Second)))
	}
	writeJSON(w, e.status, ErrorResponse{Error: e.msg, Reason: e.reason, Index: e.index})
}
