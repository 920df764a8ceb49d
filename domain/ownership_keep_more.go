package domain

import (
	"cmp"
	"slices"
)

// Rules 4's step 1 of the placement keeps as much as some reading of the
// dues allows (docs/decisions.md #217). Step 1 keeps greedily, part by
// part in a fixed order: a holder that kept its slots on one part can
// leave another holder, due slots only of that part, with slots it must
// move although a seating keeping both exists (two leaves on a full host
// each due one lent slot and some public ones). Then an event with no new
// input moves work back and forth. keepMore raises what each holder keeps
// on a host along augmenting paths (another holder already kept moves to
// another part it is due, and so on), one slot at a time: nobody keeps
// less than the greedy pass gave it, so the orders of step 1 (who gives
// back first) still decide who keeps when not all can.

// keepMore raises what the holders of host h keep (left: by holder, not
// kept yet; amt: by holder, by part of the host, what it keeps there).
func (pl *placement) keepMore(h int32, left []Slots, amt [][]Slots) {
	i0, i1 := pl.partsOfHost(h)
	visited := make([]bool, i1-i0)
	for j := range left {
		for left[j] > 0 {
			clear(visited)
			if !pl.augmentKeep(h, i0, i1, j, amt, visited) {
				break
			}
			left[j]--
			pl.kept[h][j]++
		}
	}
}

// roomFor is the room part i has for leaf l in step 1: a leaf owner's
// part keeps what is reserved for the owner.
func (pl *placement) roomFor(i int, l int32) Slots {
	if l == pl.parts[i].owner {
		return pl.capRem[i]
	}
	return pl.capRem[i] - pl.reserved[i]
}

// keepOne records that holder j of host h keeps one more slot on part i.
func (pl *placement) keepOne(h int32, i0, i, j int, amt [][]Slots, k Slots) {
	l, owner := pl.holders[h][j].leaf, pl.parts[i].owner
	amt[j][i-i0] += k
	pl.touch(i)
	pl.capRem[i] -= k
	pl.keptSum[i] += k
	if l != owner {
		pl.keptElse[i] += k
	}
	d := pl.dueOf(l, owner)
	d.want -= k
	if k > 0 {
		d.ent -= d.keepEnt(k)
	}
}

// augmentKeep finds a part of host h for one more slot of holder j: one
// it is due with room, or one where another holder moves a slot to a part
// it is due in turn (parts visited once per path).
func (pl *placement) augmentKeep(h int32, i0, i1, j int, amt [][]Slots, visited []bool) bool {
	l := pl.holders[h][j].leaf
	due := func(i int) bool { d := pl.dueOf(l, pl.parts[i].owner); return d != nil && d.want > 0 }
	for i := i0; i < i1; i++ {
		if !visited[i-i0] && due(i) && pl.roomFor(i, l) > 0 {
			pl.keepOne(h, i0, i, j, amt, 1)
			return true
		}
	}
	for i := i0; i < i1; i++ {
		if visited[i-i0] || !due(i) || pl.roomFor(i, l) < 0 {
			continue
		}
		visited[i-i0] = true
		for j2 := range amt {
			if j2 == j || amt[j2][i-i0] == 0 {
				continue
			}
			d2 := pl.dueOf(pl.holders[h][j2].leaf, pl.parts[i].owner)
			ent := d2.ent
			pl.keepOne(h, i0, i, j2, amt, -1) // j2's slot leaves part i for another
			if pl.roomFor(i, l) > 0 && pl.augmentKeep(h, i0, i1, j2, amt, visited) {
				pl.keepOne(h, i0, i, j, amt, 1)
				return true
			}
			pl.keepOne(h, i0, i, j2, amt, 1)
			d2.ent = ent
		}
	}
	return false
}

// keepSwapped is rules 4's swap of returns (ruling 9, return_swap.go) at
// rest: an owner that, with reclaim_for_preference false, was given a
// borrower's compensation slot instead of taking its own slot back holds
// that slot while the borrower holds the owner's. At the next event the
// owner is due its own slots again and the borrower slots of the class
// the owner sits on; step 1 keeps both where they are, the owner's slot
// counted as its own use and the borrower's as that class, so the swap is
// not made again elsewhere (docs/decisions.md #219). Owners in path order,
// each of its parts in the order it uses them; borrowers in the return
// order.
func (pl *placement) keepSwapped(left map[int32][]Slots) {
	for _, o := range pl.leaves {
		for _, x := range pl.wants[o] { // its own parts and its ancestors' private parts (ruling 8), nearest first
			if x == noNode || (x != o && !pl.t.contains(x, o)) {
				continue
			}
			parts := pl.ownOrder[o]
			if x != o {
				parts = pl.idx.byOwner(x)
			}
			for _, i := range parts {
				for pl.want(o, x) > 0 && pl.takenBack(o, i) && pl.swapOne(o, x, i, left) {
				}
			}
		}
	}
}

// takenBack reports whether claimant o would take slots of part i back
// from borrowers: its own part's slots reserved for it, or room of an
// ancestor's private part not kept by anyone.
func (pl *placement) takenBack(o int32, i int) bool {
	if pl.parts[i].owner == o {
		return pl.reserved[i] > 0
	}
	return pl.roomFor(i, o) > 0
}

// swapOne keeps one borrower's slot on part i of x (x: o, or an ancestor
// of o, whose part o takes back) and one of o's slots elsewhere, as a
// swap; false when no pair is left.
func (pl *placement) swapOne(o, x int32, i int, left map[int32][]Slots) bool {
	h2 := pl.parts[i].host
	hs := pl.holders[h2]
	var borrowers []int
	for j, x := range hs {
		if x.leaf != o && left[h2][j] > 0 && !pl.t.contains(pl.parts[i].owner, x.leaf) && pl.t.mayUse(x.leaf, pl.parts[i].owner) {
			borrowers = append(borrowers, j)
		}
	}
	slices.SortFunc(borrowers, func(a, b int) int {
		x, y := &pl.t.nodes[hs[a].leaf], &pl.t.nodes[hs[b].leaf]
		return cmp.Or(cmp.Compare(x.priority, y.priority), cmpDesc(hs[a].slots, hs[b].slots), cmp.Compare(hs[a].leaf, hs[b].leaf))
	})
	for _, jb := range borrowers {
		b := hs[jb].leaf
		for _, h1 := range pl.hosts0 {
			jo := slices.IndexFunc(pl.holders[h1], func(x leafSlots) bool { return x.leaf == o })
			if jo < 0 || left[h1] == nil || left[h1][jo] == 0 {
				continue
			}
			k0, k1 := pl.partsOfHost(h1)
			for k := k0; k < k1; k++ {
				p := pl.parts[k].owner
				if p == x || !pl.t.mayUse(o, p) || pl.roomFor(k, o) <= 0 || pl.want(b, p) <= 0 {
					continue
				}
				if x == o {
					pl.touch(i)
					pl.reserved[i]--
				}
				pl.keepSlot(h2, jb, i, left)
				pl.keepSlot(h1, jo, k, left)
				pl.takeWant(b, p)
				pl.takeWant(o, x)
				return true
			}
		}
	}
	return false
}

// keepSlot records that holder j of host h keeps one more slot on part i.
func (pl *placement) keepSlot(h int32, j, i int, left map[int32][]Slots) {
	left[h][j]--
	pl.kept[h][j]++
	pl.touch(i)
	pl.capRem[i]--
	pl.keptSum[i]++
	if pl.holders[h][j].leaf != pl.parts[i].owner {
		pl.keptElse[i]++
	}
}

// takeWant counts one slot against leaf l's due of owner's parts.
func (pl *placement) takeWant(l, owner int32) {
	d := pl.dueOf(l, owner)
	d.want--
	d.ent -= d.keepEnt(1)
}
