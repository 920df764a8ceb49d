package projections

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Partitioned projectors.
//
// With WithPartition(k, n) a Projector folds only the pools whose name
// hashes to k (PartitionOf), so n partitions can be spread over several
// projector instances. Each partition is a durable JetStream consumer
// (PartitionName) with a pinned-client priority group: every instance
// pulls from every partition, and the server delivers a partition's
// messages to one pinned instance at a time, unpinning it after
// PinnedTTL without a pull request, so a dead instance's partitions move
// to a live one within seconds; what a live instance was delivered is
// not delivered again while it holds it, however long that takes
// (in-progress acks: inflight.go). The pin is NATS's; PostgreSQL fences:
// a partition's projector_offsets row is locked and compared in the
// batch transaction, so an instance that lost its partition and still
// commits finds the row moved and stops folding it (ErrPartitionLost)
// instead of writing twice. See docs/decisions.md for why this design.
//
// When the stream stores each event with its partition in the subject
// and n divides the stream's partition count, a partition's consumer
// filters to its own subjects and reads each of its events once
// (subjects.go); a gap (messages a dead instance had in flight,
// delivered again later) is found by the consumer's delivery sequence
// and filled from the partition's subjects in order. Otherwise every
// partition consumer reads the whole stream and skips the events of
// other partitions by their subject: sequences stay contiguous per
// partition, so a gap is a jump in stream sequence. Either way the
// per-pool expected-sequence check and the signatures stay as they are.

// MaxPartitions bounds --partitions: each partition is a consumer and a
// fetch loop in every instance.
const MaxPartitions = 256

// PriorityGroup is the priority group of the partition consumers.
const PriorityGroup = "projectors"

// DefaultPinnedTTL is how long a partition stays with an instance that
// sends no pull request: the hand-over time after an instance dies.
const DefaultPinnedTTL = 5 * time.Second

// ErrPartitionLost: another instance took the partition over (its
// offset moved under this one). The instance drops what it folded and
// waits to be given a partition again; Group.Run does so by itself.
var ErrPartitionLost = errors.New("projector: partition taken over by another instance")

// ErrBadPartition: the partition options are out of range.
var ErrBadPartition = errors.New("projector: bad partition")

// ErrOtherPartitioning: projector_offsets holds rows of another
// partitioning; two partitionings would fold the same pool twice.
var ErrOtherPartitioning = errors.New("projector: the projection is partitioned otherwise")

type partition struct{ k, n int }

// PartitionOf is the partition of pool among n: FNV-1a (32 bits) of the
// name, modulo n. It is part of the projection's format: changing it
// moves pools between partitions.
func PartitionOf(pool string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(pool))
	return int(h.Sum32() % uint32(n))
}

// PartitionName is the durable consumer name and projector_offsets key of
// partition k of n, e.g. "projector-p3of8".
func PartitionName(base string, k, n int) string {
	return fmt.Sprintf("%s-p%dof%d", base, k, n)
}

// WithPartition makes the projector fold partition k of n only, as a
// member of the pinned priority group of that partition's consumer.
// Values out of range make New's Run fail with ErrBadPartition.
func WithPartition(k, n int) Option {
	return func(c *config) { c.part = &partition{k: k, n: n} }
}

// WithInstance names this projector instance in projector_offsets.owner
// (default host:pid).
func WithInstance(id string) Option {
	return func(c *config) {
		if id != "" {
			c.instance = id
		}
	}
}

// WithPinnedTTL sets how long a partition stays pinned to an instance
// that stopped pulling (default DefaultPinnedTTL; at least two seconds:
// pull requests are renewed every half TTL, and JetStream wants them to
// last a second at least).
func WithPinnedTTL(d time.Duration) Option {
	return func(c *config) {
		if d >= 2*time.Second {
			c.pinnedTTL = d
		}
	}
}

func defaultInstance() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

func (p *Projector) checkPartition() error {
	if pt := p.cfg.part; pt != nil && (pt.n < 1 || pt.n > MaxPartitions || pt.k < 0 || pt.k >= pt.n) {
		return fmt.Errorf("%w: partition %d of %d (want 0 <= k < n <= %d)", ErrBadPartition, pt.k, pt.n, MaxPartitions)
	}
	return nil
}

// mine reports whether pool belongs to this projector's partition.
func (p *Projector) mine(pool string) bool {
	pt := p.cfg.part
	return pt == nil || PartitionOf(pool, pt.n) == pt.k
}

// offsetName is the projector_offsets key (and durable consumer name).
func (p *Projector) offsetName() string {
	if pt := p.cfg.part; pt != nil {
		return PartitionName(p.cfg.name, pt.k, pt.n)
	}
	return p.cfg.name
}

// partitionCols are projector_offsets.partition and .partitions (NULL
// when unpartitioned).
func (p *Projector) partitionCols() (any, any) {
	if pt := p.cfg.part; pt != nil {
		return pt.k, pt.n
	}
	return nil, nil
}

// checkPartitioning refuses to start beside rows of another partitioning
// (or of an unpartitioned projector when this one is partitioned, and the
// reverse): both would fold the same pools.
func (p *Projector) checkPartitioning(ctx context.Context, tx pgx.Tx) error {
	_, parts := p.partitionCols()
	rows, _ := tx.Query(ctx, `SELECT name FROM projector_offsets WHERE partitions IS DISTINCT FROM $1::int ORDER BY name LIMIT 4`, parts)
	others, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(others) == 0 {
		return err
	}
	want := "unpartitioned"
	if pt := p.cfg.part; pt != nil {
		want = fmt.Sprintf("%d partitions", pt.n)
	}
	return fatal(fmt.Errorf("%w: projector_offsets holds %s, but this projector runs %s; stop the projectors of the other partitioning and delete their rows (DELETE FROM projector_offsets WHERE name = ...) to change it: the pools' checkpoints carry over",
		ErrOtherPartitioning, strings.Join(others, ", "), want))
}
