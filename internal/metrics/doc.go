// Package metrics exposes the ledger's figures in the Prometheus text
// format (github.com/prometheus/client_golang), for GET /metrics on every
// process: the API's appends and refusals, the projector's progress and
// lag, and per-pool gauges an operator graphs (capacity, allocated,
// borrowed, unmet demand, reclaims).
//
// Each process makes its own Registry with New; there is no global
// default registry, so tests can run several APIs and projectors in one
// process, each with its own figures. The API and the projector take a
// recorder (Registry.API, Registry.Projector) whose short methods are
// called at a few places: after an append request, after a batch commits,
// while the projector rebuilds its pools at start. Figures that must be
// current when scraped (lag, halted pools) are computed at scrape time.
//
// Cardinality: the labels are bounded sets (event types, outcomes,
// refusal reasons, routes, status codes, projector names) except pool.
// The service puts no limit on the number of pools, so the registry
// labels at most MaxPools distinct pools (WithMaxPools, default 10,000):
// later pools are counted under pool="_other" in counters and left out of
// the per-pool gauges. At start a projector loads its pools' gauges most
// recently projected first, so the labels go to the pools in use. With P pools the per-pool series are about
// 7·P (gauges and reclaims) + 4·P·(types appended) + P·(reasons refused).
//
// Serve, Protect: the projector's own /metrics listener, behind a bearer
// token with the metrics scope (internal/auth); the API mounts the same
// handler on its server behind its own authorization.
package metrics
