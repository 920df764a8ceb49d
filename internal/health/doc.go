// Package health answers the probes of the ledger's processes: liveness
// (GET /healthz: can this process do its job at all; a failing probe
// means restart it or take it out of the load balancer) apart from
// readiness (GET /readyz: is the projection the reads come from current).
//
// The API's liveness is "an append would be stored": NATS connected and
// the LEDGER stream present and accepting writes. PostgreSQL is not part
// of it: appends go on while PostgreSQL is down (the log is the truth,
// the projection catches up), so a load balancer must not cut producers
// off then. The projector's liveness is its NATS connection and its run
// (the fold loop has not ended).
//
// Readiness is PostgreSQL reachable and every projector (partition) that
// the process cares about less than MaxLag behind the stream, measured
// as the age of the first stream message after its committed offset (as
// GET /v1/status measures it). Halted pools make it "degraded", still
// ready: one pool's trouble does not take the others' reads away.
//
// Both answer without a token, so they say one word per part, never an
// address, user or error text; the details go to the log. Each check is
// bounded by Timeout.
//
// Live tells, for GET /v1/status, whether a projector (or partition) has
// a live instance: NATS's own view of its durable consumer (a pull
// request waiting, or a pinned instance within the pinned TTL).
package health
