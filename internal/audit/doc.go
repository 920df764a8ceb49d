// Package audit replays the log and holds the projection to it. It reads
// the LEDGER stream from any offset (starting each pool at its nearest
// snapshot in PostgreSQL), folds every event through projections.Fold, the
// same function the projector uses, and either hands the decisions to a
// printer (ledger replay) or compares them, decision by decision and link
// by link of the hash chain, with what the projection recorded (ledger
// audit verify), naming the first divergence.
package audit
