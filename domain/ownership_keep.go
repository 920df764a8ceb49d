package domain

// The placement's step 1 (docs/rules.md#ownership-placement): what every
// holder keeps where it is (by the division's parts, or under rules 4 the
// seating), after what owners reserve (ownership_reserve.go).

import (
	"cmp"
	"slices"
)

// keep is step 1: host by host, part by part, the slots a leaf already
// holds on the host count for a part it is due slots of.
func (pl *placement) keep() {
	left := map[int32][]Slots{} // by host, by holder: not yet counted for a part
	var withParts []int32
	for _, h := range pl.hosts0 {
		if pl.hostAt[h] == len(pl.parts) { // down: no parts
			continue
		}
		hs := pl.holders[h]
		left[h], pl.kept[h] = make([]Slots, len(hs)), make([]Slots, len(hs))
		for j, x := range hs {
			left[h][j] = x.slots
		}
		withParts = append(withParts, h)
	}
	if pl.rules.keepSeating {
		if pl.rules.excessWithoutPreemption && pl.rules.seated != nil {
			// Ruling 5 under every policy: the owner's excess leaves in
			// the release order, not the last hosts (#404).
			pl.releaseExcessFirst(left)
		}
		// By leaf: what it may still keep beyond its own layer, E less
		// its own layer's use (ruling 5: the owner takes its own slots
		// back whatever it holds elsewhere, and gives back its excess
		// above E at once).
		budget := map[int32]Slots{}
		for _, l := range pl.leaves {
			budget[l] = maxSlots(pl.t.nodes[l].eff-pl.want(l, l), 0)
		}
		for _, h := range withParts {
			pl.keepSeated(h, left[h], budget)
		}
		return
	}
	if pl.rules.excessByReleaseOrder && pl.rules.seated != nil {
		pl.releaseExcessFirst(left)
	}
	// Leaves that keep all they hold first, host by host; then those
	// giving slots up keep on the hosts a claimant would use last (least
	// free, then name descending), so what they give up is where the
	// claimants go first (docs/rules.md#placement: a reclaim takes the
	// victim's slots from the host the claimant would use first).
	var amt map[int32][][]Slots // by host, by holder, by part of the host: kept there (rules 4's keepMore)
	if pl.rules.keepMore {
		amt = map[int32][][]Slots{}
		for _, h := range withParts {
			i0, i1 := pl.partsOfHost(h)
			amt[h] = make([][]Slots, len(left[h]))
			cells := make([]Slots, len(left[h])*(i1-i0)) // one allocation per host
			for j := range amt[h] {
				amt[h][j] = cells[j*(i1-i0) : (j+1)*(i1-i0) : (j+1)*(i1-i0)]
			}
		}
	}
	for _, h := range withParts {
		pl.keepOn(h, left[h], false, amt[h])
	}
	slices.SortFunc(withParts, func(a, b int32) int {
		x, y := &pl.hosts[a], &pl.hosts[b]
		return cmp.Or(cmp.Compare(x.free(), y.free()), cmp.Compare(y.name, x.name))
	})
	for _, h := range withParts {
		pl.keepOn(h, left[h], true, amt[h])
	}
	if pl.rules.keepMore {
		slices.Sort(withParts) // host order
		for _, h := range withParts {
			pl.keepMore(h, left[h], amt[h])
		}
		if !pl.rules.preferring {
			pl.keepSwapped(left)
		}
		pl.keepInstead(withParts, left)
	}
}

// keepInstead is rules 4's last keep with preemption (docs/decisions.md
// #329): a holder still sitting on slots it did not keep, and still due
// slots of other owners' parts, keeps more where it sits, on a part it
// may hold with room nobody else is due, and is due that much less
// elsewhere (takeDue): its count is the same, and a move happens only
// when a claimant needs the slot (ruling 7), not because the division
// took its share from another class first. withParts is in host order.
func (pl *placement) keepInstead(withParts []int32, left map[int32][]Slots) {
	dueElse := map[int32]Slots{} // by owner: what leaves are still due of its parts
	for _, l := range pl.leaves {
		for _, d := range pl.due[l] {
			dueElse[d.owner] += d.want
		}
	}
	for _, h := range withParts {
		i0, i1 := pl.partsOfHost(h)
		hs, kept := pl.holders[h], pl.kept[h]
		for j, x := range hs {
			l := x.leaf
			for i := i0; i < i1 && left[h][j] > 0; i++ {
				p := pl.parts[i]
				if p.owner == l || !pl.t.mayUse(l, p.owner) {
					continue
				}
				other := Slots(0)
				for _, d := range pl.due[l] {
					if d.owner != l && d.owner != p.owner {
						other += d.want
					}
				}
				need := minSlots(left[h][j], other)
				if k := minSlots(need, pl.capRem[i]-pl.reserved[i]-dueElse[p.owner]); k > 0 {
					before := slices.Clone(pl.due[l])
					pl.takeDue(l, p.owner, k)
					for w, d := range pl.due[l] {
						dueElse[d.owner] -= before[w].want - d.want
					}
					pl.keepOnPart(i, l, k, &left[h][j], &kept[j])
					need -= k
				}
				// A swap leaves every owner's parts due as much as before
				// (l keeps on p what c is no longer due of p's owner), so
				// only the part's room for l's keep bounds it.
				if room := pl.capRem[i] - pl.reserved[i]; need > 0 && pl.rules.swapDues && room > 0 {
					if k := pl.swapDues(l, p.owner, minSlots(need, room), dueElse); k > 0 {
						pl.keepOnPart(i, l, k, &left[h][j], &kept[j])
					}
				}
			}
		}
	}
}

// swapDues lets leaf l keep up to need more slots where it sits, on
// owner's part, when the part's room is due to other leaves that may take
// l's due of other owners' parts instead (docs/decisions.md #340): for
// each leaf c due owner's part (path order) and each of l's other dues,
// least preferred first, that c may hold, c is due that much of the other
// part and that much less of owner's, and l the reverse. Nobody's count
// changes, and nobody is moved only because the division gave l one
// class and c another that both may hold (ruling 7: a move only when a
// claimant needs the slot). Only dues outside a guarantee (ent 0) are
// swapped, so no grant changes its rule. It returns how many.
func (pl *placement) swapDues(l, owner int32, need Slots, dueElse map[int32]Slots) Slots {
	swapped := Slots(0)
	for _, c := range pl.leaves {
		if c == l || need == 0 {
			continue
		}
		dc := pl.dueOf(c, owner)
		if dc == nil || dc.want == 0 || dc.ent > 0 {
			continue
		}
		for w := len(pl.wants[l]) - 1; w >= 0 && need > 0 && dc.want > 0; w-- {
			o := pl.wants[l][w]
			if o == l || o == owner || !pl.t.mayUse(c, o) {
				continue
			}
			d := pl.dueOf(l, o)
			if d.want == 0 || d.ent > 0 {
				continue
			}
			s := minSlots(need, minSlots(dc.want, d.want))
			d.want -= s
			dc.want -= s
			dueElse[owner] -= s
			pl.addWant(c, dueShare{owner: o, want: s})
			pl.sortWants(c)
			need -= s
			swapped += s
			// dc may have moved: addWant can grow c's list
			dc = pl.dueOf(c, owner)
		}
	}
	return swapped
}

// keepSeated is rules 4's step 1 without preemption (ruling 7): on host h
// every holder keeps what it sits on in each part it may hold (the
// seating, docs/rules.md#seating), within the part's room less what the
// part's owner takes back (a return; borrowers in the return order give
// it), even above its target: nothing is moved or reclaimed without
// preemption, and the pool converges as work ends; but never above its
// demand E: its own part within its own layer's use first, the rest within
// E less that use (budget), what it holds beyond being released (rule
// release.moved, ruling 5's excess), on the last hosts in host order. What it keeps counts against its due of that part's
// owner first, then its other dues, least preferred first, so it is not
// placed elsewhere for them.
func (pl *placement) keepSeated(h int32, left []Slots, budget map[int32]Slots) {
	i0, i1 := pl.partsOfHost(h)
	hs, kept := pl.holders[h], pl.kept[h]
	var keepers []int
	for i := i0; i < i1; i++ {
		p := pl.parts[i]
		keepers = keepers[:0]
		for j, x := range hs {
			if left[j] > 0 && pl.t.mayUse(x.leaf, p.owner) {
				keepers = append(keepers, j)
			}
		}
		slices.SortFunc(keepers, func(a, b int) int { return pl.partKeepOrder(p, hs[a].leaf, hs[b].leaf, left[a], left[b]) })
		for _, j := range keepers {
			l := hs[j].leaf
			room := pl.capRem[i]
			if l != p.owner {
				room -= pl.reserved[i]
			}
			outsider := p.owner != noNode && pl.outsiderRoom != nil && !pl.t.contains(p.owner, l)
			if r, ok := pl.outsiderRoom[i]; ok && outsider {
				room = minSlots(room, r) // a parent's part its subtree takes back from (reserveTakeBacks)
			}
			seated := minSlots(left[j], pl.rules.seated(h, p.owner, l))
			own := Slots(0)
			if p.owner == l { // its own part: within its own layer's use first
				own = minSlots(minSlots(seated, room), pl.want(l, l))
			}
			k := own + minSlots(minSlots(seated-own, room-own), budget[l])
			if k <= 0 {
				continue
			}
			budget[l] -= k - own
			if _, ok := pl.outsiderRoom[i]; ok && outsider {
				pl.outsiderRoom[i] -= k
			}
			pl.takeDue(l, p.owner, k)
			pl.keepOnPart(i, l, k, &left[j], &kept[j])
		}
	}
}

// keepOnPart counts k slots holder l keeps on part i of its host (step
// 1); left and kept are the holder's entries on that host.
func (pl *placement) keepOnPart(i int, l int32, k Slots, left, kept *Slots) {
	pl.keptAt[partLeaf{i, l}] += k
	*left -= k
	*kept += k
	pl.touch(i)
	pl.capRem[i] -= k
	pl.keptSum[i] += k
	if l != pl.parts[i].owner {
		pl.keptElse[i] += k
	}
}

// takeDue counts k slots kept on owner's part against leaf l's due of
// owner's parts first, then its other dues, least preferred first (wants
// is in the order it uses them), but its own layer's: an owner takes its
// own slots back whatever it holds elsewhere (ruling 5).
func (pl *placement) takeDue(l, owner int32, k Slots) {
	if d := pl.dueOf(l, owner); d != nil {
		n := minSlots(k, d.want)
		d.want -= n
		d.ent -= d.keepEnt(n)
		k -= n
	}
	for w := len(pl.wants[l]) - 1; w >= 0 && k > 0; w-- {
		if pl.wants[l][w] == l {
			continue
		}
		d := pl.dueOf(l, pl.wants[l][w])
		n := minSlots(k, d.want)
		// A slot kept elsewhere stands in for what the leaf would borrow
		// of this due before what it is entitled to: its guarantee in
		// each pool is its own (ruling 1), so what it is still given
		// here is entitled as the pool's division says (#406).
		borrowed := d.want - d.ent
		d.want -= n
		d.ent -= minSlots(maxSlots(n-borrowed, 0), d.ent)
		k -= n
	}
}

// keepOn is step 1 on host h for the leaves giving slots up (losing) or
// the others.
func (pl *placement) keepOn(h int32, left []Slots, losing bool, amt [][]Slots) {
	i0, i1 := pl.partsOfHost(h)
	hs, kept := pl.holders[h], pl.kept[h]
	var keepers []int
	// First on the parts that are the holder's own tiers (its own part,
	// its ancestors' private parts, the public part), then on parts
	// others lend it: what a leaf already runs counts as its own slots
	// first, so what it gains on a lender's part is recorded as lent.
	passes := []int{1, 2}
	if pl.rules.restrictiveFirst {
		passes = []int{-1, 0, 1, 2}
	}
	// Who may keep on each part: a holder due something of its owner, and
	// a leaf's wants name every owner it is due anything of. Found from
	// the holders' wants, not by asking every holder at every part (a
	// host with many owners' group slots and many holders); in holder
	// order, as the keepers are taken.
	for len(pl.keepCand) < i1-i0 {
		pl.keepCand = append(pl.keepCand, nil)
	}
	cand := pl.keepCand[:i1-i0] // their arrays kept from host to host
	for i := range cand {
		cand[i] = cand[i][:0]
	}
	if len(pl.ownerPart) != len(pl.t.nodes)+1 {
		pl.ownerPart = make([]int32, len(pl.t.nodes)+1)
	}
	for i := i0; i < i1; i++ { // by owner (noNode at 0): 1 + its part's index on the host; 0 between hosts
		pl.ownerPart[pl.parts[i].owner+1] = int32(i-i0) + 1
	}
	for j, x := range hs {
		for _, o := range pl.wants[x.leaf] {
			if k := pl.ownerPart[o+1]; k > 0 {
				cand[k-1] = append(cand[k-1], j)
			}
		}
	}
	for i := i0; i < i1; i++ {
		pl.ownerPart[pl.parts[i].owner+1] = 0
	}
	for _, pass := range passes {
		for i := i0; i < i1; i++ {
			p := pl.parts[i]
			keepers = keepers[:0]
			for _, j := range cand[i-i0] {
				x := hs[j]
				if left[j] > 0 && (pl.over[x.leaf] > 0) == losing && pl.keepPass(x.leaf, p.owner) == pass && pl.want(x.leaf, p.owner) > 0 {
					keepers = append(keepers, j)
				}
			}
			slices.SortFunc(keepers, func(a, b int) int { return pl.partKeepOrder(p, hs[a].leaf, hs[b].leaf, left[a], left[b]) })
			for _, j := range keepers {
				l := hs[j].leaf
				d := pl.dueOf(l, p.owner)
				room := pl.capRem[i]
				if l != p.owner {
					room -= pl.reserved[i]
				}
				k := minSlots(left[j], d.want)
				if room < k {
					k = room
					pl.cutAt = append(pl.cutAt, i)
				}
				if k <= 0 {
					continue
				}
				left[j] -= k
				kept[j] += k
				if amt != nil {
					amt[j][i-i0] += k
				}
				d.want -= k
				d.ent -= d.keepEnt(k) // what it holds counts as its guarantee first
				pl.touch(i)
				pl.capRem[i] -= k
				pl.keptSum[i] += k
				if l != p.owner {
					pl.keptElse[i] += k
				}
			}
		}
	}
}

// keepPass is the pass of step 1 in which leaf l keeps on owner's parts:
// its own tiers (1), then parts others lend it (2); under rules 4 parts
// lent in a restrictive class first (0; tree.restrictiveFor), after the
// leaf's own part (-1): what an owner runs is its own use first (section
// 5's own layer; docs/decisions.md #384).
func (pl *placement) keepPass(l, owner int32) int {
	switch {
	case owner == l && pl.rules.restrictiveFirst:
		return -1
	case !pl.lentTo(l, owner):
		return 1
	case pl.rules.restrictiveFirst && pl.t.restrictiveFor(l, owner):
		return 0
	}
	return 2
}

// lentTo reports whether owner's parts are lent to leaf l: neither its
// own, nor an ancestor's private part, nor public.
func (pl *placement) lentTo(l, owner int32) bool { return lentTo(pl.t, l, owner) }

func lentTo(t *tree, l, owner int32) bool {
	return owner != noNode && owner != l && !t.contains(owner, l)
}

// partKeepOrder is the order in which the placement's step 1 keeps the
// holders of one part of a host: the part's owner first, then priority
// desc, fewest slots on the host (not yet counted: la, lb), then path
// ascending. It is not the keepers' order of the divisions and the
// seating (tree.keeperOrder, path descending): the placement's is what
// rules v3 was released with, and its decisions are history
// (docs/decisions.md #98).
func (pl *placement) partKeepOrder(p hostPart, a, b int32, la, lb Slots) int {
	if (a == p.owner) != (b == p.owner) {
		if a == p.owner {
			return -1
		}
		return 1
	}
	x, y := &pl.t.nodes[a], &pl.t.nodes[b]
	if x.priority != y.priority {
		return cmpDesc(x.priority, y.priority)
	}
	if la != lb {
		return cmp.Compare(la, lb)
	}
	return cmp.Compare(a, b)
}
