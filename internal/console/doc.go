// Package console is the ledger's read-only web console and the JSON
// endpoints it reads.
//
// The page (assets/, embedded in the binary with go:embed, nothing
// fetched from elsewhere at run time) shows the pools, a pool's consumer
// tree and hosts, the pool as it was at any earlier event (time travel,
// from the projection's "as of" data), a filterable timeline of decisions,
// each with the explain story, and follows new events live.
//
// Static assets are served without authentication (they hold no data);
// every data endpoint under /v1 goes through the Auth middleware the
// caller passes in, so the API's read-scope check applies to them as to
// the rest of the read API. The page keeps a bearer token in
// sessionStorage and sends it with every call, the live stream included
// (read with fetch and a ReadableStream, since EventSource cannot send
// headers).
//
// Live updates: one goroutine per server polls the checkpoints table while
// at least one stream is open and fans changes out to the streams as
// server-sent events (see docs/console.md for why polling rather than
// LISTEN/NOTIFY).
package console
