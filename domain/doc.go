// Package domain is the allocation engine: a pure, synchronous state
// machine for one pool. Pool.Apply takes one event (its sequence, its
// stamped time and its payload), validates it against the current state,
// and either refuses it with a typed error and changes nothing, or folds it
// through the sharing rules of docs/rules.md and returns every
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
// hosts.go and placement.go (capacity and where slots sit), shares.go and
// targets.go (planned shares, guarantees and targets, full and
// incremental), priority.go and shareratio.go (the two rebalance
// policies), release.go (excess and trims), pool.go (the fold), rules.go
// (the rules versions), validate.go (refusals), views.go (read-only state
// for the edges) and snapshot.go (the versioned, hashable state encoding).
// Ownership (rules v3, docs/rules.md#ownership): ownplan.go (the
// plan's ownership fields, validated), ownership.go (assignment to host
// slots), layered.go and layerheld.go (each leaf's part of each layer),
// owned.go (the layered fold and its views), ownplace.go (placing the
// parts on hosts: grants, lends, returns, reclaims, moves) and
// sitcache.go (which part of a host each leaf's slots sit in, per host).
// The fold and the placement are kept between events where the plan
// allows (docs/decisions.md #116): layerinc.go (the kept state and what
// marks a pool for a visit), layerincdiv.go (share_ratio's division),
// layerincheld.go (priority's), layerincattr.go (which classes a part
// comes from) and ownplaceinc.go (the placement over the leaves that are
// not quiet); each gives exactly what the full computation gives.
package domain
