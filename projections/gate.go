package projections

import (
	"errors"
	"fmt"
	"hash/maphash"

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

// IDs is the set of event ids a pool applied (nil: none tracked). A
// replay over a long log holds millions of them, so it holds no pointer
// per id for the collector to scan: the ids' bytes go into one arena and
// a map from a 64-bit hash of each id to its place there; the few ids
// whose hash another id holds already go to an overflow list. A lookup
// compares the bytes, so the set is exact whatever collides.
type IDs struct {
	hash  func(string) uint64
	arena []byte
	at    map[uint64]uint64   // hash -> place (offset<<idLenBits | length)
	more  map[uint64][]uint64 // hash -> places of later ids with that hash
	long  map[string]struct{} // ids a place cannot hold (none in practice)
}

// idLenBits is the width of an id's length in a place: longer than any
// NATS message; the arena's offsets have the other 36 bits (64 GB).
const idLenBits = 28

// NewIDs returns an empty set.
func NewIDs() *IDs {
	seed := maphash.MakeSeed()
	return newIDs(func(id string) uint64 { return maphash.String(seed, id) })
}

func newIDs(hash func(string) uint64) *IDs { return &IDs{hash: hash, at: map[uint64]uint64{}} }

// Add records that the pool applied an event with this id. The id is
// hashed once and looked up once: a replay adds an id per event to a set
// of millions, where each lookup is a cache miss.
func (ids *IDs) Add(id string) {
	if ids == nil || id == "" {
		return
	}
	if len(id) >= 1<<idLenBits || len(ids.arena)+len(id) >= 1<<(64-idLenBits) {
		if ids.long == nil {
			ids.long = map[string]struct{}{}
		}
		ids.long[id] = struct{}{}
		return
	}
	if _, ok := ids.long[id]; ok {
		return
	}
	h := ids.hash(id)
	first, taken := ids.at[h]
	if taken && ids.holdsAny(h, first, id) {
		return
	}
	place := uint64(len(ids.arena))<<idLenBits | uint64(len(id))
	ids.arena = append(ids.arena, id...)
	if !taken {
		ids.at[h] = place
		return
	}
	if ids.more == nil {
		ids.more = map[uint64][]uint64{}
	}
	ids.more[h] = append(ids.more[h], place)
}

func (ids *IDs) has(id string) bool {
	if ids == nil || id == "" {
		return false
	}
	if _, ok := ids.long[id]; ok {
		return true
	}
	h := ids.hash(id)
	first, ok := ids.at[h]
	return ok && ids.holdsAny(h, first, id)
}

// holdsAny reports whether id is the id at first, the first place of
// hash h, or at one of h's later places.
func (ids *IDs) holdsAny(h, first uint64, id string) bool {
	if ids.holds(first, id) {
		return true
	}
	for _, place := range ids.more[h] {
		if ids.holds(place, id) {
			return true
		}
	}
	return false
}

// holds reports whether the id at place is id.
func (ids *IDs) holds(place uint64, id string) bool {
	off, n := place>>idLenBits, place&(1<<idLenBits-1)
	return int(n) == len(id) && string(ids.arena[off:off+n]) == id
}

// Gate returns the refusal decided before the engine, or nil: the
// projector's, and the ledger API's when it folds the log into its own
// view of a pool, so both refuse the same events.
func Gate(ids *IDs, st stream.Stored) error {
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
// agree. subject may be the stored one: the signature covers the subject
// the event was published on (stream.Published). It returns an error (signing.ErrHistory) only when the
// historical keys could not be read: the event is then neither accepted
// nor refused, and the caller tries again later.
func Authenticate(keys *signing.Keyring, st *stream.Stored, subject string, h nats.Header, data []byte) error {
	if keys == nil {
		return nil
	}
	err := keys.VerifyAt(st.Seq, stream.Published(subject), h, data)
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
