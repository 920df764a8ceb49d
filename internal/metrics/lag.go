package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	lagEventsDesc = prometheus.NewDesc("ledger_projector_lag_events",
		"Messages of the stream the projector has not projected yet: fetched and folded but not committed, still in the stream (JetStream's pending count at the last fetch), or set aside for a busy pool.",
		[]string{"projector"}, nil)
	lagSecondsDesc = prometheus.NewDesc("ledger_projector_lag_seconds",
		"Age of the oldest message not projected yet, a busy pool's set-aside ones included (0 when none is): how far behind the stream the projection is.",
		[]string{"projector"}, nil)
	haltedDesc = prometheus.NewDesc("ledger_projector_halted_pools",
		"Pools whose projection stopped (an event the engine could not fold); the other pools go on.",
		[]string{"projector"}, nil)
	poolHaltedDesc = prometheus.NewDesc("ledger_pool_halted",
		"1 for each halted pool (its projection stopped at an event it could not fold).",
		[]string{"projector", "pool"}, nil)
)

// lagCollector computes lag and halted pools when scraped, so that a
// projector that stopped committing shows its lag growing.
type lagCollector struct{ p *Projector }

func (c lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lagEventsDesc
	ch <- lagSecondsDesc
	ch <- haltedDesc
	ch <- poolHaltedDesc
}

func (c lagCollector) Collect(ch chan<- prometheus.Metric) {
	type row struct {
		name        string
		events      uint64
		age         float64
		haltedPools func() map[string]uint64
	}
	p := c.p
	now := p.now()
	p.mu.Lock()
	rows := make([]row, 0, len(p.state))
	for name, s := range p.state {
		r := row{name: name, events: s.pending, haltedPools: s.halted}
		oldest := s.lastSeen // the next message was stored after the last fetched one
		for i, f := range s.folded {
			r.events += f.n
			if i == 0 {
				oldest = f.first
			}
		}
		if r.events > 0 && !oldest.IsZero() {
			r.age = max(0, now.Sub(oldest).Seconds())
		}
		// Set aside for a busy pool: committed as pending rows, not
		// folded (decision 465).
		if s.aside > 0 {
			r.events += s.aside
			if !s.asideOldest.IsZero() {
				r.age = max(r.age, now.Sub(s.asideOldest).Seconds())
			}
		}
		rows = append(rows, r)
	}
	p.mu.Unlock()
	// The projector's halted pools are read without holding p.mu.
	for _, r := range rows {
		ch <- prometheus.MustNewConstMetric(lagEventsDesc, prometheus.GaugeValue, float64(r.events), r.name)
		ch <- prometheus.MustNewConstMetric(lagSecondsDesc, prometheus.GaugeValue, r.age, r.name)
		if r.haltedPools == nil {
			continue
		}
		halted := r.haltedPools()
		ch <- prometheus.MustNewConstMetric(haltedDesc, prometheus.GaugeValue, float64(len(halted)), r.name)
		names := make([]string, 0, len(halted))
		for pool := range halted {
			names = append(names, pool)
		}
		slices.Sort(names)
		for _, pool := range names {
			if label, own := p.pools.label(pool); own {
				ch <- prometheus.MustNewConstMetric(poolHaltedDesc, prometheus.GaugeValue, 1, r.name, label)
			}
		}
	}
}
