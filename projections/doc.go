// Package projections is the read side of the ledger: the projector folds
// the LEDGER JetStream log through the allocation engine ([domain]) and
// writes what it learns to PostgreSQL (the tables of migrations/0001), so
// that reporting SQL sees the same allocations and decisions the engine
// makes.
//
// The projector is a durable pull consumer of the whole stream. It keeps
// an in-memory [domain.Pool] for each of the pools it folded lately (at
// most [WithResidentPools]; resident.go says how the others are saved and
// taken up again), folds each event with [Fold]
// (apply, or skip when the engine refuses it, then the next link of the
// pool's hash chain), and writes a batch of events together with the
// stream sequence it reached in ONE transaction. PostgreSQL, not the
// consumer's ack state, is the truth about where the projection stands:
// on start the projector rebuilds each pool from its newest snapshot and
// the log up to the committed sequence (or, when its state is stored at
// its checkpoint, compares the stored hashes and leaves it until an event
// of it comes), checks the rebuilt state and chain against the recorded
// checkpoint, and consumes from the next sequence;
// anything redelivered at or below the committed sequence is acked and
// ignored. So a crash at any point neither loses nor doubles a row.
//
// Every run of messages is decoded and its signatures checked over all
// the cores before it is folded in order ([DecodeAll], [ReadDecoded];
// decode.go). A batch commits asynchronously (PostgreSQL may lose the
// last ones in a crash; the offset commits with them, so the projector
// folds them again: docs/decisions.md 305), and a small batch is written
// in one pipelined round trip (write.go, 306), while a large batch's new
// rows are appended in its own transaction as the batch before it
// commits (pipeline.go, 439).
//
// Its durable (or, partitioned, its partitions' durables) is the only
// consumer it holds: every other read of the log (each pool's rebuild at
// start, a halted pool's catch-up, healing, gap filling, [WithUntil]'s
// fold up to a sequence for `ledger replay --into`) uses direct gets
// ([stream.Read]), so restarts over any number of pools leave nothing on
// the stream (docs/decisions.md 120).
//
// What the consumer delivered and the projector is still working on is
// kept from being delivered again with in-progress acks (inflight.go),
// and every request its loop makes about the stream or a consumer is
// given up after a second and asked again (requests.go): a stream
// electing a leader holds no partition up for long, nor one partition
// the others.
//
// Two projectors of one name would share that durable and its offsets:
// a projector first takes a PostgreSQL advisory lock on its name (lock.go;
// shared among the instances of a partitioned one) and holds it for its
// run, so a second refuses with [ErrAnotherProjector] and changes
// nothing.
//
// A stream that ends before the committed sequence lost its tail (JetStream
// had not synced it when its machine crashed). The events table keeps each
// event's stored message, so the projector heals the stream (heal.go): it
// compares what survived with the table, stops with [ErrDiverged] at the
// first difference, and otherwise appends the missing events again at
// their original sequences before rebuilding as usual. It checks this when
// it starts and whenever its NATS connection is made again; [Projector.Heal]
// (`ledger recover`) does it on demand.
//
// [Fold] is exported so the audit tools (replay, audit verify) fold the
// log exactly as the projector did.
package projections
