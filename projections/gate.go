package projections

import (
	"errors"

	"github.com/nats-io/nats.go"

	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// Refusal codes the projector decides before the engine sees an event.
// A refused event is stored and chained like any refused event and
// changes nothing.
const (
	// CodeUnauthenticated: the event is not signed by a trusted key
	// (published around the ledger, or altered).
	CodeUnauthenticated = "unauthenticated"
	// CodeDuplicateID: the pool already applied an event with this id
	// (a retry that came after JetStream's duplicate window).
	CodeDuplicateID = "duplicate_id"
)

// chainCode is what the hash chain records for a projector refusal: the
// stable code, not the reason text, so rewording a message never changes
// the chain. (The one place to adapt when domain exposes its own codes.)
func chainCode(code string) string { return code }

// IDs is the set of event ids a pool applied.
type IDs map[string]struct{}

func (ids IDs) add(id string) {
	if ids != nil && id != "" {
		ids[id] = struct{}{}
	}
}

func (ids IDs) has(id string) bool {
	_, ok := ids[id]
	return ok && id != ""
}

// gate returns the code and reason of a refusal before the engine, or "".
func gate(ids IDs, st stream.Stored) (code, reason string) {
	if st.Gate != "" {
		return CodeUnauthenticated, st.Gate
	}
	if ids.has(st.Envelope.ID) {
		return CodeDuplicateID, "the pool already applied an event with id " + st.Envelope.ID
	}
	return "", ""
}

// Authenticate marks st as refused (unauthenticated) unless keys is nil
// or a trusted key signed subject and body; every reader of the log
// calls it, so the projector and the auditors agree.
func Authenticate(keys *signing.Keyring, st *stream.Stored, subject string, h nats.Header, data []byte) {
	if keys == nil {
		return
	}
	if err := keys.Verify(subject, h, data); err != nil {
		st.Gate = err.Error()
		if errors.Is(err, signing.ErrUnsigned) {
			st.Gate = "the event carries no ledger signature (published around the ledger)"
		}
	}
}
