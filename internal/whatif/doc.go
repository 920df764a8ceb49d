// Package whatif answers "what would these events do to this pool?"
// without appending anything.
//
// Fork rebuilds a pool's state at a point of its history (just after a
// sequence, or after its last event at or before a time; the pool's last
// event by default) exactly as `ledger replay` and `ledger audit` do: the
// pool's nearest engine snapshot at or before the point (from
// PostgreSQL), then its events from the log after the snapshot, each
// through projections.Fold (audit.Replayer), trusted keys and applied
// ids included. Run then folds the hypothetical events on that state, in
// memory, through the same fold, and answers with every consumer's
// figures (demand, allocation, target, unmet demand) before and after,
// each hypothetical event's outcome, and the decisions they would take,
// in words (internal/explain).
//
// A hypothetical event is judged as the ledger would judge it if it were
// appended then, on its own: one the ledger would refuse is reported
// with its code and words and changes nothing (it takes no sequence);
// the others take the sequences after the fork point's, which are
// hypothetical (other pools' events may hold them in the log). An event
// without a time happens one second after the one before it, the first
// at the fork point's time (now, for a fork of the present, as the
// ledger stamps an append); a time before the previous event's is
// refused.
//
// The caller (the API) bounds the work: the number of events, the
// request's time budget (the context, checked between events, during
// the replay too), and how many what-ifs run at once.
package whatif
