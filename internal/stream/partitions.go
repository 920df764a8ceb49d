package stream

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Partitions in the stored subject (docs/decisions.md #309-#312).
//
// The ledger publishes an event on ledger.<pool>.<type> and signs that
// subject. The stream stores it on ledger.<pool>.<type>.<k>, where k is
// the pool's partition: NATS's own subject mapping, partition(N, 1),
// FNV-1a (32 bits) of the pool's name modulo N, computed by the server as
// it stores the message (a subject transform of the stream). N is fixed
// when the stream is created, as a Kafka topic's partitions are. A
// partitioned projector's consumer then filters to its partitions'
// subjects and reads each event once, instead of every event and
// skipping the others'.
//
// The stream captures only ledger.*.* (three tokens): a message published
// on a stored form (four tokens) is not stored at all, so the partition
// token of every stored event is the server's. A stream made by an older
// release stores ledger.<pool>.<type> until `ledger nats setup` gives it
// the mapping (the migration); its earlier events keep their subjects,
// and every reader takes both forms: PoolFilter matches both, PoolOf and
// Published read both.

// DefaultPartitions is the partition count of a stream that
// `ledger nats setup` or `ledger dev` creates or migrates: a projector
// with n partitions reads only its own events when n divides it (1, 2,
// 3, 4, 6, 8, 12, 16, 24 and 48 do).
const DefaultPartitions = 48

// MaxPartitions bounds a stream's partition count (projections'
// MaxPartitions: a partition is a filter subject of a consumer).
const MaxPartitions = 256

// LegacyFilter matches the events a stream stored before it was
// partitioned (ledger.<pool>.<type>), and none stored after.
const LegacyFilter = "ledger.*.*"

// partitionedFromKey is the stream metadata entry that says from which
// sequence every event is stored in partitioned form, set when
// `ledger nats setup` migrated the stream: "pending" between the two
// updates that migrate it (from an unknown sequence), then the sequence.
// A stream created partitioned has no entry: from 1.
const partitionedFromKey = "ledger.partitioned_from"

var partitionDest = regexp.MustCompile(`^ledger\.\{\{\s*wildcard\(1\)\s*\}\}\.\{\{\s*wildcard\(2\)\s*\}\}\.\{\{\s*partition\((\d+),\s*1\)\s*\}\}$`)

// partitionTransform is the subject mapping of a stream of n partitions.
func partitionTransform(n int) *jetstream.SubjectTransformConfig {
	return &jetstream.SubjectTransformConfig{
		Source:      LegacyFilter,
		Destination: fmt.Sprintf("ledger.{{wildcard(1)}}.{{wildcard(2)}}.{{partition(%d,1)}}", n),
	}
}

// Partitions is the partition count of a stream's configuration: 0 when
// its subjects carry no partition (made by an older release and not
// migrated).
func Partitions(cfg jetstream.StreamConfig) int {
	if cfg.SubjectTransform == nil || cfg.SubjectTransform.Source != LegacyFilter {
		return 0
	}
	m := partitionDest.FindStringSubmatch(cfg.SubjectTransform.Destination)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 || n > MaxPartitions {
		return 0
	}
	return n
}

// PartitionedFrom is the first sequence from which every event of a
// partitioned stream is stored in partitioned form: 1 for a stream
// created so, and 0 when it is not known (a migration in progress, or a
// stream not partitioned): every sequence may then hold either form.
func PartitionedFrom(cfg jetstream.StreamConfig) uint64 {
	if Partitions(cfg) == 0 {
		return 0
	}
	v, ok := cfg.Metadata[partitionedFromKey]
	if !ok {
		return 1
	}
	seq, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0
	}
	return seq
}

// PartitionFilter matches the events stored in partition k.
func PartitionFilter(k int) string { return "ledger.*.*." + strconv.Itoa(k) }

// Published is the subject an event was published and signed on: its
// stored subject without the partition token (ledger.<pool>.<type>),
// or the subject itself when it carries none.
func Published(subject string) string {
	if i := strings.LastIndexByte(subject, '.'); i > 0 && strings.Count(subject, ".") == 3 && strings.HasPrefix(subject, "ledger.") && isDigits(subject[i+1:]) {
		return subject[:i]
	}
	return subject
}

func isDigits(s string) bool {
	if s == "" || len(s) > 3 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// migrate gives a stream made by an older release its partitions
// (Settings.Partitions, or DefaultPartitions) along with what Setup
// gives any existing stream: from then on the server stores each event
// with its pool's partition; the events stored before keep their
// subjects. Two updates: the mapping, with partitioned_from "pending",
// then the sequence after the last one stored once the mapping was in
// force, from which every event has the new form (readers that saw
// "pending" look for the old form everywhere, which is only slower).
func migrate(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig, set Settings) (jetstream.Stream, error) {
	n := set.Partitions
	if n == 0 {
		n = DefaultPartitions
	}
	cfg.Subjects = []string{LegacyFilter}
	cfg.SubjectTransform = partitionTransform(n)
	cfg.AllowDirect = true
	if set.Window > 0 {
		cfg.Duplicates = set.Window
	}
	if set.Replicas > 0 {
		cfg.Replicas = set.Replicas
	}
	cfg.Metadata = maps.Clone(cfg.Metadata)
	if cfg.Metadata == nil {
		cfg.Metadata = map[string]string{}
	}
	cfg.Metadata[partitionedFromKey] = "pending"
	s, err := js.UpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("give stream %s its %d partitions: %w", Name, n, replicasRefusal(js.Conn(), set, err))
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("give stream %s its %d partitions: %w", Name, n, err)
	}
	cfg = info.Config
	cfg.Metadata = maps.Clone(cfg.Metadata)
	if cfg.Metadata == nil {
		cfg.Metadata = map[string]string{}
	}
	cfg.Metadata[partitionedFromKey] = strconv.FormatUint(info.State.LastSeq+1, 10)
	if s, err = js.UpdateStream(ctx, cfg); err != nil {
		return nil, fmt.Errorf("record where stream %s's partitions begin: %w", Name, err)
	}
	return s, nil
}
