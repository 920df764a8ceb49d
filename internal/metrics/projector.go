package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CommitBuckets are the batch commit latency histogram's bounds, in
// seconds: a small batch commits in about a millisecond, a full one of
// 1000 events in tens of milliseconds; past 10 s PostgreSQL is in trouble.
var CommitBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// PoolFigures are a pool's totals after a batch, in slots.
type PoolFigures struct {
	Pool      string
	Capacity  int64 // slots of the hosts that are up
	Allocated int64 // slots held by consumers
	Borrowed  int64 // slots held by leaves beyond their planned share
	Demand    int64 // slots the leaves ask for
	Unmet     int64 // demand not met: the sum over leaves of demand - allocated, when positive
	Reclaims  int   // reclaim decisions of the batch
}

// Projector records the projectors' figures; each projector is told
// apart by its name (the projector label).
type Projector struct {
	pools *poolLabels

	events     *prometheus.CounterVec
	commit     *prometheus.HistogramVec
	committed  *prometheus.GaugeVec
	lastCommit *prometheus.GaugeVec
	replayed   *prometheus.CounterVec
	replayAll  *prometheus.GaugeVec
	replayDone *prometheus.GaugeVec
	replaying  *prometheus.GaugeVec

	capacity, allocated, borrowed, demand, unmet *prometheus.GaugeVec
	reclaims                                     *prometheus.CounterVec

	mu    sync.Mutex
	state map[string]*progress // by projector name
	now   func() time.Time
}

// progress is what lag is computed from at scrape time.
type progress struct {
	pending  uint64      // messages after the last one fetched (JetStream's NumPending)
	lastSeen time.Time   // stored time of the last message fetched
	folded   []foldedRun // batches folded, not committed yet, oldest first
	halted   func() map[string]uint64
	// aside and asideOldest are the messages set aside for busy pools
	// (committed as pending rows, not folded) and the stored time of the
	// oldest, as of the last batch (decision 465).
	aside       uint64
	asideOldest time.Time
}

type foldedRun struct {
	n     uint64    // messages
	first time.Time // stored time of the first
}

func newProjector(reg prometheus.Registerer, pools *poolLabels) *Projector {
	byName := []string{"projector"}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	p := &Projector{
		pools: pools, state: map[string]*progress{}, now: time.Now,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ledger_projector_events_total",
			Help: "Events projected (committed to PostgreSQL); rate() is the projector's events per second."}, byName),
		commit: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ledger_projector_commit_duration_seconds",
			Help: "Time to write and commit one batch's transaction (retries included).", Buckets: CommitBuckets}, byName),
		committed:  gauge("ledger_projector_committed_sequence", "Stream sequence the projection has committed.", byName...),
		lastCommit: gauge("ledger_projector_last_commit_timestamp_seconds", "Unix time of the last batch commit.", byName...),
		replayed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ledger_projector_replayed_events_total",
			Help: "Events folded again while rebuilding pools from their snapshots at start."}, byName),
		replayAll:  gauge("ledger_projector_replay_pools", "Pools to rebuild at the last start.", byName...),
		replayDone: gauge("ledger_projector_replay_pools_done", "Pools rebuilt so far at the last start.", byName...),
		replaying:  gauge("ledger_projector_replaying", "1 while the projector rebuilds its pools at start, else 0.", byName...),
		capacity:   gauge("ledger_pool_capacity_slots", "Slots of the pool's hosts that are up.", "pool"),
		allocated:  gauge("ledger_pool_allocated_slots", "Slots of the pool held by its consumers.", "pool"),
		borrowed:   gauge("ledger_pool_borrowed_slots", "Slots held by leaves beyond their planned share.", "pool"),
		demand:     gauge("ledger_pool_demand_slots", "Slots the pool's leaves ask for.", "pool"),
		unmet:      gauge("ledger_pool_unmet_demand_slots", "Demand not met: the sum over the pool's leaves of demand minus allocated, when positive.", "pool"),
		reclaims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ledger_pool_reclaims_total",
			Help: "Reclaim decisions (slots taken from one consumer for another) projected, by pool."}, []string{"pool"}),
	}
	reg.MustRegister(p.events, p.commit, p.committed, p.lastCommit, p.replayed, p.replayAll, p.replayDone, p.replaying,
		p.capacity, p.allocated, p.borrowed, p.demand, p.unmet, p.reclaims, lagCollector{p})
	return p
}

func (p *Projector) progress(name string) *progress {
	s := p.state[name]
	if s == nil {
		s = &progress{}
		p.state[name] = s
	}
	return s
}

// Started resets the projector's progress when it (re)starts, and gives
// the function that lists its halted pools (read at scrape time).
func (p *Projector) Started(name string, halted func() map[string]uint64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.progress(name)
	s.folded, s.pending, s.halted = nil, 0, halted
	s.aside, s.asideOldest = 0, time.Time{}
}

// SetAside records, after each batch, the messages the projector holds
// set aside for busy pools (decision 184): past its offset but not
// folded, so their pools' projection is behind by them; the lag counts
// them (decision 465). oldest is the stored time of the oldest.
func (p *Projector) SetAside(name string, n uint64, oldest time.Time) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.progress(name)
	s.aside, s.asideOldest = n, oldest
}

// Replay records the rebuild at start: pools to rebuild (done == 0 at
// its beginning), rebuilt so far, events folded again for the last one.
func (p *Projector) Replay(name string, pools, done int, events int) {
	if p == nil {
		return
	}
	p.replayAll.WithLabelValues(name).Set(float64(pools))
	p.replayDone.WithLabelValues(name).Set(float64(done))
	p.replayed.WithLabelValues(name).Add(float64(events))
	running := 0.0
	if done < pools {
		running = 1
	}
	p.replaying.WithLabelValues(name).Set(running)
}

// Folded records a batch handed to the writer: n new messages (0 when
// all were redeliveries), the stored time of the first and of the last
// fetched, and how many messages the stream held after the last fetched.
func (p *Projector) Folded(name string, n uint64, first, last time.Time, pending uint64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.progress(name)
	if n > 0 {
		s.folded = append(s.folded, foldedRun{n: n, first: first})
	}
	s.pending, s.lastSeen = pending, last
}

// Committed records a committed batch: the oldest folded batch, of
// events rows, up to stream sequence seq, in d, leaving pools as figs.
func (p *Projector) Committed(name string, events int, seq uint64, d time.Duration, figs []PoolFigures) {
	if p == nil {
		return
	}
	p.mu.Lock()
	s := p.progress(name)
	if len(s.folded) > 0 {
		s.folded = s.folded[1:]
	}
	p.mu.Unlock()
	p.events.WithLabelValues(name).Add(float64(events))
	p.commit.WithLabelValues(name).Observe(d.Seconds())
	p.committed.WithLabelValues(name).Set(float64(seq))
	p.lastCommit.WithLabelValues(name).Set(float64(p.now().UnixNano()) / 1e9)
	for _, f := range figs {
		label, _ := p.pools.label(f.Pool)
		if f.Reclaims > 0 {
			p.reclaims.WithLabelValues(label).Add(float64(f.Reclaims))
		}
		p.setPool(f)
	}
}

// Loaded sets the gauges of the pools a projector holds when it starts
// (or takes a partition over), from what the projection holds: every
// pool has its gauges from the start, not only those a new event
// touches. Reclaims are counted as decisions are projected, not here.
func (p *Projector) Loaded(figs []PoolFigures) {
	if p == nil {
		return
	}
	for _, f := range figs {
		p.setPool(f)
	}
}

// setPool sets a pool's gauges, if the pool has its own label (a gauge
// of _other would mix pools).
func (p *Projector) setPool(f PoolFigures) {
	label, own := p.pools.label(f.Pool)
	if !own {
		return
	}
	p.capacity.WithLabelValues(label).Set(float64(f.Capacity))
	p.allocated.WithLabelValues(label).Set(float64(f.Allocated))
	p.borrowed.WithLabelValues(label).Set(float64(f.Borrowed))
	p.demand.WithLabelValues(label).Set(float64(f.Demand))
	p.unmet.WithLabelValues(label).Set(float64(f.Unmet))
}

// Stopped forgets what the projector name reported that is no longer
// its own once it stops: its lag, halted pools, position, and the gauges
// of pools (another instance may fold them now). Its counters stay.
func (p *Projector) Stopped(name string, pools []string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	delete(p.state, name)
	p.mu.Unlock()
	for _, g := range []*prometheus.GaugeVec{p.committed, p.lastCommit, p.replayAll, p.replayDone, p.replaying} {
		g.DeleteLabelValues(name)
	}
	for _, pool := range pools {
		p.ForgetPool(pool)
	}
}

// ForgetPool drops a pool's gauges (a projector that hands the pool over
// to another stops reporting it).
func (p *Projector) ForgetPool(pool string) {
	if p == nil {
		return
	}
	for _, g := range []*prometheus.GaugeVec{p.capacity, p.allocated, p.borrowed, p.demand, p.unmet} {
		g.DeleteLabelValues(pool)
	}
}
