package projections

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cluster-ledger/ledger/domain"
)

// finalRows are the rows a batch leaves as current: the state of every
// consumer, holding and host it touched, read from the pools at the end of
// the batch (so a row changed ten times in a batch is written once).
type finalRows struct {
	state       [11][]any // consumer_state columns, see sqlUpsertState
	stateOwn    [15][]any // the same with the ownership columns, see sqlUpsertStateOwned
	allocUp     [4][]any
	allocDel    [3][]any
	ownUp       [4][]any // ownership rows (projections/ownership.go)
	ownDel      [3][]any
	hosts       [6][]any
	planPools   []string
	consumers   [][]any
	checkpoints [6][]any
}

func (b *batch) finish() *finalRows {
	f := &finalRows{}
	for _, name := range slices.Sorted(maps.Keys(b.pools)) {
		pb := b.pools[name]
		f.addState(name, pb)
		f.addAllocations(name, pb)
		f.addOwnership(name, pb)
		f.addHosts(name, pb)
		if pb.planChanged {
			f.addPlan(name, pb)
		}
		ps := pb.state
		sh, chain := ps.pool.StateHash(), ps.chain // copies: the next fold moves ps on
		pol := ps.pool.Policy()
		appendCols(f.checkpoints[:], name, int64(ps.lastSeq), sh[:], chain[:], int64(pol.Rules), int64(ps.pool.RulesSince()))
	}
	return f
}

func (f *finalRows) addState(name string, pb *poolBatch) {
	view := pb.viewer()
	// A pool whose views carry no ownership has 0 and NULL in the
	// ownership columns already (they only ever held more while its plan
	// named ownership, and the plan that stopped naming it rewrote every
	// row), so its rows are written without them.
	own := pb.state.pool.HasOwnership()
	for _, path := range slices.Sorted(maps.Keys(pb.touched)) {
		v, ok := view(path)
		if !ok {
			continue // removed by a plan: the pool's rows are replaced
		}
		var ws *int64
		if v.WaitingSince != 0 {
			w := int64(v.WaitingSince)
			ws = &w
		}
		if !own {
			appendCols(f.state[:], name, path, v.Leaf, v.Demand, v.Effective, v.Planned, v.Target, v.Allocated, v.Borrowed, ws, int64(pb.touched[path]))
			continue
		}
		oc := ownColsOf(&v)
		appendCols(f.stateOwn[:], name, path, v.Leaf, v.Demand, v.Effective, v.Planned, v.Target, v.Allocated, v.Borrowed, ws, int64(pb.touched[path]),
			oc.owned, oc.used, oc.lent, oc.sourcesValue())
	}
}

// viewer returns how to read the touched consumers' views: one at a
// time, or all at once after a plan or host event.
func (pb *poolBatch) viewer() func(string) (domain.ConsumerView, bool) {
	p := pb.state.pool
	if !pb.allHosts {
		return p.Consumer
	}
	views := p.Consumers()
	byPath := make(map[string]int, len(views))
	for i := range views {
		byPath[views[i].Path] = i
	}
	return func(path string) (domain.ConsumerView, bool) {
		i, ok := byPath[path]
		if !ok {
			return domain.ConsumerView{}, false
		}
		return views[i], true
	}
}

func (f *finalRows) addAllocations(name string, pb *poolBatch) {
	if len(pb.pairs) == 0 {
		return
	}
	for _, pair := range slices.SortedFunc(maps.Keys(pb.pairs), cmpPair) {
		if n := pb.state.pool.Held(pair[0], pair[1]); n != 0 {
			appendCols(f.allocUp[:], name, pair[0], pair[1], n)
		} else {
			appendCols(f.allocDel[:], name, pair[0], pair[1])
		}
	}
}

func cmpPair(a, b [2]string) int {
	if c := strings.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return strings.Compare(a[1], b[1])
}

func (f *finalRows) addHosts(name string, pb *poolBatch) {
	if !pb.allHosts && len(pb.hosts) == 0 {
		return
	}
	for _, h := range pb.state.pool.Hosts() {
		if pb.allHosts || pb.hosts[h.Name] {
			appendCols(f.hosts[:], name, h.Name, h.Group, h.Slots, h.Up, h.Allocated)
		}
	}
}

func (f *finalRows) addPlan(name string, pb *poolBatch) {
	f.planPools = append(f.planPools, name)
	for _, v := range pb.state.pool.Consumers() {
		var maxv *string
		if v.Max != "" {
			m := v.Max
			maxv = &m
		}
		f.consumers = append(f.consumers, []any{name, v.Path, v.Parent, v.Leaf, v.Share, v.Priority, maxv})
	}
}

// appendCols appends one row to column-wise arrays (for unnest).
func appendCols(cols []([]any), vals ...any) {
	for i, v := range vals {
		cols[i] = append(cols[i], v)
	}
}

var (
	eventCols     = []string{"pool", "seq", "id", "type", "v", "time", "producer", "data", "refused", "refusal_detail", "prev_hash", "hash", "subject", "headers", "body", "time_ns"}
	decisionCols  = []string{"pool", "event_seq", "ordinal", "kind", "consumer", "from_consumer", "host", "slots", "rule", "deadline"}
	historyCols   = []string{"pool", "consumer", "slots", "valid_from_seq", "valid_from_time", "valid_to_seq", "valid_to_time"}
	ownHistCols   = []string{"pool", "consumer", "host", "slots", "valid_from_seq", "valid_from_time", "valid_to_seq", "valid_to_time"}
	consumerCols  = []string{"pool", "path", "parent", "leaf", "share", "priority", "max"}
	snapshotCols  = []string{"pool", "seq", "format", "state", "state_hash"}
	errCommitted  = errors.New("batch already committed")
	sqlLockOffset = `SELECT stream_seq FROM projector_offsets WHERE name = $1 FOR UPDATE`
	// sqlClaimOffset makes the offset row of a projector's (a
	// partition's) first batch before it is locked: FOR UPDATE locks no
	// row that is not there, so two instances taking a new partition at
	// once would both find it at 0 and write the same events. With the
	// row made first, the second waits for the first to commit, then
	// finds the offset moved (decision 474). Uncommitted, nobody sees it;
	// the batch's own upsert sets it.
	sqlClaimOffset = `INSERT INTO projector_offsets (name, stream_seq, updated_at, partition, partitions, owner)
VALUES ($1, 0, now(), $2, $3, $4) ON CONFLICT (name) DO NOTHING`
	// sqlAsyncCommit makes the transaction's commit asynchronous
	// (docs/decisions.md #305).
	sqlAsyncCommit = `SELECT set_config('synchronous_commit', 'off', true)`
	// sqlGuardOffset locks the offset row and fails the whole pipelined
	// batch (division by zero: nothing of it is written) unless the
	// committed offset is $2, where the batch continues from.
	sqlGuardOffset = `SELECT 1 / (CASE WHEN coalesce(max(o.stream_seq), 0) = $2 THEN 1 ELSE 0 END)
FROM (SELECT stream_seq FROM projector_offsets WHERE name = $1 FOR UPDATE) o`
)

// The column types of the tables the pipelined path inserts into, in
// the order of their column lists, for unnest.
var (
	eventTypes    = []string{"text", "bigint", "text", "text", "int", "timestamptz", "text", "jsonb", "text", "text", "bytea", "bytea", "text", "jsonb", "bytea", "smallint"}
	decisionTypes = []string{"text", "bigint", "int", "text", "text", "text", "text", "bigint", "text", "timestamptz"}
	historyTypes  = []string{"text", "text", "bigint", "bigint", "timestamptz", "bigint", "timestamptz"}
	ownHistTypes  = []string{"text", "text", "text", "bigint", "bigint", "timestamptz", "bigint", "timestamptz"}
	consumerTypes = []string{"text", "text", "text", "boolean", "bigint", "bigint", "text"}
	snapshotTypes = []string{"text", "bigint", "int", "bytea", "bytea"}
)

const (
	sqlCloseHistory = `UPDATE allocation_history h SET valid_to_seq = z.seq, valid_to_time = z.t
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::timestamptz[]) AS z(pool, consumer, from_seq, seq, t)
WHERE h.pool = z.pool AND h.consumer = z.consumer AND h.valid_from_seq = z.from_seq`
	sqlDeleteConsumers = `DELETE FROM consumers WHERE pool = ANY($1::text[])`
	sqlDeleteState     = `DELETE FROM consumer_state WHERE pool = ANY($1::text[])`
	sqlUpsertState     = `INSERT INTO consumer_state (pool, consumer, leaf, demand, effective, planned, target, allocated, borrowed, waiting_since, updated_seq)
SELECT * FROM unnest($1::text[], $2::text[], $3::boolean[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[])
ON CONFLICT (pool, consumer) DO UPDATE SET leaf = EXCLUDED.leaf, demand = EXCLUDED.demand, effective = EXCLUDED.effective,
  planned = EXCLUDED.planned, target = EXCLUDED.target, allocated = EXCLUDED.allocated, borrowed = EXCLUDED.borrowed,
  waiting_since = EXCLUDED.waiting_since, updated_seq = EXCLUDED.updated_seq`
	sqlUpsertStateOwned = `INSERT INTO consumer_state (pool, consumer, leaf, demand, effective, planned, target, allocated, borrowed, waiting_since, updated_seq,
  owned, own_used, lent_out, sources)
SELECT * FROM unnest($1::text[], $2::text[], $3::boolean[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[],
  $12::bigint[], $13::bigint[], $14::bigint[], $15::jsonb[])
ON CONFLICT (pool, consumer) DO UPDATE SET leaf = EXCLUDED.leaf, demand = EXCLUDED.demand, effective = EXCLUDED.effective,
  planned = EXCLUDED.planned, target = EXCLUDED.target, allocated = EXCLUDED.allocated, borrowed = EXCLUDED.borrowed,
  waiting_since = EXCLUDED.waiting_since, updated_seq = EXCLUDED.updated_seq,
  owned = EXCLUDED.owned, own_used = EXCLUDED.own_used, lent_out = EXCLUDED.lent_out, sources = EXCLUDED.sources`
	sqlUpsertAlloc = `INSERT INTO allocations (pool, consumer, host, slots)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])
ON CONFLICT (pool, consumer, host) DO UPDATE SET slots = EXCLUDED.slots`
	sqlDeleteAlloc = `DELETE FROM allocations a USING unnest($1::text[], $2::text[], $3::text[]) AS z(pool, consumer, host)
WHERE a.pool = z.pool AND a.consumer = z.consumer AND a.host = z.host`
	sqlUpsertOwnership = `INSERT INTO ownership (pool, consumer, host, slots)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])
ON CONFLICT (pool, consumer, host) DO UPDATE SET slots = EXCLUDED.slots`
	sqlDeleteOwnership = `DELETE FROM ownership o USING unnest($1::text[], $2::text[], $3::text[]) AS z(pool, consumer, host)
WHERE o.pool = z.pool AND o.consumer = z.consumer AND o.host = z.host`
	sqlCloseOwnHistory = `UPDATE ownership_history h SET valid_to_seq = z.seq, valid_to_time = z.t
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::timestamptz[]) AS z(pool, consumer, host, from_seq, seq, t)
WHERE h.pool = z.pool AND h.consumer = z.consumer AND h.host = z.host AND h.valid_from_seq = z.from_seq`
	sqlUpsertHosts = `INSERT INTO hosts (pool, name, grp, slots, up, allocated)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::boolean[], $6::bigint[])
ON CONFLICT (pool, name) DO UPDATE SET grp = EXCLUDED.grp, slots = EXCLUDED.slots, up = EXCLUDED.up, allocated = EXCLUDED.allocated`
	sqlUpsertCheckpoints = `INSERT INTO checkpoints (pool, last_seq, state_hash, chain_hash, rules, rules_since, updated_at)
SELECT z.*, now() FROM unnest($1::text[], $2::bigint[], $3::bytea[], $4::bytea[], $5::int[], $6::bigint[]) AS z
ON CONFLICT (pool) DO UPDATE SET last_seq = EXCLUDED.last_seq, state_hash = EXCLUDED.state_hash,
  chain_hash = EXCLUDED.chain_hash, rules = EXCLUDED.rules, rules_since = EXCLUDED.rules_since, updated_at = EXCLUDED.updated_at`
	sqlUpsertOffset = `INSERT INTO projector_offsets (name, stream_seq, updated_at, partition, partitions, owner) VALUES ($1, $2, now(), $3, $4, $5)
ON CONFLICT (name) DO UPDATE SET stream_seq = EXCLUDED.stream_seq, updated_at = EXCLUDED.updated_at,
  partition = EXCLUDED.partition, partitions = EXCLUDED.partitions, owner = EXCLUDED.owner`
)

// writeTx writes a whole batch in the transaction tx, in this order:
// check the offset, append (COPY) events, decisions and the history
// intervals opened, then writeChanges.
func (p *Projector) writeTx(ctx context.Context, tx pgx.Tx, b *batch, f *finalRows) error {
	if err := p.checkOffset(ctx, tx, b); err != nil {
		return err
	}
	if err := writeAppended(ctx, tx, b); err != nil {
		return err
	}
	return p.writeChanges(ctx, tx, b, f)
}

// writeAppended appends (COPY) the batch's new rows, which no other
// batch writes or reads while it is written: events, decisions and the
// history intervals it opened (those it also closed, closed). A
// prepared batch (pipeline.go) writes them while the batch before it
// commits.
func writeAppended(ctx context.Context, tx pgx.Tx, b *batch) error {
	if err := copyRows(ctx, tx, "events", eventCols, b.events); err != nil {
		return err
	}
	if err := copyRows(ctx, tx, "decisions", decisionCols, b.decisions); err != nil {
		return err
	}
	if err := copyRows(ctx, tx, "allocation_history", historyCols, historyRows(b)); err != nil {
		return err
	}
	return copyRows(ctx, tx, "ownership_history", ownHistCols, ownHistoryRows(b))
}

// writeChanges writes what depends on the batches before: close the
// history intervals earlier batches opened, replace the plan of
// re-planned pools, upsert current state, checkpoints and the offset
// (one pipelined round trip), COPY snapshots, then the rarer rows
// (saved states, pending events, halts, a halted pool's catch-up). The
// offset must be checked in tx first (checkOffset).
func (p *Projector) writeChanges(ctx context.Context, tx pgx.Tx, b *batch, f *finalRows) error {
	if err := p.closeHistory(ctx, tx, b); err != nil {
		return err
	}
	if err := p.writePlans(ctx, tx, f); err != nil {
		return err
	}
	if err := p.writeCurrent(ctx, tx, b, f); err != nil {
		return err
	}
	if err := copyRows(ctx, tx, "snapshots", snapshotCols, b.snapshots); err != nil {
		return err
	}
	if err := writeSaved(ctx, tx, b.saved); err != nil {
		return err
	}
	if err := writePending(ctx, tx, b); err != nil {
		return err
	}
	if err := writeHalts(ctx, tx, b.halts); err != nil {
		return err
	}
	if b.catchUp {
		if err := p.unhalt(ctx, tx, b); err != nil {
			return err
		}
	}
	return p.fail(StageBeforeCommit)
}

// queueClaim queues sqlClaimOffset before the lock of a batch that
// continues from 0, whose offset row may not be there yet.
func (p *Projector) queueClaim(q *pgx.Batch, b *batch) {
	if b.from == 0 {
		part, parts := p.partitionCols()
		q.Queue(sqlClaimOffset, p.offsetName(), part, parts, p.cfg.instance)
	}
}

// checkOffset makes the offset row the arbiter: a batch whose commit was
// lost in flight (already there) is not written twice, and a batch that
// does not follow the committed offset (another writer) is not written.
func (p *Projector) checkOffset(ctx context.Context, tx pgx.Tx, b *batch) error {
	q := &pgx.Batch{}
	if !p.cfg.syncCommit {
		q.Queue(sqlAsyncCommit) // in the same round trip as the lock
	}
	p.queueClaim(q, b)
	var stored int64
	q.Queue(sqlLockOffset, p.offsetName()).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&stored); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		return nil
	})
	if err := tx.SendBatch(ctx, q).Close(); err != nil {
		return err
	}
	switch {
	case !b.catchUp && b.to == b.from && uint64(stored) == b.from:
		// Deferred events only (fair.go): the offset stays. The batch
		// went through if the first pending row it folds is gone.
		return deferredCommitted(ctx, tx, b)
	case b.catchUp && uint64(stored) == b.to:
		return nil // a halted pool's rows, written at the offset
	case b.catchUp && p.cfg.part != nil:
		return fmt.Errorf("%w: projector_offsets[%s] moved to %d while a halted pool was caught up to %d", ErrPartitionLost, p.offsetName(), stored, b.to)
	case b.catchUp:
		return fatalf("projector_offsets[%s] moved to %d while a halted pool was caught up to %d: another projector with the same name is writing", p.cfg.name, stored, b.to)
	case uint64(stored) == b.to || (p.cfg.part == nil && uint64(stored) > b.to):
		// This batch's commit went through but its answer was lost (or,
		// partitioned, another instance committed the same range: the
		// same rows, folded from the same log).
		return errCommitted
	case p.cfg.part != nil && uint64(stored) != b.from:
		// The partition moved to another instance, which committed: this
		// one's batch is dropped, never written over it.
		return fmt.Errorf("%w: projector_offsets[%s] is at %d, this instance continues from %d", ErrPartitionLost, p.offsetName(), stored, b.from)
	case uint64(stored) < b.from:
		// Gone back: PostgreSQL lost commits it had acknowledged (an
		// asynchronous commit and a crash, or a restored backup). What
		// it holds is consistent (each offset commits with its rows), so
		// the projector starts again from there (Run).
		return fmt.Errorf("%w: projector_offsets[%s] is at %d, this projector continues from %d", errOffsetBehind, p.cfg.name, stored, b.from)
	case uint64(stored) != b.from && !p.movedBefore():
		// Ahead: a batch of a projector that stopped (killed after it
		// sent its commit, which PostgreSQL ran after this projector
		// started) landed late. Its rows are this log's, as this
		// projector's would be: start again from them, once.
		p.offsetMoved = time.Now()
		return fmt.Errorf("%w: projector_offsets[%s] is at %d, this projector continues from %d", errOffsetMoved, p.cfg.name, stored, b.from)
	case uint64(stored) != b.from:
		return fatalf("projector_offsets[%s] is at %d but this projector continues from %d, and moved under it before: another projector with the same name is writing", p.cfg.name, stored, b.from)
	}
	return nil
}

// errOffsetBehind: the committed offset is behind what this projector
// committed; Run starts it again from PostgreSQL.
var errOffsetBehind = errors.New("PostgreSQL holds an older offset than this projector committed")

// errOffsetMoved: the committed offset moved ahead of this projector by
// a batch it did not write; Run starts it again from PostgreSQL, once.
// A second time within offsetMovedWindow, the offset has another live
// writer: that is fatal.
var errOffsetMoved = errors.New("the committed offset moved ahead of this projector")

const offsetMovedWindow = 10 * time.Minute

// movedBefore reports whether the offset moved under this projector
// lately (errOffsetMoved).
func (p *Projector) movedBefore() bool {
	return !p.offsetMoved.IsZero() && time.Since(p.offsetMoved) < offsetMovedWindow
}

// closeHistory closes the history intervals that earlier batches opened
// (by primary key: their valid_from_seq is kept in memory, openRow).
func (p *Projector) closeHistory(ctx context.Context, tx pgx.Tx, b *batch) error {
	if c := b.closes; len(c.pools) > 0 {
		if _, err := tx.Exec(ctx, sqlCloseHistory, c.pools, c.consumers, c.froms, c.seqs, c.times); err != nil {
			return fmt.Errorf("close allocation_history rows: %w", err)
		}
	}
	if c := b.ownCloses; len(c.pools) > 0 {
		if _, err := tx.Exec(ctx, sqlCloseOwnHistory, c.pools, c.consumers, c.hosts, c.froms, c.seqs, c.times); err != nil {
			return fmt.Errorf("close ownership_history rows: %w", err)
		}
	}
	return nil
}

func (p *Projector) writePlans(ctx context.Context, tx pgx.Tx, f *finalRows) error {
	if len(f.planPools) == 0 {
		return nil
	}
	// consumer_state of a re-planned pool is rewritten whole (every
	// consumer is touched by a plan), which also drops removed consumers.
	for _, q := range []string{sqlDeleteConsumers, sqlDeleteState} {
		if _, err := tx.Exec(ctx, q, f.planPools); err != nil {
			return fmt.Errorf("replace plan rows: %w", err)
		}
	}
	return copyRows(ctx, tx, "consumers", consumerCols, f.consumers)
}

func (p *Projector) writeCurrent(ctx context.Context, tx pgx.Tx, b *batch, f *finalRows) error {
	q := &pgx.Batch{}
	p.queueCurrent(q, b, f)
	if err := tx.SendBatch(ctx, q).Close(); err != nil {
		return fmt.Errorf("upsert current state: %w", err)
	}
	return nil
}

// queueCurrent queues the upserts of the current state, the checkpoints
// and the offset.
func (p *Projector) queueCurrent(q *pgx.Batch, b *batch, f *finalRows) {
	queue := func(sql string, cols []([]any)) {
		if len(cols[0]) > 0 {
			args := make([]any, len(cols))
			for i, c := range cols {
				args[i] = c // each column an array parameter of unnest
			}
			q.Queue(sql, args...)
		}
	}
	queue(sqlUpsertState, f.state[:])
	queue(sqlUpsertStateOwned, f.stateOwn[:])
	queue(sqlUpsertAlloc, f.allocUp[:])
	queue(sqlDeleteAlloc, f.allocDel[:])
	queue(sqlUpsertOwnership, f.ownUp[:])
	queue(sqlDeleteOwnership, f.ownDel[:])
	queue(sqlUpsertHosts, f.hosts[:])
	queue(sqlUpsertCheckpoints, f.checkpoints[:])
	part, parts := p.partitionCols()
	q.Queue(sqlUpsertOffset, p.offsetName(), int64(b.to), part, parts, p.cfg.instance)
}

// A small batch (a live projector's: a few events, their decisions and
// history) spends its time in round trips, not rows: BEGIN, the offset,
// a COPY per table, the closes, the upserts and COMMIT are about eight.
// writePipelined sends it all as one pipeline of statements under one
// Sync, which PostgreSQL runs as one implicit transaction: every
// statement or none, and one round trip. Rows go in by INSERT ... SELECT
// FROM unnest (COPY cannot be pipelined), so a large batch, where the
// rows cost more than the round trips, still goes by COPY (writeTx).

// pipelined reports whether batch b is written by writePipelined: small,
// and none of the rare writes (saved states, halts, a halted pool's
// catch-up, events set aside or taken up again: fair.go) that writeTx
// keeps.
func (p *Projector) pipelined(b *batch, f *finalRows) bool {
	if b.catchUp || len(b.saved) > 0 || len(b.halts) > 0 || len(b.pending) > 0 || len(b.pendingDone) > 0 {
		return false
	}
	rows := len(b.events) + len(b.decisions) + len(b.history) + len(b.ownHistory) + len(b.snapshots) + len(f.consumers)
	return rows <= p.cfg.pipelineRows
}

// writePipelined writes batch b in one round trip (above). The offset
// guard fails the whole of it when the committed offset is not where b
// continues from; checkOffset then says why, in a transaction of its own.
func (p *Projector) writePipelined(ctx context.Context, b *batch, f *finalRows) error {
	// A crash here (a test's failpoint) writes nothing, as one before the
	// COMMIT of writeTx does.
	if err := p.fail(StageBeforeCommit); err != nil {
		return err
	}
	q := &pgx.Batch{}
	if !p.cfg.syncCommit {
		q.Queue(sqlAsyncCommit)
	}
	p.queueClaim(q, b)
	q.Queue(sqlGuardOffset, p.offsetName(), int64(b.from))
	queueInsert(q, "events", eventCols, eventTypes, b.events)
	queueInsert(q, "decisions", decisionCols, decisionTypes, b.decisions)
	if c := b.closes; len(c.pools) > 0 {
		q.Queue(sqlCloseHistory, c.pools, c.consumers, c.froms, c.seqs, c.times)
	}
	queueInsert(q, "allocation_history", historyCols, historyTypes, historyRows(b))
	if c := b.ownCloses; len(c.pools) > 0 {
		q.Queue(sqlCloseOwnHistory, c.pools, c.consumers, c.hosts, c.froms, c.seqs, c.times)
	}
	queueInsert(q, "ownership_history", ownHistCols, ownHistTypes, ownHistoryRows(b))
	if len(f.planPools) > 0 {
		q.Queue(sqlDeleteConsumers, f.planPools)
		q.Queue(sqlDeleteState, f.planPools)
		queueInsert(q, "consumers", consumerCols, consumerTypes, f.consumers)
	}
	p.queueCurrent(q, b, f)
	queueInsert(q, "snapshots", snapshotCols, snapshotTypes, b.snapshots)
	err := p.db.SendBatch(ctx, q).Close()
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == sqlstateDivisionByZero {
		// Only the guard divides: the offset is not where b continues.
		// Nothing was written; the transaction path tells why.
		err = pgx.BeginFunc(ctx, p.db, func(tx pgx.Tx) error {
			if err := p.checkOffset(ctx, tx, b); err != nil {
				return err
			}
			return fmt.Errorf("projector_offsets[%s] moved while a batch was written; writing it again", p.offsetName())
		})
	}
	return err
}

const sqlstateDivisionByZero = "22012"

// insertSQL caches the INSERT ... SELECT FROM unnest of each table.
var insertSQL sync.Map

// queueInsert queues the insertion of rows into table (columns cols of
// SQL types types) as one statement, each column an array parameter.
func queueInsert(q *pgx.Batch, table string, cols, types []string, rows [][]any) {
	if len(rows) == 0 {
		return
	}
	sql, ok := insertSQL.Load(table)
	if !ok {
		params := make([]string, len(types))
		for i, t := range types {
			params[i] = fmt.Sprintf("$%d::%s[]", i+1, t)
		}
		sql, _ = insertSQL.LoadOrStore(table, fmt.Sprintf("INSERT INTO %s (%s) SELECT * FROM unnest(%s)",
			pgx.Identifier{table}.Sanitize(), strings.Join(cols, ", "), strings.Join(params, ", ")))
	}
	args := make([]any, len(cols))
	for c := range cols {
		col := make([]any, len(rows))
		for r := range rows {
			col[r] = rows[r][c]
		}
		args[c] = col
	}
	q.Queue(sql.(string), args...)
}

func historyRows(b *batch) [][]any {
	rows := make([][]any, len(b.history))
	for i, h := range b.history {
		rows[i] = []any{h.pool, h.consumer, h.slots, int64(h.fromSeq), h.fromTime, h.toSeq, h.toTime}
	}
	return rows
}

func ownHistoryRows(b *batch) [][]any {
	rows := make([][]any, len(b.ownHistory))
	for i, h := range b.ownHistory {
		rows[i] = []any{h.pool, h.key[0], h.key[1], h.slots, int64(h.fromSeq), h.fromTime, h.toSeq, h.toTime}
	}
	return rows
}

func copyRows(ctx context.Context, tx pgx.Tx, table string, cols []string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("copy %s: %w", table, err)
	}
	return nil
}
