package domain

// Host parts (docs/rules.md#ownership-placement): the slots of each up
// host divided by the ownership assignment into each owner's part and the
// public part, in one order (partOrder), and the placement's index of
// them.

import (
	"cmp"
	"slices"
)

// hostPart is the slots of one host in one owner's part (owner noNode:
// the public part).
type hostPart struct {
	host  int32
	owner int32
	slots Slots
}

// partIndex is the up hosts' parts in the placement's order, and where
// each host's and each owner's parts are in it; kept while the parts are.
type partIndex struct {
	t       *tree      // the tree it orders parts by
	gen     uint64     // the pool's parts generation it was checked against
	source  []hostPart // the parts it indexes, as given
	parts   []hostPart
	hostAt  []int           // by host: index of its first part (len(parts) when none)
	first   map[int32]int   // by owner: index of its first part
	byOwner map[int32][]int // by owner: its parts, in order
}

// fullRoom is every part's slots: the room of a placement of every leaf.
func (ix *partIndex) fullRoom() []Slots {
	room := make([]Slots, len(ix.parts))
	for i, p := range ix.parts {
		room[i] = p.slots
	}
	return room
}

func newPartIndex(t *tree, nHosts int, parts []hostPart) *partIndex {
	ix := &partIndex{t: t, parts: slices.Clone(parts), hostAt: make([]int, nHosts), first: map[int32]int{}, byOwner: map[int32][]int{}}
	slices.SortStableFunc(ix.parts, func(a, b hostPart) int { return partOrder(t, a, b) })
	for h := range ix.hostAt {
		ix.hostAt[h] = len(ix.parts)
	}
	for i := len(ix.parts) - 1; i >= 0; i-- {
		p := ix.parts[i]
		ix.hostAt[p.host] = i
		ix.first[p.owner] = i
	}
	for i, p := range ix.parts {
		ix.byOwner[p.owner] = append(ix.byOwner[p.owner], i)
	}
	return ix
}

// partOrder is the one order of parts: hosts in registration order; on a
// host, leaf owners' parts (by path), then parents' private parts deepest
// first (then path), then the public part. The placement's index and the
// seating (sitHost's passes) both take parts in it.
func partOrder(t *tree, a, b hostPart) int {
	if a.host != b.host {
		return cmp.Compare(a.host, b.host)
	}
	return cmp.Compare(partTier(t, a.owner), partTier(t, b.owner))
}

// partTier ranks an owner's part on a host (smaller first).
func partTier(t *tree, owner int32) int64 {
	if owner == noNode {
		return 1 << 62
	}
	n := &t.nodes[owner]
	if n.leaf {
		return int64(owner)
	}
	return 1<<40 + int64(1<<20-n.depth)<<21 + int64(owner)
}

// partsOf divides the up hosts into parts by an assignment (rows of
// consumer path, host name, slots) and sums the ownership totals the
// layered targets need. Rows naming a consumer or host the pool does not
// have, or a host that is down, are ignored: the assignment only ever
// holds up hosts of the pool.
func partsOf(t *tree, hosts []host, rows []ownSlot) ([]hostPart, ownTotals) {
	n := len(t.nodes)
	tot := ownTotals{owned: make([]Slots, n), private: make([]Slots, n)}
	hostIdx := make(map[string]int32, len(hosts))
	for i, h := range hosts {
		if h.up {
			hostIdx[h.name] = int32(i)
		}
	}
	type owning struct {
		id    int32
		slots Slots
	}
	byHost := make([][]owning, len(hosts)) // by host: owners, any order
	for _, r := range rows {
		id, ok := t.lookup(r.consumer)
		h, up := hostIdx[r.host]
		if !ok || !up || id == 0 {
			continue
		}
		byHost[h] = append(byHost[h], owning{id, r.slots})
		tot.owned[id] += r.slots
	}
	var parts []hostPart
	inner := map[int32]Slots{}
	for h := range hosts {
		if !hosts[h].up {
			continue
		}
		public := hosts[h].slots
		os := byHost[h]
		slices.SortFunc(os, func(a, b owning) int { return cmp.Compare(a.id, b.id) })
		clear(inner)
		for _, o := range os {
			inner[o.id] += o.slots
			if pa := t.nodes[o.id].parent; pa > 0 {
				inner[pa] -= o.slots
			}
			if t.nodes[o.id].depth == 1 {
				public -= o.slots
			}
		}
		for _, o := range os {
			if k := inner[o.id]; k > 0 {
				parts = append(parts, hostPart{host: int32(h), owner: o.id, slots: k})
				inner[o.id] = 0 // a consumer named twice on a host: one part
			}
		}
		if public > 0 {
			parts = append(parts, hostPart{host: int32(h), owner: noNode, slots: public})
		}
		tot.public += max(public, 0)
	}
	for id := 1; id < n; id++ {
		if t.nodes[id].leaf || tot.owned[id] == 0 {
			continue
		}
		tot.private[id] = tot.owned[id]
		for _, c := range t.nodes[id].children {
			tot.private[id] -= tot.owned[c]
		}
	}
	return parts, tot
}

// partsMoved compares two lists of parts, each in host order, host by
// host for the first hosts hosts: whether a host's parts changed and, when
// they did not, how far they moved (the new index of its first part less
// the old). The caches kept across a host event (the sittings, the
// placement's quiet leaves) keep what they hold of the unchanged hosts at
// the parts' new places.
func partsMoved(old, cur []hostPart, hosts int) (shift []int, changed []bool) {
	shift, changed = make([]int, hosts), make([]bool, hosts)
	oi, ni := 0, 0
	for h := range int32(hosts) {
		oj, nj := oi, ni
		for oj < len(old) && old[oj].host == h {
			oj++
		}
		for nj < len(cur) && cur[nj].host == h {
			nj++
		}
		if slices.Equal(old[oi:oj], cur[ni:nj]) {
			shift[h] = ni - oi
		} else {
			changed[h] = true
		}
		oi, ni = oj, nj
	}
	return shift, changed
}

// firstPartOf returns the index of the first part on a host (parts are in
// host order).
func firstPartOf(parts []hostPart, hostID int32) int {
	i, _ := slices.BinarySearchFunc(parts, hostID, func(pt hostPart, h int32) int { return cmp.Compare(pt.host, h) })
	return i
}
