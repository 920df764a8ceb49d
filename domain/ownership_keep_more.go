package domain

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
		d.ent -= minSlots(k, d.ent)
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
