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
// Layout. The fold: pool.go (Apply: the order of an event's steps),
// result.go (the one value an event returns), decision.go, errors.go,
// validate.go (refusals), rules.go (the rules versions), policy.go.
// The tree and the arithmetic, kept apart: tree.go (the consumer tree
// built from a plan, and the named orders: keepers', entitled, borrow),
// quantity.go (Slots and limits), apportion.go (the one rounding
// primitive), split.go (the sibling split every division calls),
// share_division.go (the division of a quota down a subtree by the share
// targets: water-fill, P, Pdyn and its re-split, the surplus, each pass
// written once and memoized, for a pool without ownership and for each
// pool of the layered folds), shares.go (P, maxima and E) and targets.go
// (G and T of a pool without ownership, by that division), layer.go.
// Without ownership: queues.go (the kept claimant and victim orders),
// priority.go and share_ratio.go (the two rebalance policies),
// placement.go and hosts.go (where slots sit), release.go (excess and
// trims), yarn.go (rules 4's bands, pins and zero shares, in
// development).
// Ownership (rules v3, docs/rules.md#ownership): ownership_plan.go (the
// plan's fields, validated), ownership_assignment.go (owned slots to
// hosts), host_parts.go (hosts divided into owners' parts),
// layered_targets.go, layered_classes.go and layered_divisions.go (each
// leaf's part of each layer, computed in full, by share_division.go),
// seating.go and
// seating_cache.go (which part of a host each held slot sits in),
// ownership_placement.go, ownership_reserve.go, ownership_keep.go,
// ownership_grants.go and ownership_pairing.go (the placement's steps:
// reserve, keep, place, pair into decisions),
// ownership_fold.go (the layered fold's steps), ownership_views.go and
// ownership_figures.go (the figures the views and the Result report).
// Rules 4's rulings on ownership (in development, docs/rules.md#version-4):
// priority_per_pool.go (a priority pool divided once, ruling 1),
// priority_seating.go (its tier seated by rounds, ruling 12),
// priority_orders.go (every pool's leaves in the entitled and the borrow
// orders, sorted once per fold),
// totals.go and fill_on_totals.go (share_ratio without preemption or
// balance decided on totals, ruling 4), return_swap.go (an owner's
// returns swapped with its borrowers' compensation, ruling 9); the
// placement's keepSeated (no move without preemption, ruling 7);
// idle_moves.go (no move off slots that would stay free, ruling 7);
// capped_reclaims.go (a reclaim inside a capped branch, section 4);
// ownership_excess.go (an owner's excess in the release order, ruling 5).
// The fold and the placement kept between events where the plan allows
// (docs/decisions.md #116): kept_fold.go (the kept state and what marks a
// pool for a visit), kept_priority.go (a kept pool's division under
// priority), kept_attribution.go (which classes a part comes
// from), kept_placement.go (the placement over the leaves that are not
// quiet), leaf_set.go; each gives exactly what the full computation
// gives (TestKeptFoldMatchesFull). Views and the durable state: views.go,
// snapshot.go (the versioned encoding), hash.go.
package domain
