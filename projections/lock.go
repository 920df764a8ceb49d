package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrAnotherProjector: a projector of the same name already runs on
// this database (it holds the projector lock): this one refuses to start
// and touches nothing, so the first goes on.
var ErrAnotherProjector = errors.New("another projector of this name runs on this database")

// ErrLockLost: the projector lost its lock (its PostgreSQL session ended)
// and another projector of its name took it meanwhile: it stops.
var ErrLockLost = errors.New("the projector lock was lost to another projector of this name")

// lockCheckEvery is how often the projector checks that the session
// holding its lock is alive.
const lockCheckEvery = 2 * time.Second

// lockWait is how long a starting projector tries for a lock held by
// another session before it refuses: a projector that just stopped or
// was killed frees its lock when its server process notices, a moment
// after its connection closed.
const lockWait = 3 * time.Second

// The projector lock (decision #156). Two projectors of one name share
// a durable consumer and the offset rows: the second would delete and
// recreate the first's consumer and commit over its offsets, and the
// first would stop on "another projector writing the same offset". So a
// projector takes, before it touches the consumer or the projection, a
// PostgreSQL session advisory lock keyed by its name and keeps the
// session for as long as it runs: exclusive for an unpartitioned
// projector, shared among the instances of a partitioned one (they
// share the partitions through NATS pinned consumers), so an
// unpartitioned projector and partitioned instances of one name exclude
// each other too. A session lock holds no transaction open (VACUUM is
// not held back) and goes with its session, so a killed projector's lock
// is free at once. Only the owner and the projector role may take
// advisory locks (migrations.ClusterSQL), so no reader can hold it to
// keep the projector from starting.
const sqlLock = `SELECT CASE WHEN $2 THEN pg_try_advisory_lock_shared(hashtextextended($1, 0))
	ELSE pg_try_advisory_lock(hashtextextended($1, 0)) END`

// lockKey is the text whose hash keys the lock of projectors named name.
func lockKey(name string) string { return "ledger projector " + name }

// takeLock takes the projector lock on a session of its own, taken out
// of the pool. A lock another projector holds is ErrAnotherProjector
// (fatal); PostgreSQL unavailable is retried by the caller.
func (p *Projector) takeLock(ctx context.Context) (*pgx.Conn, error) {
	pc, err := p.db.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	conn := pc.Hijack() // the pool makes another; this session is the lock's
	var ok bool
	for deadline := time.Now().Add(lockWait); ; {
		if err := conn.QueryRow(ctx, sqlLock, lockKey(p.cfg.name), p.cfg.part != nil).Scan(&ok); err != nil {
			conn.Close(context.WithoutCancel(ctx))
			return nil, classify(fmt.Errorf("take the projector lock: %w", err))
		}
		if ok || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			conn.Close(context.WithoutCancel(ctx))
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !ok {
		conn.Close(context.WithoutCancel(ctx))
		mode := "an unpartitioned projector"
		if p.cfg.part == nil {
			mode = "a projector (or partitioned instances)"
		}
		return nil, fatal(fmt.Errorf("%w: %s named %q already runs here and holds its lock; "+
			"this one changed nothing and stops (stop the other first, or give this one another --name)", ErrAnotherProjector, mode, p.cfg.name))
	}
	return conn, nil
}

// lockHeld takes the projector lock (retrying while PostgreSQL is away)
// and holds it (holdLock) until release is called: the context returned
// ends, with ErrLockLost as its cause, if the lock is lost to another
// projector, and cancel ends it with another cause. A nil release: the
// lock was not taken, err says why (nil when ctx ended first). One
// procedure for an unpartitioned projector (Run) and for a partitioned
// instance, which holds it once for all its partitions (Group.Run).
func (p *Projector) lockHeld(ctx context.Context) (held context.Context, cancel context.CancelCauseFunc, release func(), err error) {
	var lock *pgx.Conn
	err = p.retry(ctx, "take the projector lock", func() (err error) {
		lock, err = p.takeLock(ctx)
		return err
	})
	if err != nil {
		if ctx.Err() != nil && !isFatal(err) {
			return ctx, nil, nil, nil
		}
		return ctx, nil, nil, err
	}
	held, cancel = context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.holdLock(held, lock, cancel)
	}()
	return held, cancel, func() { cancel(nil); <-done }, nil
}

// holdLock checks the lock's session every lockCheckEvery until ctx
// ends, then ends the session (which frees the lock). A session that
// died lost the lock: it takes it again on a new one, and when another
// projector of its name took it meanwhile, stops the projector (stop)
// with ErrLockLost.
func (p *Projector) holdLock(ctx context.Context, conn *pgx.Conn, stop context.CancelCauseFunc) {
	defer func() { releaseLock(conn) }()
	t := time.NewTicker(lockCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, lockCheckEvery)
		err := conn.Ping(pctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			continue
		}
		p.cfg.log.Warn("projector: the session holding the projector lock ended; taking the lock again", "err", err)
		conn.Close(context.WithoutCancel(ctx))
		next, err := p.takeLock(ctx)
		switch {
		case err == nil:
			conn = next
		case errors.Is(err, ErrAnotherProjector):
			stop(fatal(fmt.Errorf("%w: %w", ErrLockLost, err)))
			return
		default:
			// PostgreSQL is away: no other projector can take the lock
			// either; try again at the next tick.
		}
	}
}

// releaseLock frees the lock at once (closing the session alone frees it
// only once the server process has noticed) and ends the session.
func releaseLock(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !conn.IsClosed() {
		_, _ = conn.Exec(ctx, "SELECT pg_advisory_unlock_all()")
	}
	conn.Close(ctx)
}
