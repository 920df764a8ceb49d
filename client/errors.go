package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Code is the stable, machine-readable reason of a refusal
// ("unknown_consumer", "missing_scope", ...): the "reason" of every
// error answer. A Code is an error, so a caller matches an answer with
// errors.Is(err, client.CodeUnknownConsumer).
type Code string

func (c Code) Error() string { return string(c) }

// The codes of the engine and of decoding an event (docs/rules.md,
// section 13): the event is well formed JSON but not a valid event, or
// does not fit the pool's state. The ledger appends nothing.
const (
	CodeMalformed            Code = "malformed"             // 400: not a valid event of its type
	CodeUnknownType          Code = "unknown_type"          // 400
	CodeUnsupportedVersion   Code = "unsupported_version"   // 400: "v" other than the ledger's
	CodeUnknownRulesVersion  Code = "unknown_rules_version" // 400: a plan naming rules this ledger lacks
	CodeInvalidPool          Code = "invalid_pool"          // 400: the pool name in the URL
	CodePathTooLong          Code = "path_too_long"         // 422
	CodePathTooDeep          Code = "path_too_deep"         // 422
	CodeTooManyConsumers     Code = "too_many_consumers"    // 422
	CodeTooManyHosts         Code = "too_many_hosts"        // 422
	CodeInvalidHostName      Code = "invalid_host_name"     // 422
	CodeInvalidName          Code = "invalid_name"          // 422: a name not in NFKC, or with an invisible character
	CodeNoPlan               Code = "no_plan"               // 422: the pool has no plan yet
	CodeUnknownConsumer      Code = "unknown_consumer"      // 422
	CodeDemandOnParent       Code = "demand_on_parent"      // 422: only leaves hold demand
	CodeNegativeSlots        Code = "negative_slots"        // 422
	CodeNonPositiveSlots     Code = "non_positive_slots"    // 422
	CodeReleaseTooMany       Code = "release_too_many"      // 422: more than the consumer holds
	CodeUnknownHost          Code = "unknown_host"          // 422
	CodeHostAlreadyUp        Code = "host_already_up"       // 422
	CodeHostAlreadyDown      Code = "host_already_down"     // 422
	CodeInvalidPlan          Code = "invalid_plan"          // 422
	CodeInvalidPath          Code = "invalid_path"          // 422
	CodeDuplicatePath        Code = "duplicate_path"        // 422
	CodeInvalidShare         Code = "invalid_share"         // 422
	CodePercentRange         Code = "percent_range"         // 422: a max percentage outside 1..100
	CodeOverflow             Code = "overflow"              // 422: a quantity too large
	CodeEmptyEvent           Code = "empty_event"           // 422: the event has nothing to do
	CodeInvalidHost          Code = "invalid_host"          // 422
	CodeSeqOrder             Code = "seq_order"             // 422
	CodeInvalidOwnEntry      Code = "invalid_own_entry"     // 422
	CodePreferenceRange      Code = "preference_range"      // 422
	CodeDuplicateOwnHost     Code = "duplicate_own_host"    // 422
	CodeParentOwnsNothing    Code = "parent_owns_nothing"   // 422
	CodeChildrenOwnMore      Code = "children_own_more"     // 422
	CodeOwnershipUnsupported Code = "ownership_unsupported_rules"
	// 422, rules 4 (in development): priority_bands, preemptable: false or
	// a zero share in a plan with ownership.
	CodeUnsupportedWithOwnership Code = "unsupported_with_ownership"
	CodePoolMismatch             Code = "pool_mismatch"   // an envelope naming another pool (the projector's refusal)
	CodeUnauthenticated          Code = "unauthenticated" // 401: no token or an unknown one; the projector's refusal of an unsigned event
	CodeDuplicateID              Code = "duplicate_id"    // 409: the pool applied an event with this id before, past the duplicate window
	CodeRefused                  Code = "refused"         // a refusal without a code of its own (the projection's events table only)
)

// The codes of the API itself.
const (
	CodeBadRequest        Code = "bad_request"            // 400
	CodeTooManyEvents     Code = "too_many_events"        // 400: more events than one request may carry
	CodeTrailingData      Code = "trailing_data"          // 400: anything after the JSON value
	CodeRepeatedID        Code = "repeated_id"            // 400: two events of a request with one id
	CodeInvalidUTF8       Code = "invalid_utf8"           // 400: text that is not UTF-8, or a \u escape of a lone surrogate
	CodeUnknownField      Code = "unknown_field"          // 400: a key the object does not have (keys are case-sensitive)
	CodeDuplicateField    Code = "duplicate_field"        // 400: a key twice in one object
	CodeInvalidID         Code = "invalid_id"             // 400: an event id too long, or with white space or an invisible character
	CodeMissingScope      Code = "missing_scope"          // 403: the token lacks the scope
	CodePoolNotAllowed    Code = "pool_not_allowed"       // 403: the token does not cover the pool
	CodeOriginNotAllowed  Code = "origin_not_allowed"     // 403: a browser page of another origin
	CodeProducerMismatch  Code = "producer_mismatch"      // 403: the event names another producer than the token's
	CodeNotFound          Code = "not_found"              // 404
	CodeMethodNotAllowed  Code = "method_not_allowed"     // 405: the endpoint takes other methods (Allow)
	CodeBodyTimeout       Code = "body_timeout"           // 408: the body was not received in time; send it again
	CodeIDConflict        Code = "id_conflict"            // 409: an id stored before with other content
	CodeTooLarge          Code = "too_large"              // 413: the body is over the limit
	CodeUnsupportedMedia  Code = "unsupported_media_type" // 415: a POST that is not application/json
	CodeRateLimited       Code = "rate_limited"           // 429: the token's requests a second; retry after Retry-After
	CodeTooManyRequests   Code = "too_many_requests"      // 429: the token's requests in progress
	CodeTooManyStreams    Code = "too_many_streams"       // 429: the token's open live streams
	CodeUnavailable       Code = "unavailable"            // 503: NATS (or the log) cannot be reached
	CodeBusy              Code = "busy"                   // 503: too much at once; retry
	CodeHealing           Code = "healing"                // 503: the stream is being given back events it lost
	CodeStreamUnavailable Code = "stream_unavailable"     // 503
	CodeNoDatabase        Code = "no_database"            // 503: this ledger has no PostgreSQL
	CodeDatabaseError     Code = "database_error"         // 503: PostgreSQL failed
	CodeDatabaseFailed    Code = "database_failed"        // 503: PostgreSQL failed (the console's endpoints)
	CodeReadTimeout       Code = "read_timeout"           // 503: a read took longer than the read timeout
	CodeWhatIfTimeout     Code = "what_if_timeout"        // 503: a what-if took longer than its time budget
	CodeNeedsNewerLedger  Code = "needs_newer_ledger"     // 503: the pool's log names a rules version this ledger lacks
)

// ErrNoLedger is wrapped by the error of a request nothing listened for
// (connection refused): a wrong address, or a ledger that is not running.
var ErrNoLedger = errors.New("no ledger listening")

// ErrMisconfigured is wrapped by the error of a request that cannot be
// sent as the client is configured: a base URL that is not an http:// or
// https:// URL with a host (LEDGER_URL without its scheme), or a token a
// header cannot carry (a control character, such as the CR of a file with
// CRLF line ends). Sending it again cannot help, so every call returns it
// at once, without retrying.
var ErrMisconfigured = errors.New("ledger client misconfigured")

// Error is an answer other than 200.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is the ledger's reason (for an answer without the ledger's
	// error body, such as a proxy's, the status text).
	Code Code
	// Message says what was wrong, in words.
	Message string
	// Index is the position of the offending event in the request, when
	// one event is at fault.
	Index *int
	// RetryAfter is the ledger's Retry-After (429 and 503 answers), 0
	// if none.
	RetryAfter time.Duration
	// RequestID is the answer's X-Request-Id: the ledger's log tells the
	// cause of a failure (5xx) under it.
	RequestID string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	if e.Index != nil {
		msg += fmt.Sprintf(" (event %d)", *e.Index)
	}
	if e.RequestID != "" && e.Status >= 500 {
		msg += " (request " + e.RequestID + ")"
	}
	if e.Status == http.StatusUnauthorized {
		msg += " (set LEDGER_TOKEN or --ledger-token: `ledger dev` prints one)"
	}
	return msg
}

// Is reports whether target is the answer's Code, so that
// errors.Is(err, client.CodeUnknownConsumer) matches a refusal by code.
func (e *Error) Is(target error) bool {
	c, ok := target.(Code)
	return ok && c == e.Code
}

// Refused reports whether the ledger refused the request as invalid (4xx):
// sending it again will not help. 429 (a token over its limits) and 408
// (a body that did not arrive in time) are not refusals: the same
// request is sent again after Retry-After.
func (e *Error) Refused() bool {
	return e.Status >= 400 && e.Status < 500 && e.Status != http.StatusTooManyRequests && e.Status != http.StatusRequestTimeout
}

// IsRefused reports whether err is a refusal of the request (4xx).
func IsRefused(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Refused()
}
