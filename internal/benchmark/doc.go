// Package benchmark is the service benchmark harness behind `ledger bench`.
//
// It runs the ledger's real components (the HTTP API, the JetStream log,
// the projector, the audit replayer and the rebuild code path) against an
// embedded NATS server and a private PostgreSQL cluster started in a
// temporary directory (or against servers the caller names), and measures
// each figure in the same run as the baseline it is compared with:
//
//  1. append: events/s through POST /v1/pools/{pool}/events, one event per
//     request and arrays of 100, beside raw JetStream publishes of the same
//     envelopes (synchronous with message ids, and asynchronous in batches
//     of 100 waiting for the acks), each on a fresh server that syncs every
//     write (the ledger's default) and on one that syncs in the background,
//     printed beside each other;
//  2. projection: events/s of a fresh projector folding a 1,000-leaf pool's
//     log into PostgreSQL from sequence 0, beside a COPY of the events and
//     decisions rows it wrote into empty clones of their tables;
//  3. latency: at a steady rate through the API, the time from just before
//     the POST until the pool's checkpoint in PostgreSQL covers the event;
//  4. replay: a large log read raw from JetStream, re-folded in memory by
//     the audit replayer, and rebuilt into an empty database.
//
// Phases run in the order 2, 1, 3, 4 so that the projection phase starts
// from an empty stream; phases 2 to 4 share one stream (on a server that
// syncs in the background: its logs are set-up, not what is measured) and
// one database. Config.Phases runs only some of them, and
// Config.CPUProfile profiles the run with each sample labelled by its
// phase and step (step), to find where a path's time goes as the run
// measures it.
package benchmark
