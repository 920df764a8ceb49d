package domain

import "slices"

// poolOrders is every pool's leaves in the entitled and the borrow orders
// (tree.go), for one fold under rules 4's priority, where each pool's
// seating (priority_seating.go) and division (priority_per_pool.go) walk
// its leaves in both. Both orders are total (the path breaks every tie),
// so a pool's leaves in one are its subsequence of all the leaves sorted
// once (tree.inEntitledOrder, inBorrowOrder): the fold sorts the tree's
// leaves in each order instead of every pool's leaves four times
// (docs/decisions.md #249). The orders read each leaf's priority and
// waiting-since, which no step of a fold changes.
type poolOrders struct {
	at       []int32 // by node id: where a parent's leaves start in entitled and borrow
	entitled []int32
	borrow   []int32
}

// newPoolOrders sorts t's leaves and deals them out to every parent.
func newPoolOrders(t *tree) *poolOrders {
	o := &poolOrders{at: make([]int32, len(t.nodes))}
	n := int32(0)
	for id := range t.nodes {
		if nd := &t.nodes[id]; !nd.leaf {
			o.at[id] = n
			n += nd.hi - nd.lo
		}
	}
	o.entitled, o.borrow = make([]int32, n), make([]int32, n)
	o.deal(t, t.inEntitledOrder(), o.entitled)
	o.deal(t, t.inBorrowOrder(), o.borrow)
	return o
}

// deal appends each leaf of sorted to the list of every parent above it.
func (o *poolOrders) deal(t *tree, sorted, out []int32) {
	next := slices.Clone(o.at)
	for _, l := range sorted {
		for a := t.nodes[l].parent; a != noNode; a = t.nodes[a].parent {
			out[next[a]] = l
			next[a]++
		}
	}
}

// entitledIn and borrowIn are pool x's leaves (all of them) in the
// entitled and the borrow order; the caller must not change them.
func (o *poolOrders) entitledIn(t *tree, x int32) []int32 {
	return o.entitled[o.at[x] : o.at[x]+t.nodes[x].hi-t.nodes[x].lo]
}

func (o *poolOrders) borrowIn(t *tree, x int32) []int32 {
	return o.borrow[o.at[x] : o.at[x]+t.nodes[x].hi-t.nodes[x].lo]
}

// orders is the fold's poolOrders, made on first use.
func (f *layeredFold) orders() *poolOrders {
	if f.ord == nil {
		f.ord = newPoolOrders(f.t)
	}
	return f.ord
}

// withDemand appends to buf the leaves of in that take part in the
// current division (eff > 0, as newDivision lists them in d.leaves), in
// in's order.
func (f *layeredFold) withDemand(buf, in []int32) []int32 {
	for _, l := range in {
		if f.eff[l] > 0 {
			buf = append(buf, l)
		}
	}
	return buf
}
