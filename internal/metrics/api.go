package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// LatencyBuckets are the append latency histogram's bounds, in seconds:
// 1 ms (a synced single-node append) to 5 s (the publish timeout).
var LatencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// Outcomes of an append request.
const (
	OutcomeOK      = "ok"      // 2xx: stored (or answered as stored duplicates)
	OutcomeRefused = "refused" // 4xx: the request or an event was refused; retrying it is useless
	OutcomeError   = "error"   // 5xx: unavailable, busy, healing; the producer retries
)

// API records the HTTP API's figures.
type API struct {
	reg      prometheus.Registerer
	pools    *poolLabels
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	events   *prometheus.CounterVec
	refusals *prometheus.CounterVec
	errors   *prometheus.CounterVec
	http     *prometheus.CounterVec
}

func newAPI(reg prometheus.Registerer, pools *poolLabels) *API {
	a := &API{
		reg: reg, pools: pools,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ledger_api_append_requests_total",
			Help: "Append requests (POST /v1/pools/{pool}/events) answered, by outcome: ok (2xx), refused (4xx), error (5xx)."}, []string{"outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ledger_api_append_duration_seconds",
			Help: "Time to answer an append request, from its arrival to its answer, by outcome.", Buckets: LatencyBuckets}, []string{"outcome"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ledger_api_events_total",
			Help: "Events of successful append requests, by pool, type and outcome: appended (stored now) or duplicate (a retry of a stored id)."},
			[]string{"pool", "type", "outcome"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ledger_api_refusals_total",
			Help: "Append requests refused (4xx), by pool (empty before the token and the pool name are checked; _other for a pool without series of its own, one that holds no event among them) and reason (the error body's reason: an events code or an access reason)."},
			[]string{"pool", "reason"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ledger_api_append_errors_total",
			Help: "Append requests that failed for a retryable cause (5xx), by reason (unavailable, busy, healing, ...)."}, []string{"reason"}),
		http: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ledger_http_requests_total",
			Help: "HTTP requests answered, by route (the mux pattern; unmatched for none) and status code."}, []string{"route", "code"}),
	}
	reg.MustRegister(a.requests, a.latency, a.events, a.refusals, a.errors, a.http)
	return a
}

// ConnStats is what the HTTP server's connection bound reports
// (internal/connlimit.Listener).
type ConnStats interface {
	MaxConns() int
	Open() int
	Unauthenticated() int
	Evicted() int64
}

var (
	connsDesc = prometheus.NewDesc("ledger_http_connections",
		"HTTP connections open, by state: authenticated (a request on it presented a valid token) or unauthenticated.", []string{"state"}, nil)
	connsMaxDesc = prometheus.NewDesc("ledger_http_connections_max",
		"The most HTTP connections the server holds at once (its file-descriptor budget).", nil, nil)
	connsEvictedDesc = prometheus.NewDesc("ledger_http_connections_evicted_total",
		"Unauthenticated HTTP connections closed to make room for newer ones (a flood of connections without a token).", nil, nil)
)

type connCollector struct{ c ConnStats }

func (c connCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- connsDesc
	ch <- connsMaxDesc
	ch <- connsEvictedDesc
}

func (c connCollector) Collect(ch chan<- prometheus.Metric) {
	open, unauth := c.c.Open(), c.c.Unauthenticated()
	ch <- prometheus.MustNewConstMetric(connsDesc, prometheus.GaugeValue, float64(max(open-unauth, 0)), "authenticated")
	ch <- prometheus.MustNewConstMetric(connsDesc, prometheus.GaugeValue, float64(unauth), "unauthenticated")
	ch <- prometheus.MustNewConstMetric(connsMaxDesc, prometheus.GaugeValue, float64(c.c.MaxConns()))
	ch <- prometheus.MustNewConstMetric(connsEvictedDesc, prometheus.CounterValue, float64(c.c.Evicted()))
}

// Connections reports the HTTP server's connections, read when scraped.
// One server per registry: a second call is ignored.
func (a *API) Connections(c ConnStats) {
	if a == nil {
		return
	}
	_ = a.reg.Register(connCollector{c})
}

// Event counts one event of a successful append request.
func (a *API) Event(pool, typ string, duplicate bool) {
	if a == nil {
		return
	}
	outcome := "appended"
	if duplicate {
		outcome = "duplicate"
	}
	label, _ := a.pools.label(pool)
	a.events.WithLabelValues(label, typ, outcome).Inc()
}

// PoolExists gives pool its own series, within the bound on pool labels:
// the API calls it for a pool it knows holds events, so that the pool's
// refusals name it before an event of it was appended or projected here.
func (a *API) PoolExists(pool string) {
	if a == nil {
		return
	}
	a.pools.label(pool)
}

// Request records an answered append request: its status, the reason of
// an error answer, how long it took. pool is "" when the request was
// refused before the pool name was known to be valid and allowed (so a
// caller cannot create series with made-up pool names). A refusal names
// pool only if pool has its own series already (an event of it appended
// or projected, or PoolExists); else OtherPool: the pool may be one
// nobody created, and its name must not take a label (decision 464).
func (a *API) Request(pool string, status int, reason string, d time.Duration) {
	if a == nil {
		return
	}
	outcome := OutcomeOK
	switch {
	case status >= 500:
		outcome = OutcomeError
		a.errors.WithLabelValues(reason).Inc()
	case status >= 400:
		outcome = OutcomeRefused
		label := pool
		if pool != "" {
			label = a.pools.known(pool)
		}
		a.refusals.WithLabelValues(label, reason).Inc()
	}
	a.requests.WithLabelValues(outcome).Inc()
	a.latency.WithLabelValues(outcome).Observe(d.Seconds())
}

// HTTP counts an answered HTTP request of route (a mux pattern).
func (a *API) HTTP(route string, code int) {
	if a == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	a.http.WithLabelValues(route, strconv.Itoa(code)).Inc()
}
