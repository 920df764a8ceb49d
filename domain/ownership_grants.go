package domain

// The placement's step 2 (docs/rules.md#ownership-placement): what is
// still due to each leaf after step 1 kept what could stay, placed leaf by
// leaf in rank order, each part on the host with most of it free.

import (
	"cmp"
	"container/heap"
	"slices"
)

// place is step 2: leaves by rank, each its own parts in the order
// reserved, then each owner's parts it is still due slots of, the part
// with most room first, then host name.
func (pl *placement) place() {
	if pl.rules.onTotals {
		pl.fillOnTotals()
		return
	}
	if pl.rules.keepSeating && pl.t.hasMax {
		// Rules 4 without preemption keeps what each holder sits on, even
		// above its target: what is placed must fit under every max with
		// what is kept (section 1: A(n) <= max; docs/decisions.md #247).
		pl.cur = make([]Slots, len(pl.t.nodes))
		for _, h := range pl.hosts0 {
			for j, x := range pl.holders[h] {
				if k := pl.kept[h]; k != nil {
					pl.hold(pl.cur, x.leaf, k[j])
				}
			}
		}
		for _, x := range pl.placed { // a branch's take-backs (reserveTakeBacks)
			pl.hold(pl.cur, x.leaf, x.slots)
		}
	}
	if !pl.rules.phased {
		leaves := pl.byRank()
		slices.SortStableFunc(leaves, pl.claimantOrder)
		for _, l := range leaves {
			pl.placeOwn(l)
			pl.placeWants(l, pl.rules.grant, func(d *dueShare) Slots { return d.want })
		}
		return
	}
	for _, l := range pl.inOrder(pl.t.entitledOrder, pl.t.inEntitledOrder) {
		pl.placeOwn(l)
		pl.placeWants(l, pl.rules.grant, func(d *dueShare) Slots { return minSlots(d.ent, d.want) })
	}
	for _, l := range pl.inOrder(pl.t.borrowOrder, pl.t.inBorrowOrder) {
		pl.placeWants(l, pl.rules.borrow, func(d *dueShare) Slots { return d.want })
	}
}

// inOrder lists the leaves taking part in order; all: every leaf in it,
// sorted from where the tree's last sort left them (tree.inEntitledOrder).
func (pl *placement) inOrder(order func(a, b int32) int, all func() []int32) []int32 {
	if len(pl.leaves) == len(pl.t.leaves) {
		return all()
	}
	leaves := slices.Clone(pl.leaves)
	slices.SortFunc(leaves, order)
	return leaves
}

// byRank lists the leaves taking part by rank (priority desc, then path).
func (pl *placement) byRank() []int32 {
	if len(pl.leaves) == len(pl.t.leaves) {
		return slices.Clone(pl.t.leavesByRank())
	}
	leaves := slices.Clone(pl.leaves)
	slices.SortFunc(leaves, func(a, b int32) int {
		return cmp.Or(cmpDesc(pl.t.nodes[a].priority, pl.t.nodes[b].priority), cmp.Compare(a, b))
	})
	return leaves
}

// claimantOrder is share_ratio's (docs/rules.md#share-ratio): the largest
// deficit per unit of share first (leaves at their target last, by rank).
func (pl *placement) claimantOrder(a, b int32) int {
	x, y := &pl.t.nodes[a], &pl.t.nodes[b]
	return cmpDesc(int64(pl.deficit[a])*y.share, int64(pl.deficit[b])*x.share)
}

// placeOwn places what leaf l is still due of its own parts, in the order
// reserved.
func (pl *placement) placeOwn(l int32) {
	room := Unlimited
	if pl.cur != nil {
		room = pl.headroom(l, pl.cur)
	}
	pl.placeOwnWithin(l, room)
}

// placeOwnWithin is placeOwn placing at most room slots (rules 4 on
// totals and without preemption: what its ancestors' max leaves it,
// docs/decisions.md #247).
func (pl *placement) placeOwnWithin(l int32, room Slots) {
	for _, i := range pl.ownOrder[l] {
		if k := minSlots(minSlots(pl.want(l, l), pl.capRem[i]), room); k > 0 {
			pl.put(l, l, i, k, RuleOwnUse)
			room -= k
		}
	}
}

// placeWants places up to due(l, owner) of what leaf l is due of each
// owner's parts, its tiers in order, the roomiest part first.
func (pl *placement) placeWants(l int32, rule Rule, due func(*dueShare) Slots) {
	for _, owner := range pl.wants[l] {
		d := pl.dueOf(l, owner)
		for k := due(d); k > 0; k = due(d) {
			best, room := pl.nextPart(owner)
			if best < 0 {
				break
			}
			if pl.cur != nil {
				if k = minSlots(k, pl.headroom(l, pl.cur)); k <= 0 {
					break
				}
			}
			pl.put(l, owner, best, minSlots(k, room), rule)
		}
	}
}

// nextPart is the owner's part step 2 places in next, and the most it
// places there in one go: the roomiest part (room left, then host name);
// under rules 4 first the parts on hosts with slots free as the placement
// started, most of them first, up to those (freeFirst).
func (pl *placement) nextPart(owner int32) (int, Slots) {
	if pl.rules.freeFirst {
		if i := pl.freest(owner); i >= 0 {
			return i, pl.freeRoom(i)
		}
		// Nothing free is left: the slots others give up, on the hosts
		// in the order the claimant would use them, most free slots as
		// the rebalance started, then name (#320).
		if i := pl.usedFirst(owner); i >= 0 {
			return i, pl.capRem[i]
		}
		return -1, 0
	}
	i := pl.roomiest(owner)
	if i < 0 {
		return -1, 0
	}
	return i, pl.capRem[i]
}

// freeRoom is what part i may still take of the slots free on its host as
// the placement started (freeFirst).
func (pl *placement) freeRoom(i int) Slots {
	return minSlots(pl.capRem[i], pl.freeLeftOn(pl.parts[i].host))
}

// freeLeftOn is what step 2 has not placed yet of the slots free on host h
// as the placement started (freeFirst).
func (pl *placement) freeLeftOn(h int32) Slots {
	if free, ok := pl.freeLeft[h]; ok {
		return free
	}
	return pl.hostFree(h) + pl.excessFreed[h]
}

// freest returns the owner's part with most freeRoom, then host name; -1
// when none has any. Its heap is keyed lazily: a part's freeRoom only
// falls during step 2, so an entry whose key is stale is pushed again
// with its current one.
func (pl *placement) freest(owner int32) int {
	h := pl.freeByOwner[owner]
	if h == nil {
		h = &partHeap{pl: pl}
		for _, i := range pl.idx.byOwner(owner) {
			if r := pl.freeRoom(i); r > 0 {
				h.items = append(h.items, partRoom{part: i, room: r})
			}
		}
		heap.Init(h)
		pl.freeByOwner[owner] = h
	}
	for h.Len() > 0 {
		top := h.items[0]
		r := pl.freeRoom(top.part)
		if r == top.room {
			return top.part
		}
		heap.Pop(h)
		if r > 0 {
			heap.Push(h, partRoom{part: top.part, room: r})
		}
	}
	return -1
}

// usedFirst returns the owner's part with room left on the host a
// claimant would use first, most free slots as the placement started
// (with what leaves gave up there unreclaimed: vacated, #516), then
// name; -1 when none has room. The order does not change during
// step 2 and a part's room only falls, so each owner's list is walked
// once.
func (pl *placement) usedFirst(owner int32) int {
	c := pl.useOrder[owner]
	if c == nil {
		c = &partCursor{parts: slices.Clone(pl.idx.byOwner(owner))}
		slices.SortStableFunc(c.parts, func(a, b int) int {
			ha, hb := pl.parts[a].host, pl.parts[b].host
			return cmp.Or(cmpDesc(pl.hostFree(ha)+pl.vacated(ha), pl.hostFree(hb)+pl.vacated(hb)), cmp.Compare(pl.hosts[ha].name, pl.hosts[hb].name))
		})
		pl.useOrder[owner] = c
	}
	for ; c.next < len(c.parts); c.next++ {
		if i := c.parts[c.next]; pl.capRem[i] > 0 {
			return i
		}
	}
	return -1
}

// vacated is what the leaves that are not above their targets sat on on
// host h as the placement started and step 1 did not keep: slots given
// up with nobody reclaiming them (a move to another tier; #516). Read
// once step 1 is done (step 2's order of hosts).
func (pl *placement) vacated(h int32) Slots {
	var n Slots
	kept := pl.kept[h]
	for j, x := range pl.holders[h] {
		if pl.over[x.leaf] == 0 && j < len(kept) {
			n += x.slots - kept[j]
		}
	}
	return n
}

// partCursor walks an owner's parts in a fixed order (usedFirst).
type partCursor struct {
	parts []int
	next  int
}

// put places k slots of leaf l's due share of owner's parts in part i.
func (pl *placement) put(l, owner int32, i int, k Slots, rule Rule) {
	d := pl.dueOf(l, owner)
	d.want -= k
	d.ent -= minSlots(k, d.ent)
	pl.touch(i)
	if pl.rules.freeFirst {
		h := pl.parts[i].host
		free := pl.freeLeftOn(h)
		pl.freeLeft[h] = free - minSlots(k, free)
	}
	pl.capRem[i] -= k
	pl.placed = append(pl.placed, placing{leaf: l, part: i, slots: k, rule: rule})
	if pl.cur != nil {
		pl.hold(pl.cur, l, k)
	}
	if h := pl.byOwner[pl.parts[i].owner]; h != nil {
		heap.Push(h, partRoom{part: i, room: pl.capRem[i]})
	}
}

// roomiest returns the owner's part with most room left, then host name;
// -1 when none has room.
func (pl *placement) roomiest(owner int32) int {
	h := pl.byOwner[owner]
	if h == nil {
		h = &partHeap{pl: pl}
		for _, i := range pl.idx.byOwner(owner) {
			if pl.capRem[i] > 0 {
				h.items = append(h.items, partRoom{part: i, room: pl.capRem[i]})
			}
		}
		heap.Init(h)
		pl.byOwner[owner] = h
	}
	for h.Len() > 0 {
		top := h.items[0]
		if top.room == pl.capRem[top.part] && top.room > 0 {
			return top.part
		}
		heap.Pop(h) // stale: its room changed since it was pushed
	}
	return -1
}

// partRoom is a part and its room when it was pushed.
type partRoom struct {
	part int
	room Slots
}

// partHeap orders an owner's parts by room (desc), then host name.
type partHeap struct {
	pl    *placement
	items []partRoom
}

func (h *partHeap) Len() int { return len(h.items) }

func (h *partHeap) Less(a, b int) bool {
	x, y := h.items[a], h.items[b]
	return cmp.Or(cmpDesc(x.room, y.room), cmp.Compare(h.pl.hosts[h.pl.parts[x.part].host].name, h.pl.hosts[h.pl.parts[y.part].host].name)) < 0
}

func (h *partHeap) Swap(a, b int) { h.items[a], h.items[b] = h.items[b], h.items[a] }

func (h *partHeap) Push(x any) { h.items = append(h.items, x.(partRoom)) }

func (h *partHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
