package domain

// layer is one body of slots that the sharing rules divide among the
// consumers: its capacity, the queues that order its claimants and
// victims, and every consumer's shares of it (P, G or T, and the scratch
// and memo of their computation). The tree itself (structure, demand,
// effective demand, allocations, holdings) stays the pool's; a layer only
// says how much of its own capacity each consumer should have, in the
// spirit of kueue's resource nodes, which keep local quota apart from the
// tree.
//
// A pool has one layer, the public pool (Pool.pub): without ownership it
// is every slot of the pool. With ownership the layers of
// docs/rules.md#layered-fold (the own layer, the private pools, the
// public pool with what is lent into it) are divided by the layered fold
// (layered_targets.go, kept_fold.go), which reads the same tree and
// writes each leaf's target into this layer's shares.
type layer struct {
	capacity Slots
	q        queues
	sh       []shares // by node id
	// div is the division of the capacity over the tree (targets.go): P,
	// and G or T with the scratch and memo of their passes; its parts are
	// the targets (without ownership).
	div shareDivision
}

// shares is one consumer's part of a layer.
type shares struct {
	target    Slots // G (priority) or T (share_ratio)
	overShare bool  // top-level only: alloc > planned
	q         queued
}

// sh returns a consumer's shares of the public layer.
func (p *Pool) sh(id int32) *shares { return &p.pub.sh[id] }
