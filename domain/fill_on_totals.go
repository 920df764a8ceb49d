package domain

import (
	"cmp"
	"container/heap"
	"slices"
	"time"
)

// Rules 4's share_ratio without preemption, with ownership (rules-v4
// ruling 4, docs/rules.md#version-4): counts are decided on each leaf's
// total, not pool by pool. The layered targets T are those of share_ratio
// with reclaim and balance (the fold computes them so); the placement keeps
// what every holder sits on (keepSeated, ruling 7) and the own layer's
// returns; then, in place of placing the division's parts:
//
//  1. fill: the leaves below T, in share_ratio's claimant order on T
//     computed once (largest (T - a)/share, then priority desc, then path),
//     each take, before the next is served, up to T - a free slots they may
//     take;
//  2. then any slot still free goes to the leaves with unmet demand
//     (E > a) that may take it, largest (E - a)/share first, then priority
//     desc, then path, each up to E within its ancestors' max.
//
// A leaf takes slots in fold order (foldOrder): its own parts, then its
// pools nearest first, the public pool last; within a pool class group by
// class group, the most restrictive first, the group holding the pool's
// own slots (the public part, in the public pool) last; within a group
// the pool's own slots first, then lent ones by lowest lend_grace, then
// lender (docs/decisions.md #323); within a part, the host with most free
// slots, then name. It
// may take a slot of o's part if it may hold it and no leaf nearer to o
// that may hold it has unmet demand and room under its max (mayTake).

// fillOnTotals is the placement's step 2 under ruling 4 without
// preemption.
func (pl *placement) fillOnTotals() {
	n := len(pl.t.nodes)
	cur := make([]Slots, n)
	for _, h := range pl.hosts0 {
		for j, x := range pl.holders[h] {
			if k := pl.kept[h]; k != nil {
				pl.hold(cur, x.leaf, k[j])
			}
		}
	}
	for _, l := range pl.byRank() { // the own layer first (its returns), within its ancestors' max
		before := pl.want(l, l)
		pl.placeOwnWithin(l, pl.headroom(l, cur))
		pl.hold(cur, l, before-pl.want(l, l))
	}
	order := func(gap func(l int32) Slots) []int32 {
		var out []int32
		for _, l := range pl.leaves {
			if gap(l) > 0 {
				out = append(out, l)
			}
		}
		slices.SortFunc(out, func(a, b int32) int {
			x, y := &pl.t.nodes[a], &pl.t.nodes[b]
			return cmp.Or(cmpDesc(int64(gap(a))*y.share, int64(gap(b))*x.share), cmpDesc(x.priority, y.priority), cmp.Compare(a, b))
		})
		return out
	}
	if pl.t0 != nil { // balance: false with reclaim: restore T0 first
		// Ruling 4: E0 reads a after the event's releases, trims and
		// the own layer's returns, which are made above (#403).
		t0 := pl.t0.compute(func(l int32) Slots { return cur[l] })
		victims := pl.victimWalk(t0, cur)
		for _, l := range order(func(l int32) Slots { return t0[l] - cur[l] }) {
			need := t0[l] - cur[l]
			need -= pl.takeFree(l, need, cur)
			for _, v := range victims {
				if need <= 0 {
					break
				}
				if give := minSlots(need, cur[v]-t0[v]); give > 0 {
					need -= pl.reclaimFrom(l, v, give, cur)
				}
			}
		}
	}
	for _, l := range order(func(l int32) Slots { return pl.target(l) - cur[l] }) {
		pl.takeFree(l, pl.target(l)-cur[l], cur)
		pl.takePrivateBack(l, pl.target(l)-cur[l], cur)
	}
	for _, l := range order(func(l int32) Slots { return pl.t.nodes[l].eff - cur[l] }) {
		pl.takeFree(l, minSlots(pl.t.nodes[l].eff-cur[l], pl.headroom(l, cur)), cur)
	}
}

// takeFree gives leaf l up to need free slots it may take, in its fold
// order, and returns how many.
func (pl *placement) takeFree(l int32, need Slots, cur []Slots) Slots {
	took := Slots(0)
	for _, o := range pl.foldOrder(l) {
		for need > 0 {
			i := pl.roomiest(o)
			if i < 0 || !pl.mayTake(l, o, cur) {
				break
			}
			k := minSlots(minSlots(need, pl.capRem[i]), pl.headroom(l, cur))
			if k <= 0 {
				return took
			}
			pl.touch(i)
			pl.capRem[i] -= k
			pl.placed = append(pl.placed, placing{leaf: l, part: i, slots: k, rule: pl.rules.grant})
			if h := pl.byOwner[o]; h != nil {
				heap.Push(h, partRoom{part: i, room: pl.capRem[i]})
			}
			pl.hold(cur, l, k)
			need -= k
			took += k
		}
	}
	return took
}

// reclaimFrom takes up to give of victim v's slots that leaf l may take,
// in l's fold order (an owner's parts in host order), and returns how
// many: the placement's pairing records them as reclaims from v. Under
// rules 4 v's slots on its own parts come last: v takes its own slots back
// at the next event whatever it holds elsewhere (ruling 5), which would
// undo the reclaim by a return (docs/decisions.md #246).
func (pl *placement) reclaimFrom(l, v int32, give Slots, cur []Slots) Slots {
	owners := pl.foldOrder(l)
	if pl.rules.victimOwnLast {
		owners = append(slices.DeleteFunc(slices.Clone(owners), func(o int32) bool { return o == v }),
			slices.DeleteFunc(slices.Clone(owners), func(o int32) bool { return o != v })...)
	}
	return pl.reclaimOn(l, v, give, cur, owners)
}

// reclaimOn is reclaimFrom on the parts of owners, in that order.
func (pl *placement) reclaimOn(l, v int32, give Slots, cur []Slots, owners []int32) Slots {
	took := Slots(0)
	for _, o := range owners {
		if give == 0 || !pl.mayTake(l, o, cur) {
			continue
		}
		for _, i := range pl.idx.byOwner(o) {
			n := minSlots(minSlots(give, pl.keptAt[partLeaf{i, v}]), pl.headroomFrom(l, v, cur))
			if n <= 0 {
				continue
			}
			h := pl.parts[i].host
			for j, x := range pl.holders[h] {
				if x.leaf == v {
					pl.kept[h][j] -= n
				}
			}
			pl.keptAt[partLeaf{i, v}] -= n
			pl.reclaimed[seatKey{host: h, leaf: v}] += n
			pl.over[v] += n
			pl.owed[l] = append(pl.owed[l], transfer{claimant: l, victim: v, slots: n})
			pl.placed = append(pl.placed, placing{leaf: l, part: i, slots: n, rule: pl.rules.grant})
			pl.hold(cur, v, -n)
			pl.hold(cur, l, n)
			give -= n
			took += n
		}
	}
	return took
}

// takePrivateBack has leaf l take back, up to need, the private slots of
// its ancestors (nearest first) that leaves outside the ancestor's subtree
// sit on, those in the return order giving back first: a slot privately
// owned by X is used outside X's subtree only while no descendant of X
// with unmet demand could use it (section 5's property; ruling 8: such a
// take-back is a return, under every policy; docs/decisions.md #324).
// The placement's pairing records it as a return.
func (pl *placement) takePrivateBack(l int32, need Slots, cur []Slots) {
	t := pl.t
	for x := t.nodes[l].parent; x > 0 && need > 0; x = t.nodes[x].parent {
		parts := pl.idx.byOwner(x)
		if len(parts) == 0 || !t.mayUse(l, x) {
			continue
		}
		type outsider struct {
			leaf  int32
			slots Slots
		}
		var outs []outsider
		for _, i := range parts {
			for _, h := range pl.holders[pl.parts[i].host] {
				if k := pl.keptAt[partLeaf{i, h.leaf}]; k > 0 && !t.contains(x, h.leaf) {
					j := slices.IndexFunc(outs, func(o outsider) bool { return o.leaf == h.leaf })
					if j < 0 {
						outs = append(outs, outsider{leaf: h.leaf})
						j = len(outs) - 1
					}
					outs[j].slots += k
				}
			}
		}
		slices.SortFunc(outs, func(a, b outsider) int { return -t.keeperOrder(a.leaf, a.slots, b.leaf, b.slots) })
		for _, o := range outs {
			if need <= 0 {
				break
			}
			need -= pl.reclaimOn(l, o.leaf, minSlots(need, o.slots), cur, []int32{x})
		}
	}
}

// victimWalk lists the leaves above t0 in share_ratio's victim walk on
// the leaves' totals (layeredFold.victimWalk over the whole pool).
func (pl *placement) victimWalk(t0, cur []Slots) []int32 {
	d := &heldDivision{cur: make([]Slots, len(pl.t.nodes)), leaves: pl.leaves}
	for _, l := range pl.leaves {
		for a := l; a >= 0; a = pl.t.nodes[a].parent {
			d.cur[a] += cur[l]
			if a == 0 {
				break
			}
		}
	}
	return (&layeredFold{t: pl.t}).victimWalk(0, d, t0)
}

// headroom is what leaf l may still be given under its ancestors' max.
// cur holds what each leaf holds as the placement goes and, at each
// parent, the sum of its leaves' (hold keeps both), so this costs l's
// depth, not its ancestors' subtrees.
func (pl *placement) headroom(l int32, cur []Slots) Slots { return pl.headroomFrom(l, noNode, cur) }

// headroomFrom is what leaf l may still take from leaf v (noNode: from
// free slots) under its ancestors' max: the ancestors l shares with v do
// not count, since what moves from v to l stays inside them.
func (pl *placement) headroomFrom(l, v int32, cur []Slots) Slots { return pl.t.headroomFrom(l, v, cur) }

func (t *tree) headroomFrom(l, v int32, cur []Slots) Slots {
	room := Unlimited
	for a := t.nodes[l].parent; a > 0 && (v == noNode || !t.contains(a, v)); a = t.nodes[a].parent {
		if n := &t.nodes[a]; n.maxCap != Unlimited {
			room = minSlots(room, maxSlots(n.maxCap-cur[a], 0))
		}
	}
	return room
}

// hold adds k to what leaf l holds in cur, and to each of its ancestors'
// sums there (headroom).
func (pl *placement) hold(cur []Slots, l int32, k Slots) { pl.t.hold(cur, l, k) }

func (t *tree) hold(cur []Slots, l int32, k Slots) {
	for a := l; a > 0; a = t.nodes[a].parent {
		cur[a] += k
	}
}

// mayTake reports whether leaf l may take a slot of owner's part: it may
// hold it, and no leaf nearer to the owner (its deepest common ancestor
// with the owner deeper than l's) that may hold it has unmet demand and
// room under its max. The public part (noNode) has no owner: anyone may.
func (pl *placement) mayTake(l, owner int32, cur []Slots) bool {
	if !pl.t.mayUse(l, owner) {
		return false
	}
	if owner == noNode || owner == l {
		return true
	}
	depth := pl.t.nodes[pl.t.commonAncestor(l, owner)].depth
	for _, x := range pl.leaves {
		if x == l || pl.t.nodes[pl.t.commonAncestor(x, owner)].depth <= depth || !pl.t.mayUse(x, owner) {
			continue
		}
		if pl.t.nodes[x].eff > cur[x] && pl.headroom(x, cur) > 0 {
			return false
		}
	}
	return true
}

// foldOrder lists the owners of the parts leaf l may hold in the order it
// takes them (see the file's comment).
func (pl *placement) foldOrder(l int32) []int32 {
	type place struct {
		owner    int32
		depth    int   // the pool's: its deepest common ancestor with l (-1: public)
		eligible int64 // the class group's (the pool's own slots: the largest)
		own      bool  // the pool's own slots
		grace    int64 // the class's
	}
	// A pool's own slots join the group every leaf of the pool may use
	// (the one keyed by the pool's widest reclaim_grace), first in it; the
	// public part is the root pool's own slots.
	var ps []place
	ownSlotsOf := func(pool, owner int32) place {
		return place{owner: owner, depth: int(pl.t.nodes[pool].depth), eligible: int64(pl.t.nodes[pool].widestGrace), own: true}
	}
	ps = append(ps, ownSlotsOf(0, noNode))
	seen := map[int32]bool{noNode: true}
	for _, part := range pl.parts {
		o := part.owner
		if seen[o] {
			continue
		}
		seen[o] = true
		if !pl.t.mayUse(l, o) {
			continue
		}
		if o == l {
			ps = append(ps, place{owner: o, depth: 1 << 30})
			continue
		}
		pool := pl.t.commonAncestor(l, o)
		if pool == o { // an ancestor's private part: the pool's own slots
			ps = append(ps, ownSlotsOf(pool, o))
			continue
		}
		g := pl.graceInto(o, pool)
		ps = append(ps, place{owner: o, depth: int(pl.t.nodes[pool].depth), eligible: pl.eligibleIn(pool, g), grace: int64(g)})
	}
	slices.SortFunc(ps, func(a, b place) int {
		return cmp.Or(cmpDesc(a.depth, b.depth), cmp.Compare(a.eligible, b.eligible), boolFirst(a.own, b.own),
			cmp.Compare(a.grace, b.grace), cmp.Compare(a.owner, b.owner))
	})
	out := make([]int32, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.owner)
	}
	return out
}

// graceInto is the grace of owner's slots lent into pool: the smallest
// lend_grace of the consumers they are lent through below it.
func (pl *placement) graceInto(owner, pool int32) time.Duration {
	g := time.Duration(1<<63 - 1)
	for o := owner; o != pool && o > 0; o = pl.t.nodes[o].parent {
		g = min(g, pl.t.nodes[o].lendGrace)
	}
	return g
}

// eligibleIn is the class group of a class of grace g in pool: the largest
// reclaim_grace of the pool's leaves that is at most g (-1: none).
func (pl *placement) eligibleIn(pool int32, g time.Duration) int64 {
	best := int64(-1)
	n := &pl.t.nodes[pool]
	for _, x := range pl.t.leaves[n.lo:n.hi] {
		if r := pl.t.nodes[x].reclaimGrace; r <= g && int64(r) > best {
			best = int64(r)
		}
	}
	return best
}
