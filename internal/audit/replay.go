package audit

import (
	"context"
	"fmt"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
	"github.com/jackc/pgx/v5/pgxpool"
)

// poolReplay is one pool being re-folded.
type poolReplay struct {
	pool  *domain.Pool
	chain domain.Hash
	start uint64 // events at or below this are already in the state
	ids   *projections.IDs
}

// Replayer re-folds pools, each from its nearest snapshot at or before the
// requested offset (or from the beginning without a database).
type Replayer struct {
	db    query.Querier // nil: no database, every pool from the beginning
	from  uint64
	pools map[string]*poolReplay
	keys  *signing.Keyring
	opts  []domain.PoolOption // how the engine's pools are made
}

// Option configures a Replayer.
type Option func(*Replayer)

// WithDevelopmentRules folds plans that name the rules version in
// development (domain.RulesDevelopment), as a projector made with
// projections.WithDevelopmentRules does: for tests and development only
// (the console of ledger dev --rules-development).
func WithDevelopmentRules() Option {
	return func(r *Replayer) { r.opts = append(r.opts, domain.WithDevelopmentRules()) }
}

// Trust makes the replay refuse (unauthenticated) events no key of keys
// signed, as a projector given the same keys does.
func (r *Replayer) Trust(keys *signing.Keyring) { r.keys = keys }

// NewReplayer prepares a replay from offset from; db may be nil.
func NewReplayer(db *pgxpool.Pool, from uint64, opts ...Option) *Replayer {
	var r *Replayer
	if db == nil {
		r = newReplayer(nil, from)
	} else {
		r = newReplayer(db, from)
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// newReplayer is NewReplayer reading snapshots through q (a transaction,
// so that they come from the same snapshot of the database as the rows
// they are compared with); q may be nil.
func newReplayer(q query.Querier, from uint64) *Replayer {
	return &Replayer{db: q, from: max(from, 1), pools: map[string]*poolReplay{}}
}

// Event is one event re-folded, with what it did.
type Event struct {
	Message
	Result projections.FoldResult
	Prev   domain.Hash
	Link   domain.Hash
	Pool   *domain.Pool
}

// ReadFrom is where the log must be read from to replay pool from the
// replay's offset: just after its nearest snapshot. For every pool ("")
// it is 1, since pools the projection has not seen have no snapshot; each
// known pool still skips what its snapshot already holds.
func (r *Replayer) ReadFrom(ctx context.Context, pool string) (uint64, error) {
	if pool == "" {
		return 1, nil
	}
	pr, err := r.open(ctx, pool)
	if err != nil {
		return 0, err
	}
	return pr.start + 1, nil
}

// Fold re-folds one message; ok is false when the message is already in
// its pool's restored state.
func (r *Replayer) Fold(ctx context.Context, m Message) (Event, bool, error) {
	pr, err := r.open(ctx, m.Pool)
	if err != nil {
		return Event{}, false, err
	}
	if m.Stored.Seq <= pr.start {
		return Event{}, false, nil
	}
	prev := pr.chain
	r.authenticate(&m)
	if m.authErr != nil { // neither accepted nor refused: the historical keys were not read
		return Event{}, false, m.authErr
	}
	res, link, err := projections.Fold(pr.pool, pr.ids, m.Stored, prev)
	if err != nil {
		return Event{}, false, err
	}
	pr.chain = link
	return Event{Message: m, Result: res, Prev: prev, Link: link, Pool: pr.pool}, true, nil
}

// authenticate checks m against the replayer's keys, unless it was
// checked against them already (ReadLogTrusted): m.Stored.Gate then says
// why the fold refuses it (unauthenticated), m.authErr why it could not
// be checked.
func (r *Replayer) authenticate(m *Message) {
	if !m.checked || m.checkedBy != r.keys { // checked against other keys, or not at all
		m.Stored.Gate = ""
		m.authErr = projections.Authenticate(r.keys, &m.Stored, m.Subject, m.Header, m.Stored.Raw)
		m.checked, m.checkedBy = true, r.keys
	}
}

// Stamped reports whether m's time is one the ledger stamped: m passes
// the replayer's trusted keys. An event published around the ledger
// carries whatever time its publisher wrote (decision 530), so a point
// given as a time is passed only by an event the ledger stamped after
// it. The error is the check's when it could not be made.
func (r *Replayer) Stamped(m *Message) (bool, error) {
	r.authenticate(m)
	return m.authErr == nil && m.Stored.Gate == "", m.authErr
}

// Pools returns the pools replayed so far.
func (r *Replayer) Pools() map[string]*domain.Pool {
	out := make(map[string]*domain.Pool, len(r.pools))
	for name, pr := range r.pools {
		out[name] = pr.pool
	}
	return out
}

// open returns a pool's replay state, restoring the newest snapshot taken
// before the replay's offset, with the chain link stored at that offset.
func (r *Replayer) open(ctx context.Context, name string) (*poolReplay, error) {
	if pr, ok := r.pools[name]; ok {
		return pr, nil
	}
	pr := &poolReplay{pool: domain.NewPool(name, r.opts...), ids: projections.NewIDs()}
	if r.db != nil && r.from > 1 && name != "" {
		if err := r.restore(ctx, name, pr); err != nil {
			return nil, err
		}
	}
	r.pools[name] = pr
	return pr, nil
}

func (r *Replayer) restore(ctx context.Context, name string, pr *poolReplay) error {
	snap, ok, err := query.SnapshotBefore(ctx, r.db, name, r.from)
	if err != nil || !ok {
		return err
	}
	seq, state, link := snap.Seq, snap.State, snap.ChainHash
	p, err := domain.Restore(state, r.opts...)
	if err != nil {
		return fmt.Errorf("snapshot of pool %s at %d: %w", name, seq, err)
	}
	pr.pool, pr.start = p, seq
	copy(pr.chain[:], link)
	return r.loadIDs(ctx, name, pr)
}

// loadIDs reads the ids the pool applied up to its snapshot, as the
// projector does when it resumes.
func (r *Replayer) loadIDs(ctx context.Context, name string, pr *poolReplay) error {
	ids, err := query.AppliedIDs(ctx, r.db, name, pr.start)
	for _, id := range ids {
		pr.ids.Add(id)
	}
	return err
}
