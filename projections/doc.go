// Package projections is the read side of the ledger: the projector folds
// the LEDGER JetStream log through the allocation engine ([domain]) and
// writes what it learns to PostgreSQL (the tables of migrations/0001), so
// that reporting SQL sees the same allocations and decisions the engine
// makes.
//
// The projector is a durable pull consumer of the whole stream. It keeps
// one in-memory [domain.Pool] per pool, folds each event with [Fold]
// (apply, or skip when the engine refuses it, then the next link of the
// pool's hash chain), and writes a batch of events together with the
// stream sequence it reached in ONE transaction. PostgreSQL, not the
// consumer's ack state, is the truth about where the projection stands:
// on start the projector rebuilds each pool from its newest snapshot and
// the log up to the committed sequence, checks the rebuilt state and chain
// against the recorded checkpoint, and consumes from the next sequence;
// anything redelivered at or below the committed sequence is acked and
// ignored. So a crash at any point neither loses nor doubles a row.
//
// [Fold] is exported so the audit tools (replay, audit verify) fold the
// log exactly as the projector did.
package projections
