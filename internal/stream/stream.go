package stream

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/cluster-ledger/ledger/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Name is the stream that holds the log of every pool.
const Name = "LEDGER"

// DuplicateWindow is how long a retried publish with the same event id is
// recognised and stored once.
const DuplicateWindow = 10 * time.Minute

// ErrInvalidPool is returned for a pool name that cannot be a subject token.
var ErrInvalidPool = events.NewRefusal("invalid_pool", "invalid pool name")

var poolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// tokenShaped matches a bearer token of the ledger (internal/auth: its
// prefix "ldg_" and 32 random bytes in unpadded base64url), which fits
// poolName: a token pasted where the pool goes (a producer's two strings
// swapped) would otherwise be logged, counted in /metrics' pool labels
// and, appended, be a pool's name in the log forever (decision #372).
var tokenShaped = regexp.MustCompile(`^ldg_[A-Za-z0-9_-]{43}$`)

// ValidatePool checks that a pool name is one subject token, and not a
// bearer token's shape (whose name the error does not repeat).
func ValidatePool(pool string) error {
	if !poolName.MatchString(pool) {
		return fmt.Errorf("%w: %q (letters, digits, '-' and '_', 1 to 128 characters)", ErrInvalidPool, pool)
	}
	if tokenShaped.MatchString(pool) {
		return fmt.Errorf("%w: the name has the shape of a bearer token (ldg_ and 43 characters), not shown: a token goes in the Authorization header, never in the URL", ErrInvalidPool)
	}
	return nil
}

// Subject is the subject of an event of type t in pool.
func Subject(pool string, t events.Type) string { return "ledger." + pool + "." + string(t) }

// PoolFilter matches every event of one pool.
func PoolFilter(pool string) string { return "ledger." + pool + ".>" }

// PoolOf returns the pool named by a subject, published
// (ledger.<pool>.<type>) or stored with its partition
// (ledger.<pool>.<type>.<k>: partitions.go).
func PoolOf(subject string) (string, error) {
	parts := strings.Split(Published(subject), ".")
	if len(parts) != 3 || parts[0] != "ledger" {
		return "", fmt.Errorf("subject %q is not ledger.<pool>.<type>", subject)
	}
	return parts[1], nil
}

// Config is the stream's configuration: the log of truth, kept forever,
// its events stored with their partition (DefaultPartitions).
func Config() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:               Name,
		Description:        "allocation ledger: the log of truth",
		Subjects:           []string{LegacyFilter},
		SubjectTransform:   partitionTransform(DefaultPartitions),
		Storage:            jetstream.FileStorage,
		Retention:          jetstream.LimitsPolicy,
		MaxAge:             0,
		MaxMsgs:            -1,
		MaxBytes:           -1,
		Discard:            jetstream.DiscardNew,
		DenyDelete:         true,
		DenyPurge:          true,
		Duplicates:         DuplicateWindow,
		AllowAtomicPublish: true,
		// Readers read ranges with direct gets (Read) and hold no
		// consumer (docs/decisions.md 120).
		AllowDirect: true,
	}
}

// Ensure creates the stream if it is missing and returns it. An existing
// stream is used as it is. Only the admin identity may create it (see
// internal/natsauth); others get ErrMissing while it does not exist.
func Ensure(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	return EnsureWindow(ctx, js, 0)
}

// ErrMissing: the stream does not exist and this identity may not create
// it.
var ErrMissing = errors.New("stream LEDGER does not exist (the admin identity creates it: `ledger dev`, or `ledger nats setup`)")

// EnsureWindow is Ensure with a duplicate window (0: DuplicateWindow for
// a new stream, an existing one unchanged); an existing stream with
// another window is updated to it, which needs the admin identity.
func EnsureWindow(ctx context.Context, js jetstream.JetStream, window time.Duration) (jetstream.Stream, error) {
	return setup(ctx, js, Settings{Window: window}, false)
}

// Settings are what the admin chooses of the stream's configuration.
type Settings struct {
	// Window is the duplicate window (0: DuplicateWindow for a new
	// stream, an existing one unchanged).
	Window time.Duration
	// Replicas is how many servers keep a copy of the log (0: 1 for a
	// new stream, an existing one unchanged). An acknowledged append is
	// stored on a majority of them.
	Replicas int
	// Servers is the size of the NATS cluster when the caller knows it
	// (`ledger dev` started it): more replicas are refused without
	// asking the server. 0: the server's refusal tells.
	Servers int
	// Partitions is the partition count of the stored subjects
	// (partitions.go; 0: DefaultPartitions). A new stream is created
	// with it; Setup gives it to an existing stream that has none (the
	// migration), and refuses another count for one that has: it is
	// fixed when the stream is made.
	Partitions int
}

// ErrPartitions: a stream's partition count cannot be changed, or is
// out of range.
var ErrPartitions = errors.New("stream partitions")

// Setup creates the stream with set when it is missing, or updates an
// existing stream to the window and replicas set asks for (docs/decisions.md:
// the admin scales a stream rather than being refused). Both need the
// admin identity. More replicas than servers are refused with a
// *ReplicasError (errors.Is ErrTooManyReplicas). An existing stream made
// by an older release is also given what this one's Config adds
// (allow_direct, which Read needs).
func Setup(ctx context.Context, js jetstream.JetStream, set Settings) (jetstream.Stream, error) {
	return setup(ctx, js, set, true)
}

func setup(ctx context.Context, js jetstream.JetStream, set Settings, upgrade bool) (jetstream.Stream, error) {
	if err := checkReplicas(js.Conn(), set); err != nil {
		return nil, err
	}
	cfg := Config()
	if set.Window > 0 {
		cfg.Duplicates = set.Window
	}
	if set.Replicas > 0 {
		cfg.Replicas = set.Replicas
	}
	if set.Partitions < 0 || set.Partitions > MaxPartitions {
		return nil, fmt.Errorf("%w: %d (1 to %d)", ErrPartitions, set.Partitions, MaxPartitions)
	}
	if set.Partitions > 0 {
		cfg.SubjectTransform = partitionTransform(set.Partitions)
	}
	s, err := js.Stream(ctx, Name)
	if err == nil {
		return update(ctx, js, s, set, upgrade)
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("look up stream %s: %w", Name, err)
	}
	s, err = js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return js.Stream(ctx, Name)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrPermissionViolation) {
		// A refused request times out: the identity may not create streams.
		return nil, fmt.Errorf("%w: create: %w", ErrMissing, err)
	}
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", Name, replicasRefusal(js.Conn(), set, err))
	}
	return s, nil
}

// update sets an existing stream's window and replicas to set's, when
// set names them and they differ.
func update(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, set Settings, upgrade bool) (jetstream.Stream, error) {
	cfg := s.CachedInfo().Config
	if have := Partitions(cfg); have > 0 && set.Partitions > 0 && set.Partitions != have {
		return nil, fmt.Errorf("%w: stream %s stores its events in %d partitions, fixed when it was made; a projector with n partitions reads only its own when n divides %d",
			ErrPartitions, Name, have, have)
	}
	if upgrade && Partitions(cfg) == 0 {
		return migrate(ctx, js, cfg, set)
	}
	changed := false
	if upgrade && !cfg.AllowDirect {
		cfg.AllowDirect, changed = true, true
	}
	if set.Window > 0 && cfg.Duplicates != set.Window {
		cfg.Duplicates, changed = set.Window, true
	}
	if set.Replicas > 0 && max(cfg.Replicas, 1) != set.Replicas {
		cfg.Replicas, changed = set.Replicas, true
	}
	if !changed {
		return s, nil
	}
	s, err := js.UpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("set stream %s to a duplicate window of %v, %d replica(s) and direct gets: %w",
			Name, cfg.Duplicates, max(cfg.Replicas, 1), replicasRefusal(js.Conn(), set, err))
	}
	return s, nil
}

// Stored is one event read back from the stream, with its offset.
type Stored struct {
	Seq      uint64
	Envelope events.Envelope
	Raw      []byte
	// Gate is a refusal decided before the engine sees the event
	// ("code: reason", e.g. an unsigned event), "" when none.
	Gate string

	decoded   bool
	payload   events.Payload
	decodeErr error
}

// Predecode decodes the payload now and keeps it, so a reader goroutine
// can do the decoding while another folds.
func (s *Stored) Predecode() {
	if !s.decoded {
		s.payload, s.decodeErr = s.Envelope.Decode()
		s.decoded = true
	}
}

// Decoded gives the payload an event was encoded from, so it is not
// decoded again (the ledger folds what it appended).
func (s *Stored) Decoded(p events.Payload) {
	s.payload, s.decodeErr, s.decoded = p, nil, true
}

// Payload returns the decoded payload (decoding it unless Predecode did).
func (s *Stored) Payload() (events.Payload, error) {
	if s.decoded {
		return s.payload, s.decodeErr
	}
	return s.Envelope.Decode()
}

// DecodeRaw decodes a stored message body at a stream sequence.
func DecodeRaw(seq uint64, data []byte) (Stored, error) {
	env, p, err := events.ParseEvent(data)
	if err != nil {
		return Stored{}, fmt.Errorf("event at sequence %d: %w", seq, err)
	}
	st := Stored{Seq: seq, Envelope: env, Raw: data}
	if p != nil { // decoded on the way: not again
		st.Decoded(p)
	}
	return st, nil
}
