// Package domain is the allocation engine: a pure, synchronous state
// machine for one pool. Pool.Apply takes one event (its sequence, its
// stamped time and its payload), validates it against the current state,
// and either refuses it with a typed error and changes nothing, or folds it
// through the sharing rules of allocation-rules.md and returns every
// allocation change as a Decision naming the rule that caused it.
//
// The package does no I/O, reads no clock, draws no random numbers and
// never lets map iteration order reach an output: the same log folded twice
// gives byte-identical decisions and state. Everything that talks to the
// world (the ledger API, the projector, the audit tools) lives at the
// edges and calls in here, in the spirit of etcd-io/raft's Step.
//
// Layout: quantity.go (the Slots value type and limits), apportion.go (the
// one rounding primitive), tree.go (the consumer tree built from a plan),
// hosts.go and placement.go (capacity and where slots sit), shares.go
// (planned shares, guarantees and targets), priority.go and shareratio.go
// (the two rebalance policies), release.go (excess and trims), pool.go
// (the fold), validate.go (refusals), views.go (read-only state for the
// edges) and snapshot.go (the versioned, hashable state encoding).
package domain
