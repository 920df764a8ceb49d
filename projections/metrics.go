package projections

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/metrics"
	pq "github.com/cluster-ledger/ledger/projections/query"
)

// WithMetrics records the projector's figures in rec (events projected,
// commit latency, lag, halted pools, rebuild progress, per-pool gauges).
// Without it nothing is recorded.
func WithMetrics(rec *metrics.Projector) Option { return func(c *config) { c.metrics = rec } }

// The projector reports to its recorder at five places: start
// (observeStart, observeRebuilt, observeLoaded), process (observeFold, in the folding
// goroutine, which alone may read the pools), commit (observeCommit, in
// the writer, from what observeFold stored in the batch), the end of Run
// (observeStop). Its label is offsetName(): one per partition.

// observeStop: Run ends (shutdown, a partition given away or lost): the
// projector's lag and its pools' gauges are no longer this process's to
// report (another instance may fold them now).
func (p *Projector) observeStop() {
	if p.cfg.metrics == nil {
		return
	}
	p.mu.Lock()
	pools := make([]string, 0, len(p.applied))
	for name := range p.applied { // every pool it knows, in memory or not
		pools = append(pools, name)
	}
	p.mu.Unlock()
	p.cfg.metrics.Stopped(p.offsetName(), pools)
}

// observeStart: the rebuild of pools pools begins.
func (p *Projector) observeStart(pools int) {
	p.cfg.metrics.Started(p.offsetName(), p.Halted)
	p.cfg.metrics.Replay(p.offsetName(), pools, 0, 0)
}

// observeLoaded sets the gauges of the projector's pools from the
// projection once it has (re)started: after a restart every pool has its
// gauges, not only those a new event touches. A failure to read them is
// logged, not fatal: they come with the pools' next events.
func (p *Projector) observeLoaded(ctx context.Context, pools []string) {
	if p.cfg.metrics == nil || len(pools) == 0 {
		return
	}
	totals, err := pq.PoolTotalsOf(ctx, p.db, pools)
	if err != nil {
		p.cfg.log.Warn("projector: pool gauges not loaded; they follow the pools' next events", "err", err)
		return
	}
	figs := make([]metrics.PoolFigures, len(totals))
	for i, t := range totals {
		figs[i] = metrics.PoolFigures{Pool: t.Pool, Capacity: t.Capacity, Allocated: t.Allocated, Borrowed: t.Borrowed, Demand: t.Demand, Unmet: t.Unmet}
	}
	p.cfg.metrics.Loaded(figs)
}

// observeRebuilt: done pools of pools are rebuilt, the last by folding
// events events again.
func (p *Projector) observeRebuilt(pools, done, events int) {
	p.cfg.metrics.Replay(p.offsetName(), pools, done, events)
}

// observeFold records a folded batch (its new messages, the stream's
// pending count after the last fetched) and, when the batch has rows,
// the totals of the pools it touched, for observeCommit.
func (p *Projector) observeFold(b *batch, msgs []jetstream.Msg) {
	if p.cfg.metrics == nil {
		return
	}
	p.observeSetAside(len(b.pendingDone))
	if len(msgs) == 0 {
		return
	}
	var first, last time.Time
	var pending uint64
	if md, err := msgs[0].Metadata(); err == nil {
		first = md.Timestamp
	}
	if md, err := msgs[len(msgs)-1].Metadata(); err == nil {
		last, pending = md.Timestamp, md.NumPending
	}
	p.cfg.metrics.Folded(p.offsetName(), b.to-b.from, first, last, pending)
	if b.to == b.from {
		return
	}
	reclaims := map[string]int{}
	for _, d := range b.decisions { // decisionRow: pool, seq, ordinal, kind, ...
		if d[3] == string(domain.KindReclaim) {
			reclaims[d[0].(string)]++
		}
	}
	b.figures = make([]metrics.PoolFigures, 0, len(b.pools))
	for name, pb := range b.pools {
		f := poolFigures(pb.state.pool)
		f.Pool, f.Reclaims = name, reclaims[name]
		b.figures = append(b.figures, f)
	}
}

// observeSetAside reports the messages set aside for busy pools after a
// batch (in the folding goroutine, which alone touches them): their pools'
// projection is behind by them (decision 465). folded is how many of them
// the batch folded: their rows are written, and their pending rows
// deleted, when it commits, so until then they count as set aside too
// (a batch that folds a busy pool's whole backlog would otherwise report
// none while its commit, the longer the faster the fold, is under way).
func (p *Projector) observeSetAside(folded int) {
	var n int
	var oldest time.Time
	for _, ds := range p.deferred.pools {
		if len(ds) == 0 {
			continue
		}
		n += len(ds)
		if oldest.IsZero() || ds[0].stored.Before(oldest) {
			oldest = ds[0].stored
		}
	}
	p.setAside.folded(p, n, oldest, folded)
}

// setAsideCount is what the set-aside gauge adds up: the messages held
// set aside (the folding goroutine's count after its last batch) and
// those folded by batches the writer has not committed yet. The writer
// holds up to three batches (pipeline.go), so counting only the last
// batch's left out the ones before it, whose pending rows were still in
// PostgreSQL (TestLagCountsSetAsideEvents: 123 set aside, the gauge 33).
type setAsideCount struct {
	mu      sync.Mutex
	held    int
	oldest  time.Time
	folding int // folded by batches not committed yet
}

// folded records a batch handed to the writer (before the handover).
func (c *setAsideCount) folded(p *Projector, held int, oldest time.Time, folded int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held, c.oldest = held, oldest
	c.folding += folded
	c.report(p)
}

// committed records that a batch that folded n set-aside messages is
// committed (by the writer).
func (c *setAsideCount) committed(p *Projector, n int) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.folding -= n
	c.report(p)
}

// restarted forgets the batches of a writer that is gone.
func (c *setAsideCount) restarted() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.folding = 0
}

func (c *setAsideCount) report(p *Projector) {
	p.cfg.metrics.SetAside(p.offsetName(), uint64(c.held+max(c.folding, 0)), c.oldest)
}

// observeCommit records a committed batch.
func (p *Projector) observeCommit(b *batch, d time.Duration) {
	p.cfg.metrics.Committed(p.offsetName(), len(b.events), b.to, d, b.figures)
}

// poolFigures are a pool's totals: capacity of the hosts up, slots held,
// and over the leaves borrowed slots, demand and demand not met.
func poolFigures(pool *domain.Pool) metrics.PoolFigures {
	var f metrics.PoolFigures
	for _, h := range pool.Hosts() {
		if h.Up {
			f.Capacity += h.Slots
		}
		f.Allocated += h.Allocated
	}
	for _, c := range pool.Consumers() {
		if !c.Leaf {
			continue
		}
		f.Borrowed += c.Borrowed
		f.Demand += c.Demand
		f.Unmet += max(0, c.Demand-c.Allocated)
	}
	return f
}
