package projections

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/stream"
)

// Group is one projector instance of a partitioned deployment: it takes
// part in every partition's priority group and folds the partitions NATS
// pins to it. Start as many instances as wanted, with the same number of
// partitions; they share the partitions and take over those of an
// instance that stops.
type Group struct {
	js   jetstream.JetStream
	db   *pgxpool.Pool
	n    int
	opts []Option
	ttl  time.Duration // the partitions' pinned TTL

	mu    sync.Mutex
	parts []*Projector // the current projector of each partition
	heal  sync.Mutex   // see config.healLock
}

// restartPause is how long a partition waits before it is opened again
// after it was lost or its feed ended.
const restartPause = 500 * time.Millisecond

// NewGroup returns an instance folding the partitions, out of n, that it
// is given. n must be in 1..MaxPartitions.
func NewGroup(js jetstream.JetStream, db *pgxpool.Pool, n int, opts ...Option) (*Group, error) {
	if n < 1 || n > MaxPartitions {
		return nil, fmt.Errorf("%w: %d partitions (want 1 to %d)", ErrBadPartition, n, MaxPartitions)
	}
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	return &Group{js: js, db: db, n: n, opts: opts, ttl: cfg.pinnedTTL, parts: make([]*Projector, n)}, nil
}

// Run runs every partition until ctx is done (then it returns nil) or one
// fails for good (then it stops the others and returns that error).
//
// The instance takes the projector lock (lock.go: shared among the
// instances of a partitioned projector) once, on one session, for all
// its partitions. Each partition took it on a session of its own: an
// instance held --partitions sessions for one lock, so two instances of
// 16 partitions needed 32 of the projector role's 30 connections (its
// CONNECTION LIMIT) before any pool connection, and the second instance
// retried "too many connections for role" until the first died, its
// retries taking the connections the first's pool needed (decision 509).
func (g *Group) Run(ctx context.Context) error {
	locker := New(g.js, g.db, slices.Concat(g.opts, []Option{WithPartition(0, g.n)})...)
	ctx, cancel, release, err := locker.lockHeld(ctx)
	if release == nil {
		return err
	}
	defer release()
	var wg sync.WaitGroup
	wg.Go(func() { g.rebalance(ctx) })
	for k := range g.n {
		wg.Go(func() {
			if err := g.runPartition(ctx, k); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// runPartition keeps partition k open: a partition lost to another
// instance, or whose feed ended, is opened again (and waits for its pin).
func (g *Group) runPartition(ctx context.Context, k int) error {
	for ctx.Err() == nil {
		p := New(g.js, g.db, slices.Concat(g.opts, []Option{WithPartition(k, g.n), func(c *config) { c.healLock, c.groupLocked = &g.heal, true }})...)
		g.mu.Lock()
		g.parts[k] = p
		g.mu.Unlock()
		err := p.Run(ctx)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrPartitionLost), errors.Is(err, errFeed), errors.Is(err, errReleased):
			p.cfg.log.Info("projector: partition left; waiting to be given it again", "partition", p.offsetName(), "reason", err)
		default:
			return err
		}
		if errors.Is(err, errReleased) {
			g.stayOut(ctx, p)
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(restartPause):
		}
	}
	return nil
}

// stayOut keeps a partition this instance gave away out of the group
// until another instance holds its pin, so that the next message pins
// the other's request rather than this one's again; then it rejoins at
// once, to take the partition over within the pinned TTL should that
// instance die (issue 20: a fixed pause of three TTLs here left a
// partition nobody pulled when the taker died meanwhile). Without
// traffic nobody is pinned: it rejoins after three TTLs, as before.
func (g *Group) stayOut(ctx context.Context, p *Projector) {
	deadline := time.Now().Add(3 * g.ttl)
	tick := time.NewTicker(max(g.ttl/8, 50*time.Millisecond))
	defer tick.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		info, err := request(ctx, p, func(ctx context.Context) (jetstream.Consumer, error) {
			return p.js.Consumer(ctx, stream.Name, p.offsetName())
		})
		if err != nil {
			continue
		}
		for _, pg := range info.CachedInfo().PriorityGroups {
			if pg.PinnedClientID != "" && pg.PinnedClientID != p.pin {
				return // pinned to another: this instance's requests only wait now
			}
		}
	}
}

// rebalance gives partitions away while this instance holds more than its
// share: ceil(n / instances), where instances is how many instances run
// the group (instances). One partition per round, so the group settles
// without moving more than needed.
func (g *Group) rebalance(ctx context.Context) {
	t := time.NewTicker(g.ttl)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		held, waiting := g.holdings(ctx)
		if len(held) == 0 || waiting < 2 {
			continue
		}
		instances := min(waiting, g.lockHolders(ctx, held[0]))
		if instances < 2 {
			continue
		}
		share := (g.n + instances - 1) / instances
		if len(held) <= share {
			continue
		}
		p := held[len(held)-1]
		select {
		case p.release <- struct{}{}:
			p.cfg.log.Info("projector: giving a partition away", "partition", p.offsetName(), "held", len(held), "instances", instances, "share", share)
		default:
		}
	}
}

// How many instances run the group is told by two counts, each too high
// in its own way; the group takes the lower (decision 259).
//
//   - The pull requests waiting on a partition consumer (the fewest on
//     any): every live instance keeps one or two waiting on each (the
//     client asks for more before its last request is used up), and a
//     dead one's expire with it. Alone, a lone busy instance counted
//     two and gave a partition away to nobody every TTL, left unfolded
//     for three TTLs (stayOut).
//   - The sessions holding the projector lock shared (lock.go): each
//     instance holds one (Run; each partition held one of its own
//     before decision 509, n per instance: an instance of an older
//     release counts n here, and the pull requests bound the count); a
//     dead instance's lasts until PostgreSQL notices its session is
//     gone (at once for a killed process, later for a machine lost with
//     its connections).

// holdings returns the partitions this instance folds and the fewest
// pull requests waiting on any partition consumer (0 when it cannot
// tell).
func (g *Group) holdings(ctx context.Context) ([]*Projector, int) {
	g.mu.Lock()
	parts := slices.Clone(g.parts)
	g.mu.Unlock()
	var held []*Projector
	waiting := 0
	for _, p := range parts {
		if p == nil {
			return nil, 0
		}
		if p.holding.Load() {
			held = append(held, p)
		}
		info, err := request(ctx, p, func(ctx context.Context) (jetstream.Consumer, error) {
			return p.js.Consumer(ctx, stream.Name, p.offsetName())
		})
		if err != nil {
			return nil, 0
		}
		if w := info.CachedInfo().NumWaiting; waiting == 0 || w < waiting {
			waiting = w
		}
	}
	return held, waiting
}

// sqlLockHolders counts the sessions holding the projector lock of a
// name shared (lock.go), in this database.
const sqlLockHolders = `SELECT count(*) FROM pg_locks l, (SELECT hashtextextended($1, 0) AS k) h
WHERE l.locktype = 'advisory' AND l.granted AND l.mode = 'ShareLock' AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid = ((h.k >> 32) & 4294967295)::oid AND l.objid = (h.k & 4294967295)::oid`

// lockHolders is the instances as the holders of the projector lock
// count them, one session each (0 when PostgreSQL does not answer).
func (g *Group) lockHolders(ctx context.Context, p *Projector) int {
	qctx, cancel := context.WithTimeout(ctx, g.ttl)
	defer cancel()
	var holders int
	if err := g.db.QueryRow(qctx, sqlLockHolders, lockKey(p.cfg.name)).Scan(&holders); err != nil {
		return 0
	}
	return holders
}
