// Package api is the ledger's HTTP API: the write side that validates
// events against a pool's current state and appends them to the LEDGER
// stream, and the read endpoints over the PostgreSQL projection.
//
// Writes. The server keeps one engine state (domain.Pool) per pool in
// memory, folded from the stream. An event is validated against it with
// the same domain code the projector uses, stamped with the ledger's
// clock (never earlier than the pool's previous event), and published
// with the pool's expected last sequence
// (Nats-Expected-Last-Subject-Sequence on ledger.<pool>.>). When another
// ledger instance appended to the pool in the meantime, JetStream refuses
// the publish; the server then folds the new events and validates again,
// so two instances can never interleave a pool's history and every event
// was validated against everything before it. A refusal is only given
// after checking that the state it was judged on is current.
//
// An array of events is validated as a whole (in order, on a copy of the
// state) and appended with JetStream's atomic batch publish: all of it or
// nothing, in one round trip, contiguous in the stream.
//
// Event ids are NATS message ids: a retried publish within the stream's
// duplicate window is stored once, and is answered with the stored
// sequence before it is validated again (a retried release would otherwise
// be refused against the state it already changed).
//
// While the stream ends before the projection (it lost its unsynced tail
// in a crash and the projector is appending those events again), appends
// are answered 503 with reason "healing" and Retry-After (hold.go).
//
// Access. Every request but the probes (/healthz, /readyz), the contract
// (/v1/openapi.json) and the console's static page needs a bearer token
// of the server's token set (internal/auth) with the scope it needs on the pool
// it names: append for demand and release, plan for plan and hosts, read
// for the read endpoints. The producer recorded is the token's name.
// A live stream's token is checked again every StreamRecheck: revoked or
// changed, its streams end.
// Requests from browser pages (an Origin header) are refused unless the
// origin is allowed, and a POST must be application/json. Authorize
// wraps other handlers (a console) with the same checks.
//
// Input is checked cheapest first (request.go): access, then the body
// under MaxBody and BodyTimeout, decoded as a stream one event at a time,
// each read strictly against its type first (strict.go: UTF-8 without
// lone surrogates, keys exact and once, values of their field's kind,
// refused in the API's words naming the field), bounded by
// events.CheckLimits, its names admitted by events.CheckNames, then
// against the pool (folds.go: no name differing only by case from
// another of the pool, no new pool differing so from a pool), then the
// engine's validation. Nothing after the JSON value is accepted. A body
// a refusal did not need is never read (edge.go), and a path or method
// no route takes is answered in the same JSON error shape.
//
// Reads (allocations, decisions) come from the projector's tables, under
// a read timeout. The probes are internal/health's: /healthz is
// liveness (an append would be stored: NATS and the stream, not
// PostgreSQL), /readyz readiness (PostgreSQL, and the projection less
// than WithReadyLag behind the stream).
//
// Status (status.go). GET /v1/status is the operator's report (read
// scope; `ledger status` prints it): the stream's copies, leader and
// their lag, each projector (or partition) with its owner and its lag
// behind the stream in events and seconds, the halted pools, and whether
// PostgreSQL and NATS answer. It asks NATS and PostgreSQL at the same
// time under StatusTimeout and always answers 200 while the ledger runs:
// "ok", or "degraded" with the problems in words. That whole report is
// for a token that reads every pool; a token limited to some pools gets
// the pools view (whether appends and reads work, its halted pools, the
// problems bearing on them without figures).
//
// What-if (whatif.go). POST /v1/pools/{pool}/what-if (read scope) forks
// a pool at a point of its history from its snapshot and the log
// (internal/whatif, the replay's fold), folds hypothetical events on it
// in memory and answers with the difference; it appends nothing. It is
// bounded by the body, MaxWhatIfEvents, a time budget and slots (at once,
// and one per pool), and the console's own page may send it.
//
// The contract (openapi.go). openapi.json describes every endpoint of
// the server, every status and body; it is served at /v1/openapi.json,
// and the tests check every answer they get against it
// (internal/contract).
package api
