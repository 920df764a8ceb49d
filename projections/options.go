package projections

import (
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/metrics"
	"github.com/cluster-ledger/ledger/internal/signing"
)

// Defaults of the options.
const (
	DefaultBatchSize     = 1000
	DefaultSnapshotEvery = 10000
	// DefaultSnapshotCost is the work (foldCost units) after which a
	// pool's state is saved even before DefaultSnapshotEvery events: at
	// most a second or two of folding again (measured: 0.2-3 µs a unit,
	// 5-11 with ownership's host events), so any pool rebuilds from its
	// newest snapshot in seconds (docs/decisions.md #182).
	DefaultSnapshotCost = 200_000
	DefaultName         = "projector"
	// DefaultPipelineRows is the largest batch written in one round trip
	// (write.go, docs/decisions.md #306).
	DefaultPipelineRows = 2000
)

// Failpoint stages, for crash tests (WithFailpoint).
const (
	// StageBeforeCommit runs inside the batch transaction, after every
	// row is written; an error rolls the transaction back.
	StageBeforeCommit = "before-commit"
	// StageAfterCommitBeforeAck runs after the commit, before the ack.
	StageAfterCommitBeforeAck = "after-commit-before-ack"
)

// Option configures a Projector.
type Option func(*config)

type config struct {
	batchSize     int
	snapshotEvery int
	snapshotCost  int64
	resident      int           // pools whose engine state stays in memory (resident.go)
	batchWork     time.Duration // how long a batch folds at most (fair.go)
	name          string
	log           *slog.Logger
	failpoint     func(stage string) error
	ackWait       time.Duration
	idleWait      time.Duration
	dropAck       func() bool // tests: simulate a lost ack
	keys          *signing.Keyring
	healer        jetstream.JetStream
	foldHook      func(pool string, seq uint64) // tests: runs before each fold (a panic halts the pool)
	part          *partition                    // nil: every pool (partition.go)
	instance      string                        // projector_offsets.owner
	pinnedTTL     time.Duration
	healLock      *sync.Mutex // a Group's partitions heal the stream one at a time
	groupLocked   bool        // a Group's partition: the Group holds the projector lock for it
	until         uint64      // WithUntil: fold up to it with direct gets, then return (until.go)
	development   bool        // fold the rules version in development (WithDevelopmentRules)
	syncCommit    bool        // WithSynchronousCommit: wait for PostgreSQL's WAL flush at each commit
	pipelineRows  int         // batches of at most this many rows are written in one round trip (write.go)
	serialWrites  bool        // benchmarks: no batch begun beside the one before (pipeline.go), for comparison

	metrics  *metrics.Projector // nil: no figures recorded (metrics.go)
	failures *Failures          // nil: failing retries are only logged (failures.go)
}

func defaults() config {
	return config{
		batchSize:     DefaultBatchSize,
		snapshotEvery: DefaultSnapshotEvery,
		snapshotCost:  DefaultSnapshotCost,
		resident:      DefaultResidentPools,
		batchWork:     DefaultBatchWork,
		name:          DefaultName,
		log:           slog.Default(),
		ackWait:       30 * time.Second,
		idleWait:      5 * time.Second,
		instance:      defaultInstance(),
		pinnedTTL:     DefaultPinnedTTL,
		pipelineRows:  DefaultPipelineRows,
	}
}

// WithSynchronousCommit makes every batch's commit wait until PostgreSQL
// has flushed it to disk (synchronous_commit on, PostgreSQL's default).
// By default the projector commits asynchronously: the log is the truth
// and each batch's offset commits with its rows, so a commit PostgreSQL
// loses in a crash is folded again from the log (docs/decisions.md #305).
// A deployment whose NATS syncs in the background on the same machine as
// PostgreSQL, and relies on the projection to heal the stream of every
// projected event after a crash of both, wants it on.
func WithSynchronousCommit() Option { return func(c *config) { c.syncCommit = true } }

// WithPipelineRows sets the largest batch (events, decisions, history,
// snapshot and plan rows together) written as one pipelined round trip
// instead of COPYs in a transaction (default DefaultPipelineRows; 0 or
// less: every batch by COPY).
func WithPipelineRows(n int) Option { return func(c *config) { c.pipelineRows = n } }

// WithTrustedKeys makes the projector refuse (code unauthenticated) every
// event no key of keys signed. Without it events are not authenticated.
func WithTrustedKeys(keys *signing.Keyring) Option { return func(c *config) { c.keys = keys } }

// WithHealer sets the JetStream connection that appends lost events again
// when the projector heals the stream. The projector's own identity may
// only read (internal/natsauth); healing needs one that may publish to
// ledger.> (the ledger's). Default: the projector's connection.
func WithHealer(js jetstream.JetStream) Option { return func(c *config) { c.healer = js } }

// WithBatchSize sets how many events are fetched and committed together
// (default 1000).
func WithBatchSize(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.batchSize = n
		}
	}
}

// WithSnapshotEvery sets after how many events of a pool its state is
// saved to the snapshots table (default 10000).
func WithSnapshotEvery(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.snapshotEvery = n
		}
	}
}

// WithSnapshotCost sets the work (in the units of foldCost: one per
// consumer or host state an event produced, plus 50 per event) after
// which a pool's state is saved even if fewer than WithSnapshotEvery
// events were folded since its last snapshot (default
// DefaultSnapshotCost).
func WithSnapshotCost(n int64) Option {
	return func(c *config) {
		if n > 0 {
			c.snapshotCost = n
		}
	}
}

func (c config) snapshotRule() snapshotRule {
	return snapshotRule{events: c.snapshotEvery, cost: c.snapshotCost}
}

// WithName sets the durable consumer name, which is also the
// projector_offsets key (default "projector").
func WithName(name string) Option {
	return func(c *config) {
		if name != "" {
			c.name = name
		}
	}
}

// WithLogger sets where the projector logs (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.log = l
		}
	}
}

// WithFailpoint installs a hook called at each stage (StageBeforeCommit,
// StageAfterCommitBeforeAck) of every batch. When it returns an error,
// Run stops with that error as if the process died there: crash tests
// use it to prove nothing is lost or doubled.
func WithFailpoint(f func(stage string) error) Option {
	return func(c *config) { c.failpoint = f }
}

// WithDevelopmentRules lets the projector fold plans that name the rules
// version in development (domain.RulesDevelopment), which the ledger
// refuses at append unless it has the same switch (ledger dev
// --rules-development). For tests and development only: a log holding
// such a plan means nothing to a projector without it (it stops there,
// as for any version it does not implement), and the version's behaviour
// may still change, so a projection made with it may not be rebuilt the
// same way by a later build.
func WithDevelopmentRules() Option { return func(c *config) { c.development = true } }

// poolOptions are the engine's options for the pools the projector folds.
func (c *config) poolOptions() []domain.PoolOption {
	if c.development {
		return []domain.PoolOption{domain.WithDevelopmentRules()}
	}
	return nil
}
