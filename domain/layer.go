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
}

// shares is one consumer's part of a layer.
type shares struct {
	planned   Slots // P: the static planned share of the layer's capacity
	target    Slots // G (priority) or T (share_ratio)
	overShare bool  // top-level only: alloc > planned
	q         queued

	base  Slots // scratch: Pdyn, then B (share_ratio, leaf enforcement)
	tmp   Slots // scratch: this node's part of its parent's split
	floor Slots // scratch, rules 4: F in a pool with pins (yarn.go); 0 otherwise
	start Slots // scratch, rules 4: where the surplus starts, in a pool with pins (targets.go starts)

	// Memo of the target passes (targets.go).
	dirty  bool  // E changed in this subtree since the last pass
	dirtyU bool  // a child's residual need changed (leaf enforcement)
	memoQ  Slots // quota this node was given in the last pass
	memoU  Slots // surplus this node was given in the last pass
}

func newLayer(nodes int) layer {
	return layer{q: newQueues(), sh: make([]shares, nodes)}
}

// sh returns a consumer's shares of the public layer.
func (p *Pool) sh(id int32) *shares { return &p.pub.sh[id] }
