package domain

import (
	"cmp"
	"maps"
	"slices"
)

// The layered fold kept between events. computeLayeredTargets (layered_targets.go)
// divides every pool from scratch; on a large pool that is most of an
// event's cost, while a demand or release event changes a few leaves. This
// is the same fold with its state kept: each pool remembers its division
// (under share_ratio the memos of its share division, per pool; under priority
// its keeps and sets, kept_priority.go), each leaf's part of it and which
// classes the part came from, and what it lent upward; an event revisits
// only the pools its change reaches, and in them only the nodes whose
// inputs moved. It gives exactly what computeLayeredTargets gives
// (TestKeptFoldMatchesFull), under the conditions of incFoldable; the
// other pools take the full computation (docs/decisions.md #116).
//
// What a pool x's division depends on, and so what marks it for a visit:
//   - the demand its leaves bring into it (E less the own layer less their
//     parts of the pools below x): a leaf is pending in every pool of its
//     path above the change;
//   - its classes (its private slots and what its children lend): rebuilt
//     when a child's lend or a child pool's leftover changed;
//   - where the slots sit (held, from the sittings of the hosts whose
//     holdings changed): a leaf's attribution is recomputed.

// incFoldable reports whether the pool's fold can be kept between events:
// share_ratio with preemption and balance (the divisions depend on demand
// alone) or priority, no max anywhere (no division takes room from
// another), and every lent class usable by every leaf (one class group per
// pool: the smallest lend_grace is at least the largest reclaim_grace).
func (p *Pool) incFoldable() bool {
	if p.t.hasMax || (p.mode.shareRatio && (!p.mode.preempt || !p.mode.balance)) || p.seatsByRounds() {
		return false
	}
	return p.inc.oneGroup(p.t)
}

// incFold is the kept state; ready is false until built for the current
// tree (a plan event clears it). A host event keeps it: the parts it was
// folded for (partsGen) are then not the pool's, and fold brings it to
// the new ones (reparts).
type incFold struct {
	ready bool
	// partsGen: the pool's parts generation the state was folded for;
	// heldStale: the sittings cache was emptied (the parts changed), so
	// held no longer follows it host by host.
	partsGen  uint64
	heldStale bool
	parentEnf bool // enforcement: parent
	priority  bool // reclaim: priority (the pools divide from what is held, kept_priority.go)
	preempt   bool
	t         *tree
	single    bool       // oneGroup's answer for t
	pre       []int32    // by node id: position in depth-first preorder
	byPre     []int32    // the node at each position
	size      []int32    // by node id: nodes in its subtree
	pools     []*incPool // by node id: the pool of each parent (the root's is the public pool)
	order     []int32    // the parents deepest first, then path; the root last
	// orderAt: by node id, a pool's place in order; reclaiming: the pools
	// whose last division moved slots from one leaf to another.
	orderAt    []int32
	reclaiming []int32
	toVisit    []int32 // the pools to visit, in the fold's order
	owned      []Slots // by node id: the assignment's totals
	ownUse     []Slots // by node id: the own layer (leaves)
	eff        []Slots // by node id: the E the state is for (leaves)

	held   map[heldKey]Slots
	heldBy map[poolLeaf][]int32 // the lenders of held's entries, by (pool, leaf)
	lentBy map[poolLeaf][]int32 // the leaves sitting on a lender's slots, by (pool, lender)
	lentOn map[poolLeaf]Slots   // the slots they sit on, by (pool, lender)
	moved  []int32              // leaves whose E or waiting-since changed since the last fold (setEff, noteUnmet)

	// What the fold changed, for its reader (the placement) to take: the
	// leaves whose target moved, and those whose due shares (own layer,
	// parts, classes) may have.
	targetMoved, dueMoved leafSet

	sp splitter
	// rules4Classes: layeredFold's (keepSittings, handOutRest).
	rules4Classes bool
	// Scratch of one leaf's attribution (keeps) and of one
	// host's new sittings (noteResit).
	sitBuf   []classSitting
	keepBuf  []lenderSlots
	resitBuf []heldChange
}

// incPool is one pool's kept division. Arrays are by local index: a node's
// preorder position less the pool's.
type incPool struct {
	// shareDivision: the division's state under share_ratio (and the
	// demand, planned split and G under priority); its at is pre[x].
	shareDivision
	x            int32
	leaves       []int32 // x's leaves in path order
	unrestricted Slots
	classes      []lentSlots // the division's classes in the group's order
	leftover     []lentSlots // what it passed upward, in the group's order
	classesDirty bool
	queued       bool      // in the fold's toVisit
	held         *heldPool // priority's state (nil under share_ratio)
	// setGuarantee records a leaf's G (setG), as the water-fill of
	// priority's guarantees tells it.
	setGuarantee func(l int32, g Slots)

	pending, attr         []int32 // leaves to revisit: entering demand, attribution
	pendingMark, attrMark []bool

	keeps     [][]lenderSlots // by local leaf: what it keeps of the classes it sits on
	rest      []Slots         // by local leaf: its part not kept
	restTakes [][]lenderSlots // by local leaf: where its rest came from
	restSet   []int32         // leaves that had rest > 0 (filtered when used)
	restMark  []bool
	keepSum   map[int32]Slots // by class lender: the keeps on it
	cutLeaves []int32         // the leaves whose keeps the last coupled pass made (coupleKeeps)
}

// lenderSlots is a number of slots of one class (by lender).
type lenderSlots struct {
	lender int32
	slots  Slots
}

// nodeAt is the node at local index i.
func (pl *incPool) nodeAt(i int32, f *incFold) int32 { return f.byPre[pl.at+i] }

// oneGroup: the smallest lend_grace of the tree is at least its largest
// reclaim_grace, so every class is usable by every leaf.
func (f *incFold) oneGroup(t *tree) bool {
	if f.t == t {
		return f.single
	}
	f.ready, f.t = false, t
	minLend, maxReclaim := t.nodes[0].lendGrace, t.nodes[0].reclaimGrace
	for i := range t.nodes {
		n := &t.nodes[i]
		if i > 0 {
			minLend = min(minLend, n.lendGrace)
		}
		if n.leaf {
			maxReclaim = max(maxReclaim, n.reclaimGrace)
		}
	}
	f.single = minLend >= maxReclaim
	return f.single
}

// noteEff records that a leaf's E or waiting-since changed (setEff,
// noteUnmet).
func (f *incFold) noteEff(id int32) {
	if f.ready {
		f.moved = append(f.moved, id)
	}
}

// fold brings the kept state up to date; it reports whether it was
// built from scratch (every target is then to be taken).
func (f *incFold) fold(p *Pool, parts []hostPart, tot ownTotals) (built bool) {
	switch {
	case !f.ready:
		f.build(p, parts, tot)
		built = true
	case f.partsGen != p.partsGen || f.heldStale:
		f.reparts(p, parts, tot)
		f.takeMoved(p.t)
	default:
		p.refreshSittings(parts)
		f.takeMoved(p.t)
	}
	f.partsGen = p.partsGen
	f.moved = f.moved[:0]
	// A visit marks only pools above the one visited, later in the
	// order: the list is worked from its front.
	for len(f.toVisit) > 0 {
		pl := f.pools[f.toVisit[0]]
		f.toVisit = f.toVisit[1:]
		f.divide(p.t, pl) // still queued while divided: what it marks in itself it takes in
		pl.queued = false
	}
	return built
}

// noteTarget records that leaf l's target and due shares may have moved;
// noteDue, its due shares only.
func (f *incFold) noteTarget(l int32) {
	f.targetMoved.add(l)
	f.dueMoved.add(l)
}

func (f *incFold) noteDue(l int32) { f.dueMoved.add(l) }

// target is leaf l's layered target: its own layer and its parts.
func (f *incFold) target(t *tree, l int32) Slots {
	k := f.ownUse[l]
	for a := t.nodes[l].parent; a != noNode; a = t.nodes[a].parent {
		pa := f.pools[a]
		k += pa.part[pa.loc(l)]
	}
	return k
}

// dueOf hands out leaf l's due shares: its own layer, then its takes of
// each pool, by whose parts they are.
func (f *incFold) dueOf(t *tree, l int32, add func(dueShare)) {
	if k := f.ownUse[l]; k > 0 {
		add(dueShare{owner: l, want: k})
	}
	for a := t.nodes[l].parent; a != noNode; a = t.nodes[a].parent {
		pa := f.pools[a]
		i := pa.loc(l)
		if pa.part[i] == 0 {
			continue
		}
		ent := pa.entitled(i)
		for _, list := range [2][]lenderSlots{pa.keeps[i], pa.restTakes[i]} {
			for _, k := range list {
				e := minSlots(k.slots, ent)
				ent -= e
				add(dueShare{owner: poolTake{pool: a, lender: k.lender}.takeOwner(), want: k.slots, ent: e})
			}
		}
	}
}

// appendDue appends leaf l's due shares to due, one per owner (wants
// only: what isolatedKeep needs).
func (f *incFold) appendDue(t *tree, l int32, due []dueShare) []dueShare {
	add := func(owner int32, k Slots) {
		for i := range due {
			if due[i].owner == owner {
				due[i].want += k
				return
			}
		}
		due = append(due, dueShare{owner: owner, want: k})
	}
	if k := f.ownUse[l]; k > 0 {
		add(l, k)
	}
	for a := t.nodes[l].parent; a != noNode; a = t.nodes[a].parent {
		pa := f.pools[a]
		i := pa.loc(l)
		if pa.part[i] == 0 {
			continue
		}
		for _, list := range [2][]lenderSlots{pa.keeps[i], pa.restTakes[i]} {
			for _, k := range list {
				add(poolTake{pool: a, lender: k.lender}.takeOwner(), k.slots)
			}
		}
	}
	return due
}

// entitled is how much of a leaf's part is within its guarantee
// (priority; 0 under share_ratio).
func (pl *incPool) entitled(i int32) Slots {
	if pl.held == nil {
		return 0
	}
	return minSlots(pl.part[i], pl.held.g[i])
}

// transfers lists what the pools' reclaims moved, pools in the fold's
// order.
func (f *incFold) transfers() []transfer {
	var out []transfer
	for _, x := range f.reclaiming {
		out = append(out, f.pools[x].held.transfers...)
	}
	return out
}

// noteTransfers keeps the list of pools whose last division moved slots
// (reclaiming, in the fold's order) as pool pl's transfers come and go.
func (f *incFold) noteTransfers(pl *incPool) {
	i, in := slices.BinarySearchFunc(f.reclaiming, pl.x, f.byOrder)
	switch has := len(pl.held.transfers) > 0; {
	case has && !in:
		f.reclaiming = slices.Insert(f.reclaiming, i, pl.x)
	case !has && in:
		f.reclaiming = slices.Delete(f.reclaiming, i, i+1)
	}
}

// byOrder compares pools by their place in the fold's order.
func (f *incFold) byOrder(a, b int32) int { return cmp.Compare(f.orderAt[a], f.orderAt[b]) }

// build makes the state from scratch: every pool, every leaf revisited.
func (f *incFold) build(p *Pool, parts []hostPart, tot ownTotals) {
	t := p.t
	n := len(t.nodes)
	f.pre, f.size, f.byPre = make([]int32, n), make([]int32, n), make([]int32, n)
	var walk func(id int32, at int32) int32
	walk = func(id, at int32) int32 {
		f.pre[id], f.byPre[at] = at, id
		next := at + 1
		for _, c := range t.nodes[id].children {
			next = walk(c, next)
		}
		f.size[id] = next - at
		return next
	}
	walk(0, 0)
	f.parentEnf, f.priority, f.preempt = p.mode.parent, !p.mode.shareRatio, p.mode.preempt
	f.rules4Classes = p.mode.behaviour.excessInReleaseOrder
	f.owned, f.ownUse, f.eff = tot.owned, make([]Slots, n), make([]Slots, n)
	f.targetMoved.reset(n)
	f.dueMoved.reset(n)
	f.pools = make([]*incPool, n)
	f.order = (&layeredFold{t: t}).poolOrder()
	f.orderAt, f.reclaiming = make([]int32, n), f.reclaiming[:0]
	for i, x := range f.order {
		f.orderAt[x] = int32(i)
	}
	f.toVisit = f.toVisit[:0]
	for _, x := range f.order {
		f.pools[x] = f.newPool(t, x, tot)
		f.visit(f.pools[x])
	}
	f.held, f.heldBy, f.lentBy, f.lentOn = map[heldKey]Slots{}, map[poolLeaf][]int32{}, map[poolLeaf][]int32{}, map[poolLeaf]Slots{}
	f.ready = false // the sittings are computed first, then noted once
	sits := p.sittings(parts)
	f.ready, f.heldStale = true, false
	f.noteSittings(t, parts, sits, 1)
	for _, l := range t.leaves {
		f.eff[l] = t.nodes[l].eff
		f.ownUse[l] = minSlots(f.eff[l], f.owned[l])
		f.markPending(t, l, t.nodes[l].parent)
		f.noteTarget(l)
	}
}

func (f *incFold) newPool(t *tree, x int32, tot ownTotals) *incPool {
	k := f.size[x]
	nd := &t.nodes[x]
	pl := &incPool{shareDivision: newShareDivision(f.pre, f.pre[x], k), x: x, leaves: slices.Sorted(slices.Values(t.leaves[nd.lo:nd.hi])), classesDirty: true,
		pendingMark: make([]bool, k), attrMark: make([]bool, k),
		keeps: make([][]lenderSlots, k), rest: make([]Slots, k), restTakes: make([][]lenderSlots, k), restMark: make([]bool, k),
		keepSum: map[int32]Slots{}}
	// A leaf's new part: its attribution is redone, and the demand it
	// brings into the pools above changes (a parent's part is its leaves'
	// sum).
	pl.moved = func(l int32) {
		if !t.nodes[l].leaf {
			return
		}
		f.noteTarget(l)
		f.markAttr(pl.x, l)
		f.markPending(t, l, t.nodes[pl.x].parent)
	}
	pl.setGuarantee = func(l int32, g Slots) { f.setG(pl, l, g) }
	if f.priority {
		pl.held = f.newHeldPool(t, pl, k)
	}
	pl.unrestricted = tot.public
	if x != 0 {
		pl.unrestricted = tot.private[x]
	}
	return pl
}

// reparts brings the kept state to new parts (a host event changed the
// hosts or the assignment; the tree is the same): what each pool has
// unrestricted, what each leaf owns (its own layer and what it lends),
// and held, from every host's sittings under the new parts. Only what
// moved is marked, so the fold then visits what build would have
// divided differently, and nothing else.
func (f *incFold) reparts(p *Pool, parts []hostPart, tot ownTotals) {
	t := p.t
	for _, x := range f.order {
		pl := f.pools[x]
		u := tot.public
		if x != 0 {
			u = tot.private[x]
		}
		if u != pl.unrestricted {
			pl.unrestricted = u
			f.dirtyClasses(x)
		}
	}
	before := f.owned
	f.owned = tot.owned
	for _, l := range t.leaves {
		if before[l] == f.owned[l] {
			continue
		}
		f.dirtyClasses(t.nodes[l].parent) // what it lends
		if use := minSlots(f.eff[l], f.owned[l]); use != f.ownUse[l] {
			f.ownUse[l] = use
			f.noteTarget(l)
			f.markPending(t, l, t.nodes[l].parent)
		}
	}
	// held: the sittings cache follows the new parts host by host
	// (carrySittings), held with it; after the cache was emptied, every
	// entry out, every new sitting in, netted by key (in key order: no map
	// order reaches the fold).
	p.sitsFor(parts)
	if !f.heldStale {
		p.refreshSittings(parts)
		return
	}
	f.ready = false // the sittings are computed first, then noted once
	sits := p.sittings(parts)
	f.ready, f.heldStale = true, false
	cs := f.resitBuf[:0]
	for _, k := range slices.SortedFunc(maps.Keys(f.held), heldKeyOrder) {
		cs = append(cs, heldChange{k, -f.held[k]})
	}
	for _, s := range sits {
		if k, ok := sittingKey(t, parts, s); ok {
			cs = append(cs, heldChange{k, s.slots})
		}
	}
	f.resitBuf = cs
	f.addHeldChanges(cs)
}

// takeMoved revisits the leaves whose E changed: their own layer, what
// they lend, and the demand they bring into every pool above.
func (f *incFold) takeMoved(t *tree) {
	for _, l := range f.moved {
		e := t.nodes[l].eff
		if e == f.eff[l] {
			if f.priority { // its waiting-since moved: the pools' orders
				f.markPending(t, l, t.nodes[l].parent)
			}
			continue
		}
		f.eff[l] = e
		if use := minSlots(e, f.owned[l]); use != f.ownUse[l] {
			f.ownUse[l] = use
			f.dirtyClasses(t.nodes[l].parent)
			f.noteTarget(l)
		}
		f.markPending(t, l, t.nodes[l].parent)
	}
}

// markPending notes that the demand leaf l brings into the pools from
// pool a up to the public pool may have changed.
func (f *incFold) markPending(t *tree, l, a int32) {
	for ; a != noNode; a = t.nodes[a].parent {
		pl := f.pools[a]
		if i := pl.loc(l); !pl.pendingMark[i] {
			pl.pendingMark[i] = true
			pl.pending = append(pl.pending, l)
			f.visit(pl)
		}
	}
}

// visit queues pool pl for the fold, in the fold's order.
func (f *incFold) visit(pl *incPool) {
	if pl.queued {
		return
	}
	pl.queued = true
	i, _ := slices.BinarySearchFunc(f.toVisit, pl.x, f.byOrder)
	f.toVisit = slices.Insert(f.toVisit, i, pl.x)
}

// dirtyClasses notes that pool x's classes must be rebuilt.
func (f *incFold) dirtyClasses(x int32) {
	pl := f.pools[x]
	pl.classesDirty = true
	f.visit(pl)
}

// markAttr notes that leaf l's attribution in pool x must be recomputed.
func (f *incFold) markAttr(x, l int32) {
	pl := f.pools[x]
	if i := pl.loc(l); !pl.attrMark[i] {
		pl.attrMark[i] = true
		pl.attr = append(pl.attr, l)
		f.visit(pl)
	}
}

// entering is the demand leaf l brings into pool x: E less the own layer
// less its parts of the pools below x.
func (f *incFold) entering(t *tree, l, x int32) Slots {
	d := f.eff[l] - f.ownUse[l]
	for a := t.nodes[l].parent; a != x; a = t.nodes[a].parent {
		pa := f.pools[a]
		d -= pa.part[pa.loc(l)]
	}
	return d
}

// divide revisits one pool: its classes, the demand entering it, its
// division and its attribution; what changed is passed upward.
func (f *incFold) divide(t *tree, pl *incPool) {
	if pl.classesDirty {
		f.rebuildClasses(t, pl)
	}
	for _, l := range pl.pending {
		i := pl.loc(l)
		pl.pendingMark[i] = false
		d := f.entering(t, l, pl.x)
		if pl.held != nil {
			f.activate(pl, l) // its waiting-since may have moved too
		}
		delta := d - pl.eff[i]
		if delta == 0 {
			continue
		}
		if f.rules4Classes { // its keeps depend on what it brings (keepSittings)
			f.markAttr(pl.x, l)
		}
		for a := l; ; a = t.nodes[a].parent {
			j := pl.loc(a)
			pl.eff[j] += delta
			pl.dirty[j] = true
			if a == pl.x {
				break
			}
		}
	}
	pl.pending = pl.pending[:0]
	c := Slots(0)
	for _, s := range pl.classes {
		c += s.slots
	}
	switch {
	case pl.held != nil:
		f.divideHeldKept(t, pl, c)
	case f.parentEnf:
		pl.waterFill(t, &f.sp, pl.x, minSlots(c, pl.eff[0]), nil)
	default:
		b := pl.dynamicShares(t, &f.sp, pl.x, c)
		pl.surplus(t, &f.sp, pl.x, minSlots(c, pl.eff[0])-b)
	}
	f.attribute(t, pl)
}

// output is the layered targets of the kept state.
func (f *incFold) output(t *tree) layeredTargets {
	n := len(t.nodes)
	out := layeredTargets{ownUse: f.ownUse, target: make([]Slots, n)}
	for _, x := range f.order {
		pl := f.pools[x]
		for _, l := range pl.leaves {
			i := pl.loc(l)
			if pl.part[i] == 0 {
				continue
			}
			out.target[l] += pl.part[i]
			ent := pl.entitled(i)
			for _, lists := range [2][]lenderSlots{pl.keeps[i], pl.restTakes[i]} {
				for _, k := range lists {
					e := minSlots(k.slots, ent)
					ent -= e
					out.takes = append(out.takes, poolTake{pool: x, leaf: l, lender: k.lender, slots: k.slots, entitled: e})
				}
			}
		}
	}
	for _, l := range t.leaves {
		out.target[l] += f.ownUse[l]
	}
	out.transfers = f.transfers()
	for id := n - 1; id > 0; id-- { // children before parents
		if nd := &t.nodes[id]; !nd.leaf {
			for _, c := range nd.children {
				out.target[id] += out.target[c]
			}
		}
	}
	return out
}

// noteSittings adds (sign 1) or takes away (-1) one host's sittings from
// held, the slots each leaf sits on by pool and lender (heldByPool).
func (f *incFold) noteSittings(t *tree, parts []hostPart, sits []sitting, sign Slots) {
	for _, s := range sits {
		if k, ok := sittingKey(t, parts, s); ok {
			f.addHeld(k, sign*s.slots)
		}
	}
}

// noteResit replaces one host's sittings in held: only the entries whose
// amount changes are touched, so only their leaves redo their
// attribution.
func (f *incFold) noteResit(t *tree, parts []hostPart, before, after []sitting) {
	for len(before) > 0 && len(after) > 0 && before[0] == after[0] { // the same sittings count the same
		before, after = before[1:], after[1:]
	}
	for len(before) > 0 && len(after) > 0 && before[len(before)-1] == after[len(after)-1] {
		before, after = before[:len(before)-1], after[:len(after)-1]
	}
	cs := f.resitBuf[:0]
	for _, s := range before {
		if k, ok := sittingKey(t, parts, s); ok {
			cs = append(cs, heldChange{k, -s.slots})
		}
	}
	for _, s := range after {
		if k, ok := sittingKey(t, parts, s); ok {
			cs = append(cs, heldChange{k, s.slots})
		}
	}
	f.resitBuf = cs
	f.addHeldChanges(cs)
}

// addHeldChanges applies changes of held, netted by key, in key order.
func (f *incFold) addHeldChanges(cs []heldChange) {
	slices.SortFunc(cs, func(a, b heldChange) int { return heldKeyOrder(a.k, b.k) })
	for i := 0; i < len(cs); {
		j, d := i, Slots(0)
		for ; j < len(cs) && cs[j].k == cs[i].k; j++ {
			d += cs[j].d
		}
		f.addHeld(cs[i].k, d)
		i = j
	}
}

// heldKeyOrder orders held's keys: pool, leaf, lender.
func heldKeyOrder(a, b heldKey) int {
	return cmp.Or(cmp.Compare(a.pool, b.pool), cmp.Compare(a.leaf, b.leaf), cmp.Compare(a.lender, b.lender))
}

// heldChange is a change of one held entry.
type heldChange struct {
	k heldKey
	d Slots
}

// sittingKey is the held entry a sitting counts for; false for a leaf's
// own slots (the own layer).
func sittingKey(t *tree, parts []hostPart, s sitting) (heldKey, bool) {
	switch o := parts[s.part].owner; {
	case o == s.leaf:
		return heldKey{}, false
	case o == noNode:
		return heldKey{pool: 0, leaf: s.leaf, lender: noNode}, true
	case t.contains(o, s.leaf):
		return heldKey{pool: o, leaf: s.leaf, lender: noNode}, true
	default:
		return heldKey{pool: t.commonAncestor(o, s.leaf), leaf: s.leaf, lender: o}, true
	}
}

// addHeld changes one entry of held and its indexes; the leaf's
// attribution in the pool is redone.
func (f *incFold) addHeld(k heldKey, d Slots) {
	if d == 0 {
		return
	}
	before := f.held[k]
	after := before + d
	if after == 0 {
		delete(f.held, k)
	} else {
		f.held[k] = after
	}
	byLeaf, byLender := poolLeaf{k.pool, k.leaf}, poolLeaf{k.pool, k.lender}
	if k.lender != noNode {
		f.lentOn[byLender] += d
	}
	switch {
	case before == 0:
		f.heldBy[byLeaf] = append(f.heldBy[byLeaf], k.lender)
		if k.lender != noNode {
			ls := f.lentBy[byLender]
			i, _ := slices.BinarySearch(ls, k.leaf)
			f.lentBy[byLender] = slices.Insert(ls, i, k.leaf)
		}
	case after == 0:
		f.heldBy[byLeaf] = slices.DeleteFunc(f.heldBy[byLeaf], func(l int32) bool { return l == k.lender })
		if k.lender != noNode {
			f.lentBy[byLender] = slices.DeleteFunc(f.lentBy[byLender], func(l int32) bool { return l == k.leaf })
		}
	}
	f.markAttr(k.pool, k.leaf)
}
