package domain

import (
	"slices"
	"time"
)

// The layered targets of share_ratio with ownership
// (docs/rules.md#layered-fold and #layer-division): how many slots each leaf
// should hold from each layer, given its effective demand and the ownership
// assignment. This file is the arithmetic alone, a pure function of the tree,
// the demand, the assignment's totals and where the slots sit now, like the
// assignment in ownership_assignment.go; the fold (ownership_fold.go) calls it on every rebalance
// of a pool with ownership. The layers, in the order they are used:
//
//  1. the own layer: every leaf, by rank (priority desc, then path), uses
//     min(E, owned) of its own slots within its ancestors' remaining max;
//  2. the private pools, deepest parent first: pool(X) is private(X) plus
//     what X's children lend (a leaf's unused owned slots, a parent's
//     unused pool, each only where lend is true), divided among X's
//     descendants by the targets of docs/rules.md#shares, C being the
//     pool's size, the demand what earlier layers left unmet and every
//     max reduced by what earlier layers gave; what it does not use is
//     lent to X's parent's pool;
//  3. the public pool: the public slots plus what the top-level consumers
//     lend, divided among every leaf the same way.
//
// Lent slots carry a grace: the smallest lend_grace of the consumers they
// were lent through. Only a leaf whose reclaim_grace is at most that
// grace may use them. Inside a pool, lent slots are divided class by
// class, the most restrictive first, each class among the leaves allowed
// to use it; classes that the same leaves may use are divided together,
// and the pool's own slots come last. Of the slots of one division, the
// pool's own are used first and lent ones by lowest grace first, so the
// ones passed upward are the least restrictive. Orders the spec leaves
// open are docs/decisions.md #94-#97.

// lentSlots is a number of slots lent into a pool: whose slots they are
// (lender: the leaf that owns them, or the parent whose private slots
// they are) and the grace they carry.
type lentSlots struct {
	lender int32
	grace  time.Duration
	slots  Slots
}

// poolTake is a number of slots a leaf is given in one pool (0: the
// public pool): the pool's own slots (lender noNode) or slots lent into
// it.
type poolTake struct {
	pool   int32
	leaf   int32
	lender int32
	slots  Slots
	// entitled: under priority, how many of slots are within the leaf's
	// guarantee G in the pool (the rest it borrows); 0 otherwise.
	entitled Slots
	// kept, keptEnt: under rules 4's priority (dividePriorityOnce), how
	// many of slots the leaf keeps where it sits in the pool, and how many
	// of those are entitled (its guarantee counts what it keeps first);
	// 0 otherwise.
	kept, keptEnt Slots
}

// ownTotals is the ownership assignment as the layered targets need it,
// by node id.
type ownTotals struct {
	owned   []Slots // slots assigned to the consumer, over all hosts
	private []Slots // a parent's assigned slots not assigned to its children
	public  Slots   // up slots no top-level consumer owns
}

// layeredTargets is the outcome: each leaf's part of each layer.
type layeredTargets struct {
	ownUse []Slots     // by node id: the own layer (leaves only)
	takes  []poolTake  // pools in the order divided, then leaves by path
	target []Slots     // by node id: a leaf's total; a parent's is its leaves' sum
	idle   []lentSlots // slots nobody may use: not lent (lend: false), or left in the public pool (lender noNode)
	// transfers: the slots divisions that reclaim (priority, balance:
	// false) moved from a victim to a claimant, in the order moved; the
	// placement pairs a claimant's gains with them first, so a reclaim's
	// from is the victim the rules chose (docs/rules.md#priority's victim
	// order, its branch floor included).
	transfers []transfer
	// t0: rules 4's T0 for share_ratio with balance: false (ruling 4,
	// totals.go); nil otherwise.
	t0 *guarantees
}

// poolSlots is a pool's slots in one fold: its own and those lent in.
type poolSlots struct {
	unrestricted Slots
	lent         []lentSlots
}

// transfer is slots a division moved from victim to claimant.
type transfer struct {
	claimant, victim int32
	slots            Slots
}

// layeredInput is what the layered targets depend on besides the tree.
type layeredInput struct {
	parentEnf bool                // enforcement: parent
	policy    divisionPolicy      // how a pool is divided
	own       ownTotals           // the assignment's totals
	lend      func(id int32) bool // whether a consumer lends (its unused owned slots, its pool's leftover)
	// held: where the slots are now, by (pool, leaf, lender): the
	// divisions that keep what leaves hold (every policy but share_ratio
	// with reclaim and balance) start from it, and every division
	// attributes a leaf's part to the classes it already sits on first.
	// The computation consumes it (it counts down what it attributed).
	held heldSlots
	// priorityPerPool: rules 4's priority divides a pool with several
	// class groups once (ruling 1, priority_per_pool.go); underLender:
	// there, a leaf under a class's lender may take it whatever its
	// reclaim_grace (docs/decisions.md #382).
	priorityPerPool, underLender bool
	// rules4Classes: rules 4's class attribution: a leaf gives what it
	// sits on beyond its demand back in section 5's release order (ruling
	// 5; keepSittings), and the parts not kept are handed out in the
	// claimant order (handOutRest; docs/decisions.md #358).
	rules4Classes bool
	// seat, under rules 4's priority (ruling 12, priority_seating.go):
	// held is empty and each pool's tier is seated by rounds as the fold
	// reaches it; nil otherwise.
	seat *roundSeating
	// guarantees, with share_ratio with reclaim and balance as policy: also
	// compute rules 4's T0 for balance: false (ruling 4, totals.go) from
	// each leaf's allocation alloc.
	guarantees bool
	alloc      func(l int32) Slots
}

// layeredFold holds one computation's state.
type layeredFold struct {
	t         *tree
	parentEnf bool
	policy    divisionPolicy
	lend      func(id int32) bool
	// priorityPerPool, underLender, rules4Classes and seat: layeredInput's.
	priorityPerPool, underLender bool
	rules4Classes                bool
	seat                         *roundSeating
	// record, when set, keeps each pool's slots as divided (by node id);
	// fixed, when set, divides each pool over those slots instead and lends
	// nothing upward (rules 4's T0, totals.go).
	record, fixed []poolSlots
	held          map[heldKey]Slots
	heldBy        map[poolLeaf][]int32 // the lenders of held's entries, by (pool, leaf)
	heldDiv       heldDivision
	remDemand     []Slots // by node id: E less what earlier layers gave (leaves)
	// excess, by node id, under rules4Classes: what a leaf sits on in the
	// pool being divided beyond the demand it brings there, not yet given
	// back (keepSittings).
	excess []Slots
	remMax []Slots // by node id: max less what earlier layers gave
	inbox  [][]lentSlots
	out    layeredTargets
	sp     splitter

	// Scratch of one division, by node id: eff, base and got are div's
	// eff, base and part (share_division.go).
	eff, base, got []Slots
	div            shareDivision
	// ord: rules 4's priority, every pool's leaves in the entitled and
	// the borrow orders (priority_orders.go); entBuf, borBuf: a division's
	// leaves with demand in them.
	ord            *poolOrders
	entBuf, borBuf []int32
	// keptBuf, esBuf: scratch of a rules 4 priority pool's division
	// (dividePriorityOnce).
	keptBuf             []classSlots
	esBuf, ksBuf, keBuf []Slots
}

// computeLayeredTargets divides every layer.
func computeLayeredTargets(t *tree, in layeredInput) layeredTargets {
	f := layeredFoldOf(t, in)
	if in.guarantees {
		f.record = make([]poolSlots, len(t.nodes))
	}
	out := f.run(in.own)
	if in.guarantees {
		tf, record := out, f.record
		out.t0 = &guarantees{of: func(alloc func(l int32) Slots) []Slots {
			at := in
			at.alloc = alloc
			return guaranteeTargets(t, at, record, tf)
		}}
	}
	return out
}

// ownLayer gives every leaf, by rank, min(E, owned) of its own slots
// within its ancestors' remaining max, and lends what it does not use.
func (f *layeredFold) ownLayer(own ownTotals) {
	for _, l := range f.t.leavesByRank() {
		owned := own.owned[l]
		if owned == 0 {
			continue
		}
		use := minSlots(minSlots(f.remDemand[l], owned), f.headroom(l))
		f.give(l, use)
		f.out.ownUse[l] = use
		f.lendUp(l, lentSlots{lender: l, grace: f.t.nodes[l].lendGrace, slots: owned - use})
	}
}

// headroom is what a leaf may still be given under the remaining max of
// its ancestors.
func (f *layeredFold) headroom(l int32) Slots {
	h := Unlimited
	for a := f.t.nodes[l].parent; a > 0; a = f.t.nodes[a].parent {
		h = minSlots(h, f.remMax[a])
	}
	return h
}

// give records that a leaf was given k slots: less demand left, less room
// under every max on its path.
func (f *layeredFold) give(l int32, k Slots) {
	f.remDemand[l] -= k
	for a := l; a > 0; a = f.t.nodes[a].parent {
		if f.remMax[a] != Unlimited {
			f.remMax[a] -= k
		}
	}
}

// lendUp passes unused slots of consumer id to its parent's pool when id
// lends, with the grace of the chain so far capped by id's lend_grace;
// otherwise they stay idle.
func (f *layeredFold) lendUp(id int32, s lentSlots) {
	if s.slots <= 0 {
		return
	}
	if !f.lend(id) {
		f.out.idle = append(f.out.idle, s)
		return
	}
	s.grace = min(s.grace, f.t.nodes[id].lendGrace)
	parent := f.t.nodes[id].parent
	f.inbox[parent] = append(f.inbox[parent], s)
}

// poolOrder lists the parents whose pools are divided, deepest first
// (then path), the public pool (the root) last.
func (f *layeredFold) poolOrder() []int32 {
	var parents []int32
	for id := 1; id < len(f.t.nodes); id++ {
		if !f.t.nodes[id].leaf {
			parents = append(parents, int32(id))
		}
	}
	slices.SortStableFunc(parents, func(a, b int32) int { return cmpDesc(f.t.nodes[a].depth, f.t.nodes[b].depth) })
	return append(parents, 0)
}

// dividePool divides pool(x): its own slots and what was lent into it,
// class group by class group, and passes what is left upward.
func (f *layeredFold) dividePool(x int32, unrestricted Slots) {
	lent := f.inbox[x]
	if f.fixed != nil { // T0's fold: the pool's slots of T's fold, nothing lent upward
		unrestricted, lent = f.fixed[x].unrestricted, f.fixed[x].lent
	}
	if f.record != nil {
		f.record[x] = poolSlots{unrestricted: unrestricted, lent: slices.Clone(lent)}
	}
	if unrestricted == 0 && len(lent) == 0 {
		return
	}
	if f.rules4Classes {
		n := &f.t.nodes[x]
		for _, l := range f.t.leaves[n.lo:n.hi] {
			sits := Slots(0)
			for _, lender := range f.heldBy[poolLeaf{x, l}] {
				sits += f.held[heldKey{pool: x, leaf: l, lender: lender}]
			}
			f.excess[l] = max(0, sits-f.remDemand[l])
		}
	}
	graces := f.t.subtreeGraces(x)
	groups := f.classGroups(lent, unrestricted, graces)
	var leftover []lentSlots
	if f.priorityPerPool && !f.policy.shareRatio && (len(groups) > 1 || f.seat != nil) {
		leftover = f.dividePriorityOnce(x, groups)
		groups = nil
	}
	for _, g := range groups {
		size := Slots(0)
		for _, s := range g.slots {
			size += s.slots
		}
		if g.eligible < 0 { // nobody in this pool may use these
			leftover = append(leftover, g.slots...)
			continue
		}
		used := f.divide(x, size, g.eligible, g.slots)
		leftover = append(leftover, f.attribute(x, g.slots, used)...)
	}
	for _, s := range leftover {
		switch {
		case f.fixed != nil: // T0 lends nothing upward
			continue
		case x == 0: // the public pool's leftover: nobody wants it
			f.out.idle = append(f.out.idle, s)
		case s.lender == noNode: // x's own private slots, lent as x's
			f.lendUp(x, lentSlots{lender: x, grace: f.t.nodes[x].lendGrace, slots: s.slots})
		default:
			f.lendUp(x, s)
		}
	}
}

// divide splits c slots of pool(x) among x's leaves whose reclaim_grace
// is at most eligible, by docs/rules.md#shares' targets under the pool's
// enforcement, and returns each leaf's part in path order. Each part is
// recorded as given.
func (f *layeredFold) divide(x int32, c Slots, eligible time.Duration, classes []lentSlots) []poolTake {
	if !f.policy.demandOnly() {
		return f.divideHeld(x, c, eligible, classes)
	}
	top := f.effs(x, eligible)
	top = minSlots(top, f.headroomOf(x))
	f.eff[x] = top
	if !f.targets(x, c) {
		return nil
	}
	n := &f.t.nodes[x]
	leaves := slices.Sorted(slices.Values(f.t.leaves[n.lo:n.hi]))
	var used []poolTake
	for _, l := range leaves {
		if k := f.got[l]; k > 0 {
			used = append(used, poolTake{pool: x, leaf: l, slots: k})
			f.give(l, k)
		}
	}
	return used
}

// targets puts docs/rules.md#shares' targets of a division of c slots of
// pool(x) into got, from the effective demands in eff (x's own capped by its
// ancestors' room already); false when nobody gets anything.
func (f *layeredFold) targets(x int32, c Slots) bool {
	q := minSlots(c, f.eff[x])
	if q == 0 {
		return false
	}
	f.div.markSubtree(f.t, x)
	if f.parentEnf {
		f.div.waterFill(f.t, &f.sp, x, q, nil)
	} else {
		b := f.div.dynamicShares(f.t, &f.sp, x, c)
		f.div.surplus(f.t, &f.sp, x, q-b)
	}
	return true
}

// headroomOf is the room under the remaining max of x and its ancestors.
func (f *layeredFold) headroomOf(x int32) Slots {
	h := Unlimited
	for a := x; a > 0; a = f.t.nodes[a].parent {
		h = minSlots(h, f.remMax[a])
	}
	return h
}

// effs computes the effective demand of id's subtree in this division (a
// leaf's remaining demand if it may take part, a parent's capped by its
// remaining max) and returns id's. The caller caps the pool's own with
// its ancestors' remaining max.
func (f *layeredFold) effs(id int32, eligible time.Duration) Slots {
	n := &f.t.nodes[id]
	f.got[id], f.base[id] = 0, 0
	if n.leaf {
		f.eff[id] = 0
		if n.reclaimGrace <= eligible {
			f.eff[id] = f.remDemand[id]
		}
		return f.eff[id]
	}
	var sum Slots
	for _, c := range n.children {
		sum += f.effs(c, eligible)
	}
	f.eff[id] = minSlots(f.remMax[id], sum)
	return f.eff[id]
}

// sumTargets adds up each leaf's layers, and each parent's leaves.
func (f *layeredFold) sumTargets() {
	tg := f.out.target
	for _, l := range f.t.leaves {
		tg[l] = f.out.ownUse[l]
	}
	for _, tk := range f.out.takes {
		tg[tk.leaf] += tk.slots
	}
	for id := len(f.t.nodes) - 1; id > 0; id-- { // children before parents
		if n := &f.t.nodes[id]; !n.leaf {
			tg[id] = 0
			for _, c := range n.children {
				tg[id] += tg[c]
			}
		}
	}
}
