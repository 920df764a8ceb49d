package domain

import (
	"cmp"
	"slices"
	"time"
)

// Divisions of a pool that start from where the slots are now
// (docs/rules.md#layer-division). share_ratio with
// reclaim and balance divides a pool by its targets alone (layered_targets.go);
// every other policy keeps what leaves hold unless a rule takes it:
//
//   - priority: docs/rules.md#priority on the pool's slots, with G the
//     planned share of the division's slots over the pool's subtree:
//     entitled leaves first, then borrowers first come first served,
//     then (with preemption) entitled leaves still short reclaim from
//     borrowers, never below their G;
//   - share_ratio with preemption: false: leaves below their target are
//     served from free slots only, most under-served first;
//   - share_ratio with balance: false: reclaim restores the targets T0
//     (effective demand min(E, max(P, held))), then free slots go to the
//     leaves below their full target T.
//
// A leaf's slots in a pool are those it sits on in the pool's classes:
// the pool's own parts and the parts lent into it (seating.go,
// heldByPool). Orders the spec leaves open are docs/decisions.md
// #101-#104.

// divisionPolicy is how a pool is divided: the pool's policy as the
// layered targets see it.
type divisionPolicy struct {
	shareRatio bool
	preempt    bool
	balance    bool
}

// demandOnly: share_ratio with reclaim and balance, whose targets depend
// on demand alone.
func (d divisionPolicy) demandOnly() bool { return d.shareRatio && d.preempt && d.balance }

// heldKey names the slots a leaf sits on in pool(pool) that belong to
// lender (noNode: the pool's own slots).
type heldKey struct{ pool, leaf, lender int32 }

// heldSlots is where the slots sit, by heldKey: amount, and its keys in
// the order met (a map's order is not the engine's to use).
type heldSlots struct {
	amount map[heldKey]Slots
	keys   []heldKey
}

// heldDivision is the scratch of one division that starts from holdings,
// by node id: cur is a leaf's part (a parent's: the sum of its leaves'),
// g a leaf's guarantee G (priority), planned the static planned share of
// the division's slots.
type heldDivision struct {
	cur, g, planned []Slots
	leaves          []int32 // the division's leaves with demand, path order
	left            Slots   // slots of the division not given yet
	above           Slots   // room under the remaining max above the pool's parent
}

// divideHeld divides c slots of pool(x) made of classes among x's leaves
// whose reclaim_grace is at most eligible, starting from what they sit
// on, and returns each leaf's part in path order, recorded as given.
func (f *layeredFold) divideHeld(x int32, c Slots, eligible time.Duration, classes []lentSlots) []poolTake {
	f.effs(x, eligible)
	f.eff[x] = minSlots(f.eff[x], f.headroomOf(x))
	d := f.startHeld(x, c, classes)
	switch {
	case !f.policy.shareRatio:
		f.dividePriority(x, d)
	case f.policy.preempt && !f.policy.balance:
		f.divideGuarantees(x, c, d)
	default: // share_ratio without preemption
		f.eff[x] = minSlots(f.eff[x], c)
		if f.targets(x, c) {
			f.fillTo(x, d, f.got)
		}
	}
	var used []poolTake
	for _, l := range d.leaves {
		if k := d.cur[l]; k > 0 {
			u := poolTake{pool: x, leaf: l, slots: k}
			if !f.policy.shareRatio {
				u.entitled = minSlots(k, d.g[l])
			}
			used = append(used, u)
			f.give(l, k)
		}
	}
	return used
}

// startHeld sets up a division: every leaf with demand keeps what it sits on
// in the division's classes, within its demand, the division's size and the
// room under every max. When the division is smaller than what they sit on
// (an owner took lent slots back), the leaves keep in the reverse of the
// return order (docs/rules.md#ownership-placement): highest priority first,
// then fewest slots, then path descending, so the lowest priority, holding
// most, gives back first.
func (f *layeredFold) startHeld(x int32, c Slots, classes []lentSlots) *heldDivision {
	d := f.newDivision(x, c)
	idx := indexClasses(classes)
	keepers := make([]leafSlots, len(d.leaves)) // what each sits on in the division's classes
	for i, l := range d.leaves {
		keepers[i].leaf = l
		for _, st := range f.sittingsIn(x, l, classes, idx) {
			keepers[i].slots += st.slots
		}
	}
	slices.SortFunc(keepers, func(a, b leafSlots) int {
		return f.t.keeperOrder(a.leaf, a.slots, b.leaf, b.slots)
	})
	for _, k := range keepers {
		f.addCur(x, d, k.leaf, minSlots(minSlots(k.slots, f.eff[k.leaf]), minSlots(d.left, f.roomIn(x, d, k.leaf, noNode))))
	}
	f.plannedShares(x, c, d)
	return d
}

// newDivision readies the scratch of a division of c slots of pool(x):
// nothing given yet, the room its ancestors' max leaves, and the leaves of
// x with demand in it, in path order.
func (f *layeredFold) newDivision(x int32, c Slots) *heldDivision {
	n := len(f.t.nodes)
	d := &f.heldDiv
	if len(d.cur) != n {
		d.cur, d.g, d.planned = make([]Slots, n), make([]Slots, n), make([]Slots, n)
	}
	d.leaves, d.left, d.above = d.leaves[:0], c, Unlimited
	for a := f.t.nodes[x].parent; a > 0; a = f.t.nodes[a].parent {
		d.above = minSlots(d.above, f.remMax[a])
	}
	f.resetSubtree(x, d)
	xn := &f.t.nodes[x]
	for _, l := range f.t.leaves[xn.lo:xn.hi] {
		if f.eff[l] > 0 {
			d.leaves = append(d.leaves, l)
		}
	}
	slices.Sort(d.leaves)
	return d
}

// resetSubtree zeroes the division's scratch over x's subtree.
func (f *layeredFold) resetSubtree(id int32, d *heldDivision) {
	d.cur[id], d.g[id], d.planned[id] = 0, 0, 0
	for _, c := range f.t.nodes[id].children {
		f.resetSubtree(c, d)
	}
}

// addCur gives leaf l k more slots of the division (k may be negative),
// keeping the sums of its ancestors up to x.
func (f *layeredFold) addCur(x int32, d *heldDivision, l int32, k Slots) {
	if k == 0 {
		return
	}
	d.left -= k
	for a := l; ; a = f.t.nodes[a].parent {
		d.cur[a] += k
		if a == x {
			return
		}
	}
}

// roomIn is what leaf l may still be given in this division under the
// remaining max of its ancestors, leaving out those that also hold
// victim (a transfer inside them changes nothing; noNode: none).
func (f *layeredFold) roomIn(x int32, d *heldDivision, l, victim int32) Slots {
	room := Unlimited
	for a := f.t.nodes[l].parent; a > 0; a = f.t.nodes[a].parent {
		if victim != noNode && f.t.contains(a, victim) {
			return room
		}
		if m := f.remMax[a]; m != Unlimited {
			room = minSlots(room, maxSlots(m-d.cur[a], 0))
		}
		if a == x {
			break
		}
	}
	if victim == noNode && d.above != Unlimited {
		room = minSlots(room, maxSlots(d.above-d.cur[x], 0))
	}
	return room
}

// plannedShares computes the static planned share of the division's c
// slots over x's subtree (every consumer counts, with or without demand)
// and the guarantees G of priority: with leaf enforcement G = planned;
// with parent enforcement x's children get their planned share and, below
// them, G is split over the children with demand like T (capped by their
// effective demand), siblings first.
func (f *layeredFold) plannedShares(x int32, c Slots, d *heldDivision) {
	f.div.plannedShares(f.t, &f.sp, x, c, d.planned, nil, nil)
	if !f.parentEnf {
		copy(d.g, d.planned)
		return
	}
	setG := func(l int32, g Slots) { d.g[l] = g }
	for _, k := range f.t.nodes[x].children {
		f.div.markSubtree(f.t, k)
		f.div.waterFill(f.t, &f.sp, k, d.planned[k], setG)
	}
}

// dividePriority is reclaim: priority (docs/rules.md#priority) inside the
// division.
func (f *layeredFold) dividePriority(x int32, d *heldDivision) {
	entitled := slices.Clone(d.leaves)
	slices.SortFunc(entitled, f.t.entitledOrder)
	entitledNeed := func(l int32) Slots { return minSlots(f.eff[l], d.g[l]) - d.cur[l] }
	for _, l := range entitled {
		f.grantIn(x, d, l, entitledNeed(l))
	}
	borrowers := slices.Clone(d.leaves)
	slices.SortFunc(borrowers, f.t.borrowOrder)
	for _, l := range borrowers {
		f.grantIn(x, d, l, minSlots(f.eff[l], borrowCeiling(&f.t.nodes[l], d.g[l]))-d.cur[l])
	}
	if !f.policy.preempt {
		return
	}
	for _, l := range entitled {
		var blocked []int32
		for need := entitledNeed(l); need > 0; {
			v := f.priorityVictim(x, d, l, blocked)
			if v == noNode {
				break
			}
			give := f.victimGives(x, d, l, v, need)
			if give <= 0 {
				blocked = append(blocked, v)
				continue
			}
			f.addCur(x, d, v, -give)
			f.addCur(x, d, l, give)
			f.out.transfers = append(f.out.transfers, transfer{claimant: l, victim: v, slots: give})
			need -= give
		}
	}
}

// grantIn gives leaf l up to need free slots of the division.
func (f *layeredFold) grantIn(x int32, d *heldDivision, l int32, need Slots) {
	if k := minSlots(minSlots(need, d.left), f.roomIn(x, d, l, noNode)); k > 0 {
		f.addCur(x, d, l, k)
	}
}

// victimGives is what victim v gives claimant l of need under priority
// (docs/rules.md#priority): never below its G, within l's room, and with
// parent enforcement never taking v's branch (a child of x other than
// l's) below min(its planned share, its effective demand).
func (f *layeredFold) victimGives(x int32, d *heldDivision, l, v int32, need Slots) Slots {
	give := minSlots(minSlots(need, d.cur[v]-d.g[v]), f.roomIn(x, d, l, v))
	if f.parentEnf {
		if bv, bl := f.branchOf(x, v), f.branchOf(x, l); bv != bl {
			give = minSlots(give, d.cur[bv]-minSlots(d.planned[bv], f.eff[bv]))
		}
	}
	return give
}

// branchOf is the child of x whose subtree holds leaf l.
func (f *layeredFold) branchOf(x, l int32) int32 {
	for f.t.nodes[l].parent != x {
		l = f.t.nodes[l].parent
	}
	return l
}

// priorityVictim is the first leaf above its G, other than the claimant
// and those blocked, in docs/rules.md#priority's victim order evaluated
// now (victimOrder; a leaf's branch is the child of x above it).
func (f *layeredFold) priorityVictim(x int32, d *heldDivision, claimant int32, blocked []int32) int32 {
	best := noNode
	over := func(v int32) bool { b := f.branchOf(x, v); return d.cur[b] > d.planned[b] }
	for _, v := range d.leaves {
		if v == claimant || d.cur[v] <= d.g[v] || slices.Contains(blocked, v) {
			continue
		}
		if best == noNode {
			best = v
			continue
		}
		if f.t.victimOrder(v, over(v), d.cur[v]-d.g[v], best, over(best), d.cur[best]-d.g[best]) < 0 {
			best = v
		}
	}
	return best
}

// boolFirst orders true before false.
func boolFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// fillTo gives the leaves below their target tg free slots of the
// division, most under-served first ((tg - cur)/share, then priority
// desc, then path), without reclaim.
func (f *layeredFold) fillTo(x int32, d *heldDivision, tg []Slots) {
	claimants := f.below(d, tg)
	for _, l := range claimants {
		f.grantIn(x, d, l, tg[l]-d.cur[l])
	}
}

// below lists the division's leaves below tg in share_ratio's claimant
// order.
func (f *layeredFold) below(d *heldDivision, tg []Slots) []int32 {
	var out []int32
	for _, l := range d.leaves {
		if d.cur[l] < tg[l] {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b int32) int {
		x, y := &f.t.nodes[a], &f.t.nodes[b]
		return cmp.Or(cmpDesc(int64(tg[a]-d.cur[a])*y.share, int64(tg[b]-d.cur[b])*x.share),
			cmpDesc(x.priority, y.priority), cmp.Compare(a, b))
	})
	return out
}

// divideGuarantees is balance: false with preemption: the targets T0
// (every leaf's effective demand min(E, max(P, held))) are restored from
// free slots, then from the leaves above T0 in share_ratio's victim walk;
// then free slots go to the leaves below their full target T.
func (f *layeredFold) divideGuarantees(x int32, c Slots, d *heldDivision) {
	saved := slices.Clone(f.eff)
	for _, l := range d.leaves {
		f.eff[l] = minSlots(f.eff[l], maxSlots(d.planned[l], d.cur[l]))
	}
	f.sumEff(x)
	f.eff[x] = minSlots(minSlots(f.eff[x], f.headroomOf(x)), c)
	t0 := make([]Slots, len(f.t.nodes))
	if f.targets(x, c) {
		copy(t0, f.got)
	}
	copy(f.eff, saved)
	claimants := f.below(d, t0)
	victims := f.victimWalk(x, d, t0)
	for _, l := range claimants {
		need := t0[l] - d.cur[l]
		if k := minSlots(minSlots(need, d.left), f.roomIn(x, d, l, noNode)); k > 0 {
			f.addCur(x, d, l, k)
			need -= k
		}
		for _, v := range victims {
			if need == 0 {
				break
			}
			if give := minSlots(minSlots(need, d.cur[v]-t0[v]), f.roomIn(x, d, l, v)); give > 0 {
				f.addCur(x, d, v, -give)
				f.addCur(x, d, l, give)
				f.out.transfers = append(f.out.transfers, transfer{claimant: l, victim: v, slots: give})
				need -= give
			}
		}
	}
	f.eff[x] = minSlots(f.eff[x], c)
	if f.targets(x, c) {
		f.fillTo(x, d, f.got)
	}
}

// sumEff recomputes the effective demand of x's parents from their
// leaves, capped by their remaining max.
func (f *layeredFold) sumEff(x int32) {
	n := &f.t.nodes[x]
	if n.leaf {
		return
	}
	var sum Slots
	for _, c := range n.children {
		f.sumEff(c)
		sum += f.eff[c]
	}
	f.eff[x] = minSlots(f.remMax[x], sum)
}

// victimWalk lists the leaves above tg in share_ratio's victim order: a
// top-down walk visiting siblings by over-allocation per unit of share
// (cur - tg)/share, largest first, then lowest priority, then path.
func (f *layeredFold) victimWalk(x int32, d *heldDivision, tg []Slots) []int32 {
	tsum := slices.Clone(tg)
	var sum func(id int32) Slots
	sum = func(id int32) Slots {
		n := &f.t.nodes[id]
		if n.leaf {
			return tsum[id]
		}
		var s Slots
		for _, c := range n.children {
			s += sum(c)
		}
		tsum[id] = s
		return s
	}
	sum(x)
	var victims []int32
	for _, l := range d.leaves {
		if d.cur[l] > tg[l] {
			victims = append(victims, l)
		}
	}
	slices.SortFunc(victims, func(a, b int32) int {
		for f.t.nodes[a].depth > f.t.nodes[b].depth {
			a = f.t.nodes[a].parent
		}
		for f.t.nodes[b].depth > f.t.nodes[a].depth {
			b = f.t.nodes[b].parent
		}
		if a == b {
			return 0
		}
		for f.t.nodes[a].parent != f.t.nodes[b].parent {
			a, b = f.t.nodes[a].parent, f.t.nodes[b].parent
		}
		p, q := &f.t.nodes[a], &f.t.nodes[b]
		return cmp.Or(cmpDesc(int64(d.cur[a]-tsum[a])*q.share, int64(d.cur[b]-tsum[b])*p.share),
			cmp.Compare(p.priority, q.priority), cmp.Compare(a, b))
	})
	return victims
}
