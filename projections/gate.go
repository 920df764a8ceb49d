package projections

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// Refusals the projector decides before the engine sees an event. A
// refused event is stored and chained like any refused event (the chain
// covers the code) and changes nothing.
var (
	// ErrUnauthenticated: the event is not signed by a trusted key
	// (published around the ledger, or altered).
	ErrUnauthenticated = events.NewRefusal(CodeUnauthenticated, "event not signed by a trusted key")
	// ErrDuplicateID: the pool already applied an event with this id (a
	// retry that came after JetStream's duplicate window).
	ErrDuplicateID = events.NewRefusal(CodeDuplicateID, "the pool already applied an event with this id")
)

// The codes of those refusals.
const (
	CodeUnauthenticated events.Code = "unauthenticated"
	CodeDuplicateID     events.Code = "duplicate_id"
)

// IDs is the set of event ids a pool applied.
type IDs map[string]struct{}

// Add records that the pool applied an event with this id.
func (ids IDs) Add(id string) {
	if ids != nil && id != "" {
		ids[id] = struct{}{}
	}
}

func (ids IDs) has(id string) bool {
	_, ok := ids[id]
	return ok && id != ""
}

// Gate returns the refusal decided before the engine, or nil: the
// projector's, and the ledger API's when it folds the log into its own
// view of a pool, so both refuse the same events.
func Gate(ids IDs, st stream.Stored) error {
	if st.Gate != "" {
		return fmt.Errorf("%w: %s", ErrUnauthenticated, st.Gate)
	}
	if ids.has(st.Envelope.ID) {
		return fmt.Errorf("%w: %s", ErrDuplicateID, st.Envelope.ID)
	}
	return nil
}

// Authenticate marks st as refused (unauthenticated) unless keys is nil
// or a trusted key signed subject and body, or a historical key (a
// restored log's, recorded in the stream) whose bound covers st.Seq;
// every reader of the log calls it, so the projector and the auditors
// agree. It returns an error (signing.ErrHistory) only when the
// historical keys could not be read: the event is then neither accepted
// nor refused, and the caller tries again later.
func Authenticate(keys *signing.Keyring, st *stream.Stored, subject string, h nats.Header, data []byte) error {
	if keys == nil {
		return nil
	}
	err := keys.VerifyAt(st.Seq, subject, h, data)
	switch {
	case err == nil:
	case errors.Is(err, signing.ErrHistory):
		return fmt.Errorf("authenticate sequence %d: %w", st.Seq, err)
	case errors.Is(err, signing.ErrUnsigned):
		st.Gate = "the event carries no ledger signature (published around the ledger)"
	default:
		st.Gate = err.Error()
	}
	return nil
}
