package domain

// What owners reserve of their parts before the placement's step 1 keeps
// anyone (docs/rules.md#ownership-placement): a leaf owner its own slots
// for its own use, and under rules 4 without preemption a parent owner's
// leaves the parent's private slots that outsiders sit on (ruling 8).

import (
	"cmp"
	"slices"
)

// reserve orders each leaf owner's parts and keeps what it still needs of
// its own slots on them, by preference (desc), then most slots, then host
// name. Unless the pool reclaims for preference, the owner first takes
// the free slots of its parts in that order, and reserves the slots
// borrowers hold (returns) only for what is still missing. Borrowers keep
// only what is not reserved.
func (pl *placement) reserve() {
	for _, o := range pl.leaves {
		if pl.want(o, o) == 0 || len(pl.idx.byOwner(o)) == 0 {
			continue
		}
		mine := slices.Clone(pl.idx.byOwner(o))
		want := pl.want(o, o)
		sits := make(map[int]Slots, len(mine))
		for _, i := range mine {
			sits[i] = minSlots(pl.holdOn(o, pl.parts[i].host), pl.parts[i].slots)
			want -= sits[i]
		}
		slices.SortStableFunc(mine, func(a, b int) int {
			pa, pb := pl.parts[a], pl.parts[b]
			return cmp.Or(cmpDesc(pl.rules.preference(o, pa.host), pl.rules.preference(o, pb.host)),
				cmpDesc(pa.slots-sits[a], pb.slots-sits[b]), cmp.Compare(pl.hosts[pa.host].name, pl.hosts[pb.host].name))
		})
		if !pl.rules.preferring {
			for _, i := range mine {
				r := minSlots(want, minSlots(pl.parts[i].slots-sits[i], pl.hostFree(pl.parts[i].host)))
				pl.touch(i)
				pl.reserved[i] += maxSlots(r, 0)
				want -= maxSlots(r, 0)
			}
			slices.SortStableFunc(mine, func(a, b int) int { return boolFirst(pl.reserved[a] > 0, pl.reserved[b] > 0) })
		}
		pl.ownOrder[o] = mine
		for _, i := range mine {
			if want <= 0 {
				break
			}
			r := minSlots(want, pl.parts[i].slots-sits[i]-pl.reserved[i])
			pl.touch(i)
			pl.reserved[i] += r
			want -= r
		}
	}
}

// reserveTakeBacks is ruling 8 without preemption (docs/decisions.md
// #353): a descendant of a parent owner X takes X's private slots back
// from a leaf outside X's subtree by a return, under every policy, so a
// slot of X is used outside X's subtree only while no descendant of X
// with unmet demand could use it. Each of X's leaves is short of X's
// parts by what it is still due of them beyond what it holds on their
// hosts, and beyond what it sits on elsewhere above its dues there (step
// 1 counts that against its other dues, takeDue), at most its deficit.
// When outsiders sit on X's parts, those shorts are placed on X's parts
// now, X's leaves in the entitled order, part by part in the part index's
// order, on the part's free slots
// first and then on the slots outsiders sit on, which they give back
// (step 1 keeps outsiders there only within the rest, outsiderRoom, and
// the pairing makes the returns). Placed now, the slots go to X's leaves,
// not to another claimant of a class X lends. Leaf owners reserve their
// own parts (reserve).
func (pl *placement) reserveTakeBacks() {
	var sitsBy map[int32]Slots // one member's seated slots, by part owner
	var cur []Slots            // under a max: what each node holds, with what is placed here
	type short struct {
		leaf  int32
		slots Slots
	}
	var shorts []short
	for x := range pl.t.nodes {
		owner := int32(x)
		parts := pl.idx.byOwner(owner)
		if pl.t.nodes[owner].leaf || len(parts) == 0 {
			continue
		}
		outside, free := make([]Slots, len(parts)), make([]Slots, len(parts))
		anyOutside := false
		for k, i := range parts {
			p := pl.parts[i]
			seated := Slots(0)
			for _, x := range pl.holders[p.host] {
				seated += pl.rules.seated(p.host, owner, x.leaf)
				if !pl.t.contains(owner, x.leaf) {
					// who gives slots back is read as the pairing
					// reads it (returnSeated), so they are returns
					s := pl.rules.returnSeated(p.host, owner, x.leaf)
					outside[k] += s
					anyOutside = anyOutside || s > 0
				}
			}
			free[k] = maxSlots(p.slots-seated, 0)
		}
		if !anyOutside {
			continue
		}
		shorts = shorts[:0]
		on := &pl.t.nodes[owner]
		for _, l := range pl.t.leaves[on.lo:on.hi] {
			w := pl.want(l, owner)
			if w <= 0 {
				continue
			}
			if sitsBy == nil {
				sitsBy = map[int32]Slots{}
			}
			clear(sitsBy)
			sitsAll := Slots(0)
			for _, hs := range pl.t.nodes[l].holdings {
				i0, i1 := pl.partsOfHost(hs.host)
				for i := i0; i < i1; i++ {
					s := pl.rules.seated(hs.host, pl.parts[i].owner, l)
					sitsBy[pl.parts[i].owner] += s
					sitsAll += s
				}
			}
			// What it holds on X's hosts is X's whichever part of the
			// host the seating puts it in.
			onX := Slots(0)
			for _, i := range parts {
				onX += minSlots(pl.holdOn(l, pl.parts[i].host), pl.parts[i].slots)
			}
			n := w - maxSlots(sitsBy[owner], onX)
			sitsDue := sitsBy[owner] // what it sits on where it is due slots
			for _, d := range pl.due[l] {
				if d.owner != owner {
					n -= maxSlots(sitsBy[d.owner]-d.want, 0)
					sitsDue += sitsBy[d.owner]
				}
			}
			n -= sitsAll - sitsDue // and where it is due nothing
			if n = minSlots(n, pl.deficit[l]); n > 0 {
				shorts = append(shorts, short{l, n})
			}
		}
		// The shorts are served in the entitled order (section 4), each
		// within what its ancestors' max leave it over what every leaf
		// holds now (#247; step 2 counts these placings, place).
		slices.SortStableFunc(shorts, func(a, b short) int { return pl.t.entitledOrder(a.leaf, b.leaf) })
		if pl.t.hasMax && cur == nil {
			cur = make([]Slots, len(pl.t.nodes))
			for _, h := range pl.hosts0 {
				for _, x := range pl.holders[h] {
					pl.hold(cur, x.leaf, x.slots)
				}
			}
		}
		for k, i := range parts {
			room := free[k] + outside[k]
			for j := range shorts {
				if room == 0 {
					break
				}
				m := &shorts[j]
				n := minSlots(m.slots, room)
				if cur != nil {
					n = minSlots(n, pl.headroom(m.leaf, cur))
				}
				if n == 0 {
					continue
				}
				if r := n - minSlots(n, free[k]); r > 0 {
					if pl.outsiderRoom == nil {
						pl.outsiderRoom = map[int]Slots{}
					}
					outside[k] -= r
					pl.outsiderRoom[i] = outside[k]
				}
				free[k] -= minSlots(n, free[k])
				room -= n
				m.slots -= n
				if cur != nil {
					pl.hold(cur, m.leaf, n)
				}
				d := pl.dueOf(m.leaf, owner)
				if e := minSlots(n, d.ent); e > 0 {
					pl.put(m.leaf, owner, i, e, pl.rules.grant)
					n -= e
				}
				if n > 0 {
					pl.put(m.leaf, owner, i, n, pl.rules.borrow)
				}
			}
		}
	}
}

// hostFree is how many slots of a host nobody holds now.
func (pl *placement) hostFree(h int32) Slots { return pl.hosts[h].slots - pl.hosts[h].used }
