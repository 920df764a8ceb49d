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
	t      *tree      // the tree it orders parts by
	gen    uint64     // the pool's parts generation it was checked against
	source []hostPart // the parts it indexes, as given
	parts  []hostPart
	hostAt []int // by host: index of its first part (len(parts) when none)
	// The parts of each owner, in order: those of owner o are
	// ownerParts[ownerAt[o+1]:ownerAt[o+2]] (o+1: the public part's owner
	// is noNode, -1), one array for all rather than a map of slices, built
	// at every change of the parts.
	ownerAt    []int32
	ownerParts []int
}

// byOwner is the indexes of owner's parts, in order (read only).
func (ix *partIndex) byOwner(owner int32) []int {
	if o := int(owner) + 1; o >= 0 && o+1 < len(ix.ownerAt) {
		from, to := ix.ownerAt[o], ix.ownerAt[o+1]
		return ix.ownerParts[from:to:to]
	}
	return nil
}

// first is the index of owner's first part, 0 when it has none.
func (ix *partIndex) first(owner int32) int {
	if ps := ix.byOwner(owner); len(ps) > 0 {
		return ps[0]
	}
	return 0
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
	ix := &partIndex{t: t, parts: slices.Clone(parts), hostAt: make([]int, nHosts)}
	slices.SortStableFunc(ix.parts, func(a, b hostPart) int { return partOrder(t, a, b) })
	for h := range ix.hostAt {
		ix.hostAt[h] = len(ix.parts)
	}
	for i := len(ix.parts) - 1; i >= 0; i-- {
		ix.hostAt[ix.parts[i].host] = i
	}
	// Owners are noNode or node ids: count each one's parts, then place
	// them in order.
	ix.ownerAt = make([]int32, len(t.nodes)+2)
	for _, p := range ix.parts {
		ix.ownerAt[p.owner+2]++
	}
	for o := 1; o < len(ix.ownerAt); o++ {
		ix.ownerAt[o] += ix.ownerAt[o-1]
	}
	ix.ownerParts = make([]int, len(ix.parts))
	next := slices.Clone(ix.ownerAt)
	for i, p := range ix.parts {
		ix.ownerParts[next[p.owner+1]] = i
		next[p.owner+1]++
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

// ownedRow is a row of an assignment by ids: the consumer's node in the
// tree (0: not in it), the host's index in the pool's hosts (-1: not a
// host of the pool).
type ownedRow struct {
	node, host int32
	slots      Slots
}

// resolveRows is rows by ids in t and the pool's hosts (by name).
func resolveRows(t *tree, hostByID map[string]int32, rows []ownSlot) []ownedRow {
	out := make([]ownedRow, len(rows))
	for i, r := range rows {
		id, _ := t.lookup(r.consumer)
		h, ok := hostByID[r.host]
		if !ok {
			h = -1
		}
		out[i] = ownedRow{node: id, host: h, slots: r.slots}
	}
	return out
}

// partsOf divides the up hosts into parts by an assignment and sums the
// ownership totals the layered targets need. Rows naming a consumer or
// host the pool does not have, or a host that is down, are ignored: the
// assignment only ever holds up hosts of the pool.
func partsOf(t *tree, hosts []host, rows []ownedRow) ([]hostPart, ownTotals) {
	n := len(t.nodes)
	tot := ownTotals{owned: make([]Slots, n), private: make([]Slots, n)}
	type owning struct {
		id    int32
		slots Slots
	}
	counted := func(r ownedRow) bool { return r.node > 0 && r.host >= 0 && hosts[r.host].up }
	// The rows by host, each host's in any order: counted, then placed.
	at := make([]int32, len(hosts)+1)
	for _, r := range rows {
		if counted(r) {
			at[r.host+1]++
			tot.owned[r.node] += r.slots
		}
	}
	for h := range hosts {
		at[h+1] += at[h]
	}
	byHost := make([]owning, at[len(hosts)])
	next := slices.Clone(at[:len(hosts)])
	for _, r := range rows {
		if counted(r) {
			byHost[next[r.host]] = owning{r.node, r.slots}
			next[r.host]++
		}
	}
	var parts []hostPart
	inner := make([]Slots, n) // by node: its slots on the host less its children's; 0 between hosts
	for h := range hosts {
		if !hosts[h].up {
			continue
		}
		public := hosts[h].slots
		os := byHost[at[h]:at[h+1]]
		slices.SortFunc(os, func(a, b owning) int { return cmp.Compare(a.id, b.id) })
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
		for _, o := range os {
			inner[o.id] = 0
			if pa := t.nodes[o.id].parent; pa > 0 {
				inner[pa] = 0
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
