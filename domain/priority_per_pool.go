package domain

import (
	"math"
	"slices"
	"time"
)

// Rules 4's priority with lent classes (rules-v4 ruling 1,
// docs/rules.md#version-4): a pool is divided once, over all its slots S
// (its own and every class lent into it), with G the planned share of S
// over the pool's subtree; section 4's three steps (entitled grants, borrow
// grants, with preemption the reclaim) run once over the pool, on what each
// leaf sits on in it. Classes only restrict which slots a leaf takes: a
// grant takes free slots of the classes it may use in the pool's class
// order (class group by class group, the most restrictive first; within a
// group the pool's own slots first, then lent ones by grace, then lender),
// and a reclaim takes from a victim only slots of classes the claimant may
// use, in the same order; a victim with none is passed over for it.
// Versions 3 divided each class group apart, each with its own G, borrow
// cap and reclaim (divideHeld); with one class group the two are the same
// division, so a pool with one group takes divideHeld under every version
// (and the kept fold, kept_priority.go, which needs one group).

// poolClasses is one pool's classes in the pool's class order, with what
// each leaf of the division sits on in each.
type poolClasses struct {
	classes  []lentSlots
	eligible []time.Duration // by class: the largest reclaim_grace that may use it (-1: none)
	free     []Slots         // by class: not given yet
	hold     map[int32][]classSlots
	// underLender: rules 4's mayUse (docs/decisions.md #382).
	underLender bool
}

// classSlots is a number of slots of the class at index class of a pool.
// A leaf's hold lists the classes it was given in the pool's class order
// (a class it has none of is left out: a pool may have thousands of
// classes, and a leaf takes few).
type classSlots struct {
	class int
	slots Slots
}

// mayUse reports whether leaf l may take slots of class i: by its
// reclaim_grace, and under rules 4 a leaf under the class's lender in any
// case (its ancestor's private slots lent upward: ruling 8's "may hold"
// sets no grace for an ancestor's private part; docs/decisions.md #382).
func (pc *poolClasses) mayUse(t *tree, l int32, i int) bool {
	if pc.underLender {
		if o := pc.classes[i].lender; o != noNode && o != l && t.contains(o, l) {
			return true
		}
	}
	return pc.eligible[i] >= 0 && t.nodes[l].reclaimGrace <= pc.eligible[i]
}

// give gives leaf l k more slots of class i.
func (pc *poolClasses) give(l int32, i int, k Slots) {
	h := pc.hold[l]
	j, found := slices.BinarySearchFunc(h, i, func(c classSlots, i int) int { return c.class - i })
	if found {
		h[j].slots += k
		return
	}
	pc.hold[l] = slices.Insert(h, j, classSlots{class: i, slots: k})
}

// dividePriorityOnce divides pool(x), made of groups, once (ruling 1),
// records each leaf's part by class as given, and returns what is left of
// each class, in the pool's class order.
func (f *layeredFold) dividePriorityOnce(x int32, groups []classGroup) []lentSlots {
	pc := &poolClasses{hold: map[int32][]classSlots{}, underLender: f.underLender}
	size := Slots(0)
	for _, g := range groups {
		for _, s := range g.slots {
			pc.classes = append(pc.classes, s)
			pc.eligible = append(pc.eligible, g.eligible)
			pc.free = append(pc.free, s.slots)
			size += s.slots
		}
	}
	// Every leaf of the pool takes part with what earlier layers left it;
	// the classes decide which slots it may take.
	f.effs(x, time.Duration(math.MaxInt64))
	f.eff[x] = minSlots(f.eff[x], f.headroomOf(x))
	d := f.newDivision(x, size)
	f.plannedShares(x, size, d)
	if f.seat != nil { // ruling 12: the pool's tier is seated by rounds now
		f.seat.seatPool(f, x, pc, d)
	}
	aside := f.heldAbove(x, pc)
	if f.seat != nil && !f.policy.preempt && x != 0 {
		f.keptAbove(d) // after heldAbove, which reads the demand each leaf brings
	}
	outside := f.heldOutside(x, pc)
	f.keepPerClass(x, d, pc)
	kept := make(map[int32][]classSlots, len(pc.hold)) // by leaf: what it keeps where it sits, by class (none: nothing)
	f.keptBuf = f.keptBuf[:0]
	for _, l := range d.leaves {
		if h, ok := pc.hold[l]; ok {
			at := len(f.keptBuf)
			f.keptBuf = append(f.keptBuf, h...)
			kept[l] = f.keptBuf[at:len(f.keptBuf):len(f.keptBuf)]
		}
	}

	// d.leaves in the entitled and the borrow orders.
	f.entBuf = f.withDemand(f.entBuf[:0], f.orders().entitledIn(f.t, x))
	f.borBuf = f.withDemand(f.borBuf[:0], f.orders().borrowIn(f.t, x))
	entitled, borrowers := f.entBuf, f.borBuf
	entitledNeed := func(l int32) Slots { return minSlots(f.eff[l], d.g[l]) - d.cur[l] }
	for _, l := range entitled {
		f.takeFree(x, d, pc, l, entitledNeed(l))
	}
	for _, l := range borrowers {
		f.takeFree(x, d, pc, l, minSlots(f.eff[l], borrowCeiling(&f.t.nodes[l], d.g[l]))-d.cur[l])
	}
	if f.policy.preempt {
		for _, l := range entitled {
			f.reclaimPerClass(x, d, pc, l, entitledNeed(l))
		}
	}

	for _, l := range d.leaves {
		k := d.cur[l]
		if k <= 0 {
			continue
		}
		// G counts every class of the pool together (ruling 1): what the
		// leaf keeps where it sits is its guarantee first, in any class,
		// and only the rest of G is entitled among what it gains, so a
		// leaf already above G gains by borrowing (docs/decisions.md #327).
		// (Both walks go through the classes in the pool's order; a class
		// the leaf holds none of adds nothing.)
		ent := minSlots(k, d.g[l])
		hold, keep := pc.hold[l], kept[l]
		es := append(f.esBuf[:0], make([]Slots, len(hold))...)
		ks := append(f.ksBuf[:0], make([]Slots, len(hold))...)
		for j, kj := 0, 0; j < len(hold); j++ {
			for kj < len(keep) && keep[kj].class < hold[j].class {
				kj++
			}
			if kj < len(keep) && keep[kj].class == hold[j].class {
				ks[j] = minSlots(keep[kj].slots, hold[j].slots)
				e := minSlots(ks[j], ent)
				es[j], ent = e, ent-e
			}
		}
		ke := append(f.keBuf[:0], es...) // the entitled among what it keeps
		for j := range hold {
			e := minSlots(hold[j].slots-es[j], ent)
			es[j], ent = es[j]+e, ent-e
		}
		for j, c := range hold {
			if c.slots > 0 {
				f.out.takes = append(f.out.takes, poolTake{pool: x, leaf: l, lender: pc.classes[c.class].lender, slots: c.slots, entitled: es[j], kept: ks[j], keptEnt: ke[j]})
			}
		}
		f.esBuf, f.ksBuf, f.keBuf = es, ks, ke
		f.give(l, k)
	}
	if aside.slots > 0 {
		pc.free[aside.class] += aside.slots // they go up: held there
	}
	for i, n := range outside {
		pc.free[i] += n // they go up: held there
	}
	var left []lentSlots
	for i, c := range pc.classes {
		if pc.free[i] > 0 {
			c.slots = pc.free[i]
			left = append(left, c)
		}
	}
	return left
}

// keepPerClass starts the division as startHeld does, every leaf with
// demand keeping what it sits on in the pool (keepers' order), class by
// class: within its demand, the classes' sizes and the room under every
// max; a leaf keeping less than it sits on keeps the most restrictive
// classes first and gives up the pool's own slots first, which every leaf
// of the pool may take (docs/decisions.md #207).
func (f *layeredFold) keepPerClass(x int32, d *heldDivision, pc *poolClasses) {
	keepOrder := make([]int, 0, len(pc.classes))
	for i, c := range pc.classes {
		if c.lender != noNode {
			keepOrder = append(keepOrder, i)
		}
	}
	for i, c := range pc.classes {
		if c.lender == noNode {
			keepOrder = append(keepOrder, i)
		}
	}
	// A leaf's classes are looked up from the lenders it sits on
	// (heldBy), in keepOrder: a pool has as many classes as lenders, and
	// most leaves sit on few of them.
	pos := make([]int, len(pc.classes))
	for p, i := range keepOrder {
		pos[i] = p
	}
	idx := indexClasses(pc.classes)
	var buf []int // the keepers' classes, one backing array
	sitsOn := func(l int32) []int {
		at := len(buf)
		for _, lender := range f.heldBy[poolLeaf{x, l}] {
			buf = append(buf, idx[lender]...)
		}
		is := buf[at:]
		slices.SortFunc(is, func(a, b int) int { return pos[a] - pos[b] })
		is = slices.Compact(is)
		buf = buf[:at+len(is)]
		return is[:len(is):len(is)]
	}
	type keeper struct {
		leafSlots
		classes []int // the classes it sits on, in keepOrder
	}
	// A leaf that sits on nothing in the pool keeps nothing: it is left
	// out before the sort.
	keepers := make([]keeper, 0, len(d.leaves))
	for _, l := range d.leaves {
		if len(f.heldBy[poolLeaf{x, l}]) == 0 {
			continue
		}
		k := keeper{leafSlots: leafSlots{leaf: l}, classes: sitsOn(l)}
		for _, ci := range k.classes {
			k.slots += f.held[heldKey{pool: x, leaf: l, lender: pc.classes[ci].lender}]
		}
		if k.slots > 0 {
			keepers = append(keepers, k)
		}
	}
	slices.SortFunc(keepers, func(a, b keeper) int {
		return f.t.keeperOrder(a.leaf, a.slots, b.leaf, b.slots)
	})
	for _, k := range keepers {
		l := k.leaf
		want := minSlots(k.slots, f.eff[l])
		for _, i := range k.classes {
			hk := heldKey{pool: x, leaf: l, lender: pc.classes[i].lender}
			m := minSlots(minSlots(want, f.held[hk]), minSlots(pc.free[i], f.roomIn(x, d, l, noNode)))
			if m <= 0 {
				continue
			}
			f.held[hk] -= m
			pc.free[i] -= m
			pc.give(l, i, m)
			f.addCur(x, d, l, m)
			want -= m
		}
	}
}

// takeFree gives leaf l up to need free slots of the classes it may use,
// in the pool's class order.
func (f *layeredFold) takeFree(x int32, d *heldDivision, pc *poolClasses, l int32, need Slots) {
	for i := range pc.classes {
		if need <= 0 {
			return
		}
		if !pc.mayUse(f.t, l, i) {
			continue
		}
		if k := minSlots(minSlots(need, pc.free[i]), f.roomIn(x, d, l, noNode)); k > 0 {
			pc.free[i] -= k
			pc.give(l, i, k)
			f.addCur(x, d, l, k)
			need -= k
		}
	}
}

// reclaimPerClass is section 4's reclaim for entitled leaf l: victims in
// docs/rules.md#priority's victim order give, never below their G, slots
// of the classes l may use, in the pool's class order.
func (f *layeredFold) reclaimPerClass(x int32, d *heldDivision, pc *poolClasses, l int32, need Slots) {
	var blocked []int32
	for need > 0 {
		v := f.priorityVictim(x, d, l, blocked)
		if v == noNode {
			return
		}
		usable := Slots(0)
		for _, c := range pc.hold[v] {
			if pc.mayUse(f.t, l, c.class) {
				usable += c.slots
			}
		}
		give := minSlots(f.victimGives(x, d, l, v, need), usable)
		if give <= 0 {
			blocked = append(blocked, v)
			continue
		}
		hv := pc.hold[v]
		for j, left := 0, give; left > 0; j++ {
			c := &hv[j]
			if !pc.mayUse(f.t, l, c.class) {
				continue
			}
			m := minSlots(left, c.slots)
			c.slots -= m
			pc.give(l, c.class, m)
			left -= m
		}
		f.addCur(x, d, v, -give)
		f.addCur(x, d, l, give)
		f.out.transfers = append(f.out.transfers, transfer{claimant: l, victim: v, slots: give})
		need -= give
	}
}

// keptAbove: under rules 4 without preemption a leaf keeps what it sits
// on in the pools above private pool x (nothing moves, ruling 7), so x
// gives it at most its demand less that, never less than what it sits on
// in x; the pools above see the rest of its demand (#357's principle:
// a pool does not count as given what it cannot give; docs/decisions.md
// #405).
func (f *layeredFold) keptAbove(d *heldDivision) {
	for _, l := range d.leaves {
		if above := f.seat.left[l]; above > 0 {
			f.eff[l] = maxSlots(f.eff[l]-above, minSlots(f.eff[l], f.seat.inX[l]))
		}
	}
}

// heldOutside is, under rules 4 with preemption, by class of private
// pool x, the slots lent into x that leaves outside x's subtree sit on:
// on each host, what those leaves hold there beyond the room of the
// host's other parts, up to the lender's part's room once x's tier is
// seated. Such a leaf holds them in a pool above x (ruling 8), where it
// is no victim of x's division ("a victim is a leaf with a > G in the
// pool", ruling 1) and the lender, not x's leaves, takes them back by
// returns; so x divides them as neither free nor reclaimable, and they
// go up with its leftover, where their holders sit on them (engine
// dispute 44, docs/decisions.md #412). nil when nothing is set aside.
func (f *layeredFold) heldOutside(x int32, pc *poolClasses) []Slots {
	if !f.policy.preempt || f.seat == nil || x == 0 {
		return nil
	}
	s := f.seat
	var out []Slots
	var heldOn map[int32]Slots // by host: what outsiders still hold there, worked out once per pool
	for i, c := range pc.classes {
		if c.lender == noNode || pc.free[i] == 0 {
			continue
		}
		if heldOn == nil {
			heldOn = map[int32]Slots{}
		}
		n := Slots(0)
		for _, k := range s.partsOwnedBy(c.lender) {
			if s.room[k] == 0 {
				continue
			}
			h := s.parts[k].host
			held, ok := heldOn[h]
			if !ok {
				for _, o := range s.holdersOn(h) {
					if !s.t.contains(x, o) {
						held += s.restOn(o, h)
					}
				}
				heldOn[h] = held
			}
			otherRoom := Slots(0)
			for j := s.firstOn(h); j < len(s.parts) && s.parts[j].host == h; j++ {
				if j != k {
					otherRoom += s.room[j]
				}
			}
			n += minSlots(s.room[k], maxSlots(held-otherRoom, 0))
		}
		if n = minSlots(n, pc.free[i]); n > 0 {
			if out == nil {
				out = make([]Slots, len(pc.classes))
			}
			out[i] = n
			pc.free[i] -= n
		}
	}
	return out
}

// heldAbove is, under rules 4 without preemption (docs/decisions.md
// #357), the slots of private pool x's own parts that the pool's rounds
// did not seat and that x's own leaves hold there (within what each may
// still hold, and beyond the room of the host's other parts, where they
// may sit instead): ruling 12 counts them
// in the pool above (lent upward, a leaf of the branch seated there in
// round 3), and without preemption no leaf of the pool can take them (no
// reclaim, and a return takes back from outside the branch only). They
// are set aside from the pool's own class while it divides, so it gives
// its leaves only what they can be given, and passed upward with its
// leftover, where their holders sit on them. Under preemption the pool
// divides them as its own (a reclaim or a move brings them down).
func (f *layeredFold) heldAbove(x int32, pc *poolClasses) classSlots {
	if f.policy.preempt || f.seat == nil || x == 0 { // f.seat: rules 4 under priority
		return classSlots{}
	}
	own := slices.IndexFunc(pc.classes, func(c lentSlots) bool { return c.lender == noNode })
	if own < 0 || pc.free[own] == 0 {
		return classSlots{}
	}
	s := f.seat
	xn := &s.t.nodes[x]
	members := s.t.leaves[xn.lo:xn.hi]
	n := Slots(0)
	for k := range s.parts {
		if s.parts[k].owner != x || s.room[k] == 0 {
			continue
		}
		h, on := s.parts[k].host, Slots(0)
		for _, l := range members {
			// within what it may still hold above (E' less what it
			// sits on here): the rest it gives back
			on += minSlots(s.restOn(l, h), maxSlots(f.eff[l]-s.inX[l], 0))
		}
		// what the rest of the host's room cannot seat sits on x's part
		for j := s.firstOn(h); j < len(s.parts) && s.parts[j].host == h; j++ {
			if j != k {
				on -= s.room[j]
			}
		}
		n += minSlots(maxSlots(on, 0), s.room[k])
	}
	n = minSlots(n, pc.free[own])
	pc.free[own] -= n
	return classSlots{class: own, slots: n}
}
