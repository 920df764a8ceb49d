package domain

import (
	"cmp"
	"slices"
)

// An owner's excess under rules 4 with preemption (rules-v4 ruling 5,
// docs/decisions.md #356). Ruling 5: an owner takes its own slots whatever
// it holds elsewhere, and if that takes it above E it "gives back the
// excess at once, in the release order of 'Placement with ownership'":
// slots lent by others first, then public, then private pools (farthest
// ancestor first), its own last; within a tier, the host holding most of
// its slots, then name, measured as the release goes (#234). Step 1 keeps
// a losing leaf's slots on the hosts a claimant would use last, which is
// the order for what claimants take from it, not for what it gives back
// of its own accord.

// releaseExcessFirst takes, before step 1 keeps anything, what each leaf
// holds beyond E less its own layer's use out of what it may keep (left,
// by host then holder), in the release order; the pairing releases it
// (rule release.moved: its work moves onto its own slots).
func (pl *placement) releaseExcessFirst(left map[int32][]Slots) {
	type entry struct {
		h     int32
		j     int // the holder's index on h
		owner int32
		slots Slots
	}
	var es []entry
	for _, l := range pl.leaves {
		own := pl.want(l, l) // its own layer: what it is due of its own parts
		if own == 0 {
			continue // no own layer, or none gained: nothing of its own accord
		}
		es = es[:0]
		held := Slots(0)
		for _, hs := range pl.t.nodes[l].holdings {
			h := hs.host
			if _, ok := left[h]; !ok { // down, or no parts
				continue
			}
			j := slices.IndexFunc(pl.holders[h], func(x leafSlots) bool { return x.leaf == l })
			if j < 0 {
				continue
			}
			i0, i1 := pl.partsOfHost(h)
			for i := i0; i < i1; i++ {
				o := pl.parts[i].owner
				if s := pl.rules.seated(h, o, l); s > 0 {
					if o == l {
						own -= minSlots(s, own) // what it already sits on of its own
						continue
					}
					es = append(es, entry{h: h, j: j, owner: o, slots: s})
					held += s
				}
			}
		}
		excess := held - maxSlots(pl.t.nodes[l].eff-pl.want(l, l), 0)
		// own: what its own layer still gains now; without such a gain it
		// gives nothing back of its own accord here (a fall of E is the
		// release of section 4, made before the rebalance).
		if excess <= 0 || own <= 0 {
			continue
		}
		for excess > 0 {
			best := -1
			for k := range es {
				e := &es[k]
				if e.slots == 0 || left[e.h][e.j] == 0 {
					continue
				}
				if best < 0 || pl.releasesBefore(l, e.owner, e.h, left[e.h][e.j], es[best].owner, es[best].h, left[es[best].h][es[best].j]) {
					best = k
				}
			}
			if best < 0 {
				break
			}
			e := &es[best]
			k := minSlots(minSlots(excess, e.slots), left[e.h][e.j])
			e.slots -= k
			left[e.h][e.j] -= k
			excess -= k
			if pl.freeLeft != nil {
				pl.excessFreed[e.h] += k
			}
		}
	}
}

// releasesBefore reports whether leaf l gives back its slots of owner a's
// part on host ha (holding la of its slots there now) before those of
// owner b's on hb: lent by others, public, private pools farthest
// ancestor first, its own last (the reverse of the grants' tiers,
// tierOfPart); then the host holding most; then name.
func (pl *placement) releasesBefore(l, a, ha int32, la Slots, b, hb int32, lb Slots) bool {
	return cmp.Or(cmp.Compare(pl.tierOfPart(l, b), pl.tierOfPart(l, a)), cmp.Compare(lb, la), cmp.Compare(pl.hosts[ha].name, pl.hosts[hb].name)) < 0
}
