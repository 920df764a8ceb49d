package metrics

import (
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultMaxPools is how many distinct pools a registry labels by
// default (see the package doc on cardinality): a site of thousands of
// pools has every pool's gauges, about 70,000 series at the most.
const DefaultMaxPools = 10000

// OtherPool is the pool label of the pools past the registry's limit.
const OtherPool = "_other"

// Registry is one process's metrics. Create it with New; it is safe for
// concurrent use.
type Registry struct {
	reg   *prometheus.Registry
	pools *poolLabels
	api   *API
	proj  *Projector
}

// Option configures a Registry.
type Option func(*Registry)

// WithMaxPools sets how many distinct pools are labelled (default
// DefaultMaxPools).
func WithMaxPools(n int) Option {
	return func(r *Registry) {
		if n > 0 {
			r.pools.max = n
		}
	}
}

// New returns a registry with the Go runtime and process collectors, and
// the API's and the projector's metrics (a process that runs only one of
// them exports the other's families empty).
func New(opts ...Option) *Registry {
	r := &Registry{reg: prometheus.NewRegistry(), pools: &poolLabels{max: DefaultMaxPools, seen: map[string]bool{}}}
	for _, o := range opts {
		o(r)
	}
	r.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo())
	r.api = newAPI(r.reg, r.pools)
	r.proj = newProjector(r.reg, r.pools)
	return r
}

// API returns the recorder of the HTTP API (nil, which records nothing,
// for a nil registry).
func (r *Registry) API() *API {
	if r == nil {
		return nil
	}
	return r.api
}

// Projector returns the recorder of the projectors of this process (nil,
// which records nothing, for a nil registry).
func (r *Registry) Projector() *Projector {
	if r == nil {
		return nil
	}
	return r.proj
}

// Gatherer is what the handler serves (tests read it directly).
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Handler serves the registry in the Prometheus exposition formats. It
// does not check who asks: mount it behind Protect or the API's
// authorization.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// poolLabels bounds the pool label values (package doc, cardinality).
type poolLabels struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

// label returns the label of pool and whether the pool has its own
// series: the first max pools do, later ones are OtherPool.
func (p *poolLabels) label(pool string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen[pool] {
		return pool, true
	}
	if len(p.seen) < p.max {
		p.seen[pool] = true
		return pool, true
	}
	return OtherPool, false
}

// known returns pool's label if pool has its own series already, and
// OtherPool if not, without giving it one: a refusal may name a pool
// nobody created, and such names must not take the labels of the pools
// that exist (decision 464).
func (p *poolLabels) known(pool string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen[pool] {
		return pool
	}
	return OtherPool
}
