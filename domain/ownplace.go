package domain

import (
	"cmp"
	"container/heap"
	"slices"
	"time"
)

// Placement with ownership (docs/rules.md#ownership-placement): given where
// every leaf's slots sit and how many slots of each owner's hosts the layered
// targets give it (layered.go), where the slots sit afterwards, and the
// decisions that move them there. Like the assignment and the layered
// targets, this is a pure function of its input; the fold calls it on
// every rebalance of a pool with ownership (owned.go rebalanceOwned).
//
// A host's slots are divided into parts by the assignment: each owner's
// part is what it owns there and its children do not (a leaf's own
// slots, a parent's private slots), and the public part is what no
// top-level consumer owns. A leaf's slots of the own layer belong in its
// own parts, its slots of pool(X) in X's private parts, its public slots
// in the public parts, and slots lent by L in L's parts. The placement:
//
//  1. keeps what can stay: host by host, part by part (owners' parts
//     first, then private parts deepest first, then the public part),
//     the slots a leaf already holds on the host count for a part it is
//     due slots of, the owner first, then by priority desc, fewest slots
//     on the host, path, so a borrower of lowest priority, most slots on
//     the host, gives back first (the return order,
//     docs/rules.md#ownership-placement);
//  2. places what is still due: leaves by rank, each part where the leaf
//     is due slots, the host with most of the part free first, then name;
//  3. pairs, host by host, the slots gained with the slots given up on
//     the same host: an owner gaining its own part back from a borrower
//     is a return (also a descendant of X taking X's private slots back
//     from outside X's branch), any other gain from a leaf is a reclaim;
//     a gain from free slots is a grant, or a lend when the part is
//     another consumer's; slots given up and not taken on that host are
//     released (the leaf is placed elsewhere, or another host's claimant
//     took its share).
//
// Decisions come out host by host (registration order), gains in part
// order. Orders the spec leaves open are docs/decisions.md #98-#100.

// hostPart is the slots of one host in one owner's part (owner noNode:
// the public part).
type hostPart struct {
	host  int32
	owner int32
	slots Slots
}

// placeMove is one decision of the placement, before the fold numbers it.
// graceOf names the consumer whose grace sets the deadline (noNode: none):
// the lender for a return, the victim for a reclaim.
type placeMove struct {
	kind    Kind
	leaf    int32
	from    int32
	host    int32
	slots   Slots
	rule    Rule
	graceOf int32
}

// The rules of the placement's decisions that only ownership makes
// (docs/rules.md#decisions lists every rule).
const (
	// RuleOwnUse: a leaf given slots of its own part.
	RuleOwnUse Rule = "own.use"
	// RuleOwnReturn: an owner (or a descendant of a parent owner) takes
	// its lent slots back from a borrower.
	RuleOwnReturn Rule = "own.return"
	// RuleMoved: slots given up on one host because the leaf's share of
	// that part went elsewhere.
	RuleMoved Rule = "release.moved"
)

// placeRules is what the pool's policy decides in a placement: the rules
// its grants and reclaims are recorded with, whether an owner takes its
// most preferred slots back from borrowers even while some of its own
// are free (reclaim_for_preference), and each owner's preference for
// each host.
type placeRules struct {
	grant, borrow, reclaim Rule
	// phased: priority's order, every leaf's slots within its guarantee
	// first (entitled order), then what it borrows (borrow order).
	phased     bool
	preferring bool
	preference func(owner, host int32) int64
}

// placement is one run's state.
type placement struct {
	t      *tree
	rules  placeRules
	hosts  []host
	idx    *partIndex
	parts  []hostPart // idx.parts: by host, then part order
	capRem []Slots    // by part: not yet placed
	leaves []int32    // the leaves taking part, path order
	// due: by leaf, what it is due of each owner's parts (a few owners a
	// leaf); wants: by leaf, those owners in the order it uses them.
	due     [][]dueShare
	wants   [][]int32
	holders [][]leafSlots     // by host: who of the leaves taking part holds slots there now, path order
	hosts0  []int32           // the hosts where they hold slots, in host order
	kept    map[int32][]Slots // by host, by holder: the slots kept there in step 1
	placed  []placing         // step 2, in the order placed
	over    map[int32]Slots   // by leaf: what it holds above its target, which may be reclaimed
	moves   []placeMove
	// reserved: by part, the slots of a leaf owner's part kept for the
	// owner's own use (no one else keeps them); ownOrder: by owner, its
	// parts in the order it uses them.
	reserved []Slots
	ownOrder map[int32][]int
	byOwner  map[int32]*partHeap // the parts of each owner, roomiest first
	hostAt   []int               // by host: index of its first part (len(parts) when none)
	// owed: by claimant, what the layered fold moved to it from each
	// victim (lookups only), paired first with what it gains.
	owed map[int32][]transfer
	// deficit: by leaf, what it is short of its target (share_ratio's
	// claimant order).
	deficit []Slots
	// keptSum: by part, what step 1 kept there; keptElse, of it, what
	// leaves other than the part's owner kept.
	keptSum, keptElse []Slots
	cut               bool // step 1 cut some keep for want of room
	b                 *placeBufs
}

// dueShare is what a leaf is due of one owner's parts (owner noNode: the
// public parts): want, of which ent within its guarantee (priority).
type dueShare struct {
	owner     int32
	want, ent Slots
}

// dueOf is leaf l's due share of owner's parts (nil: none).
func (pl *placement) dueOf(l, owner int32) *dueShare {
	for i := range pl.due[l] {
		if pl.due[l][i].owner == owner {
			return &pl.due[l][i]
		}
	}
	return nil
}

// want is what leaf l is still due of owner's parts.
func (pl *placement) want(l, owner int32) Slots {
	if d := pl.dueOf(l, owner); d != nil {
		return d.want
	}
	return 0
}

// leafSlots is a number of slots a leaf holds (on a host known from
// context).
type leafSlots struct {
	leaf  int32
	slots Slots
}

// placing is a number of slots placed for a leaf in one part, and the
// rule that gives them.
type placing struct {
	leaf  int32
	part  int
	slots Slots
	rule  Rule
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

// placeInput is what one run covers: the leaves taking part, in path
// order; by host, what they hold there (path order); each one's due
// shares (ownUse, then its takes) and target; by part of the index, the
// room the leaves left out leave (the slots they keep there taken away);
// and the fold's transfers.
type placeInput struct {
	leaves    []int32
	holders   [][]leafSlots
	due       func(l int32, add func(owner int32, want, ent Slots))
	target    func(l int32) Slots
	room      []Slots
	transfers []transfer
	hosts     []int32 // the hosts where the leaves hold slots, in host order (nil: those of holders)
}

// placeOwned computes the placement of every leaf. parts must list every
// up host's parts; holders lists, by host, the leaves holding slots there
// now, in path order.
func placeOwned(t *tree, hosts []host, parts []hostPart, lt layeredTargets, holders [][]leafSlots, rules placeRules) []placeMove {
	idx := newPartIndex(t, len(hosts), parts)
	pl := place(t, hosts, idx, lt.everyLeaf(t, idx, holders), rules, &placeBufs{})
	pl.release()
	return pl.moves
}

// everyLeaf is a placement of every leaf on the layered targets of a full
// fold, on the whole room of every part.
func (lt layeredTargets) everyLeaf(t *tree, idx *partIndex, holders [][]leafSlots) placeInput {
	byLeaf := make([][]poolTake, len(t.nodes))
	for _, tk := range lt.takes {
		byLeaf[tk.leaf] = append(byLeaf[tk.leaf], tk)
	}
	return placeInput{leaves: t.sortedLeaves, holders: holders, due: lt.dueFrom(byLeaf), target: func(l int32) Slots { return lt.target[l] },
		room: idx.fullRoom(), transfers: lt.transfers}
}

// dueFrom hands out a leaf's due shares: its own layer, then its takes
// (byLeaf: the takes by leaf).
func (lt layeredTargets) dueFrom(byLeaf [][]poolTake) func(l int32, add func(owner int32, want, ent Slots)) {
	return func(l int32, add func(owner int32, want, ent Slots)) {
		if k := lt.ownUse[l]; k > 0 {
			add(l, k, 0)
		}
		for _, tk := range byLeaf[l] {
			add(tk.takeOwner(), tk.slots, tk.entitled)
		}
	}
}

// takeOwner is whose parts a take's slots are: the lender's, the pool's
// own (a private pool), or the public parts (noNode).
func (tk poolTake) takeOwner() int32 {
	if tk.lender == noNode && tk.pool != 0 {
		return tk.pool
	}
	return tk.lender
}

// placeBufs is scratch a pool keeps between runs, by node id and by
// part; a run leaves it as it found it (release), so a run costs what it
// touches, not the pool's size.
type placeBufs struct {
	due     [][]dueShare
	wants   [][]int32
	deficit []Slots
	total   []Slots // what each leaf holds, while a run sums it
	// By part: reserved and kept in step 1, and the parts a run touched
	// with the room they had before (put back by release).
	reserved, keptSum, keptElse []Slots
	mark                        []bool
	touched                     []partSlots
}

func (b *placeBufs) fit(n, parts int) {
	if len(b.due) != n {
		b.due, b.wants, b.deficit, b.total = make([][]dueShare, n), make([][]int32, n), make([]Slots, n), make([]Slots, n)
	}
	if len(b.mark) != parts {
		b.reserved, b.keptSum, b.keptElse, b.mark = make([]Slots, parts), make([]Slots, parts), make([]Slots, parts), make([]bool, parts)
	}
}

// place runs the placement of in's leaves. It works in in.room, which
// release puts back as it was, and in bufs; the caller calls release when
// it has read the run.
func place(t *tree, hosts []host, idx *partIndex, in placeInput, rules placeRules, bufs *placeBufs) *placement {
	bufs.fit(len(t.nodes), len(idx.parts))
	pl := &placement{t: t, rules: rules, hosts: hosts, idx: idx, parts: idx.parts, hostAt: idx.hostAt, leaves: in.leaves, holders: in.holders,
		due: bufs.due, wants: bufs.wants, deficit: bufs.deficit, kept: map[int32][]Slots{}, over: map[int32]Slots{},
		ownOrder: map[int32][]int{}, byOwner: map[int32]*partHeap{}, capRem: in.room, b: bufs,
		reserved: bufs.reserved, keptSum: bufs.keptSum, keptElse: bufs.keptElse}
	pl.hosts0 = in.hosts
	if pl.hosts0 == nil {
		for h, hs := range in.holders {
			if len(hs) > 0 {
				pl.hosts0 = append(pl.hosts0, int32(h))
			}
		}
	}
	for _, h := range pl.hosts0 {
		for _, x := range in.holders[h] {
			bufs.total[x.leaf] += x.slots
		}
	}
	for _, l := range in.leaves {
		total := bufs.total[l]
		bufs.total[l] = 0
		target := in.target(l)
		pl.deficit[l] = maxSlots(target-total, 0)
		if k := total - target; k > 0 {
			pl.over[l] = k
		}
		in.due(l, func(owner int32, k, ent Slots) { pl.addWant(l, owner, k, ent) })
		slices.SortFunc(pl.wants[l], func(a, b int32) int {
			return cmp.Or(cmp.Compare(pl.tierOf(l, a), pl.tierOf(l, b)), cmp.Compare(pl.firstPart(a), pl.firstPart(b)))
		})
	}
	pl.owed = map[int32][]transfer{}
	for _, tr := range in.transfers {
		pl.owed[tr.claimant] = append(pl.owed[tr.claimant], tr)
	}
	pl.reserve()
	pl.keep()
	pl.place()
	pl.pair()
	return pl
}

// release clears the scratch the run used and puts the room back.
func (pl *placement) release() {
	for _, l := range pl.leaves {
		pl.due[l], pl.wants[l], pl.deficit[l] = pl.due[l][:0], pl.wants[l][:0], 0
	}
	b := pl.b
	for _, t := range b.touched {
		pl.capRem[t.part] = t.slots
		b.reserved[t.part], b.keptSum[t.part], b.keptElse[t.part], b.mark[t.part] = 0, 0, 0, false
	}
	b.touched = b.touched[:0]
}

// touch notes that the run changes part i (its room, reserve or keeps).
func (pl *placement) touch(i int) {
	if b := pl.b; !b.mark[i] {
		b.mark[i] = true
		b.touched = append(b.touched, partSlots{part: i, slots: pl.capRem[i]})
	}
}

// firstPart is the index of owner's first part (0 when it has none).
func (pl *placement) firstPart(owner int32) int { return pl.idx.first[owner] }

// addWant adds k slots (ent of them within its guarantee) to what leaf is
// due of owner's parts.
func (pl *placement) addWant(leaf, owner int32, k, ent Slots) {
	d := pl.dueOf(leaf, owner)
	if d == nil {
		pl.wants[leaf] = append(pl.wants[leaf], owner)
		pl.due[leaf] = append(pl.due[leaf], dueShare{owner: owner})
		d = &pl.due[leaf][len(pl.due[leaf])-1]
	}
	d.want += k
	d.ent += ent
}

// tierOf ranks the parts of owner for leaf l's grants
// (docs/rules.md#ownership-placement): its own, then its ancestors' private
// parts nearest first, then public, then parts lent by others.
func (pl *placement) tierOf(l, owner int32) int64 {
	switch {
	case owner == l:
		return 0
	case owner == noNode:
		return 1 << 40
	case pl.t.contains(owner, l):
		return 1 + int64(pl.t.nodes[l].depth-pl.t.nodes[owner].depth)
	}
	return 1 << 41
}

// holdOn is what leaf holds on host h now.
func (pl *placement) holdOn(leaf, h int32) Slots {
	hs := pl.holders[h] // in path order, so by id
	if j, ok := slices.BinarySearchFunc(hs, leaf, func(x leafSlots, l int32) int { return cmp.Compare(x.leaf, l) }); ok {
		return hs[j].slots
	}
	return 0
}

// partsOfHost is the range of parts on host h.
func (pl *placement) partsOfHost(h int32) (int, int) {
	i := pl.hostAt[h]
	j := i
	for j < len(pl.parts) && pl.parts[j].host == h {
		j++
	}
	return i, j
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
	// Leaves that keep all they hold first, host by host; then those
	// giving slots up keep on the hosts a claimant would use last (least
	// free, then name descending), so what they give up is where the
	// claimants go first (docs/rules.md#placement: a reclaim takes the
	// victim's slots from the host the claimant would use first).
	for _, h := range withParts {
		pl.keepOn(h, left[h], false)
	}
	slices.SortFunc(withParts, func(a, b int32) int {
		x, y := &pl.hosts[a], &pl.hosts[b]
		return cmp.Or(cmp.Compare(x.free(), y.free()), cmp.Compare(y.name, x.name))
	})
	for _, h := range withParts {
		pl.keepOn(h, left[h], true)
	}
}

// keepOn is step 1 on host h for the leaves giving slots up (losing) or
// the others.
func (pl *placement) keepOn(h int32, left []Slots, losing bool) {
	i0, i1 := pl.partsOfHost(h)
	hs, kept := pl.holders[h], pl.kept[h]
	var keepers []int
	// First on the parts that are the holder's own tiers (its own part,
	// its ancestors' private parts, the public part), then on parts
	// others lend it: what a leaf already runs counts as its own slots
	// first, so what it gains on a lender's part is recorded as lent.
	for _, lent := range []bool{false, true} {
		for i := i0; i < i1; i++ {
			p := pl.parts[i]
			keepers = keepers[:0]
			for j, x := range hs {
				if left[j] > 0 && (pl.over[x.leaf] > 0) == losing && pl.lentTo(x.leaf, p.owner) == lent && pl.want(x.leaf, p.owner) > 0 {
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
					k, pl.cut = room, true
				}
				if k <= 0 {
					continue
				}
				left[j] -= k
				kept[j] += k
				d.want -= k
				d.ent -= minSlots(k, d.ent) // what it holds counts as its guarantee first
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

// reserve orders each leaf owner's parts and keeps what it still needs of
// its own slots on them, by preference (desc), then most slots, then host
// name. Unless the pool reclaims for preference, the owner first takes
// the free slots of its parts in that order, and reserves the slots
// borrowers hold (returns) only for what is still missing. Borrowers keep
// only what is not reserved.
func (pl *placement) reserve() {
	for _, o := range pl.leaves {
		if pl.want(o, o) == 0 || len(pl.idx.byOwner[o]) == 0 {
			continue
		}
		mine := slices.Clone(pl.idx.byOwner[o])
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

// hostFree is how many slots of a host nobody holds now.
func (pl *placement) hostFree(h int32) Slots { return pl.hosts[h].slots - pl.hosts[h].used }

// place is step 2: leaves by rank, each its own parts in the order
// reserved, then each owner's parts it is still due slots of, the part
// with most room first, then host name.
func (pl *placement) place() {
	if !pl.rules.phased {
		leaves := pl.byRank()
		slices.SortStableFunc(leaves, pl.claimantOrder)
		for _, l := range leaves {
			pl.placeOwn(l)
			pl.placeWants(l, pl.rules.grant, func(d *dueShare) Slots { return d.want })
		}
		return
	}
	leaves := slices.Clone(pl.leaves)
	slices.SortFunc(leaves, pl.t.entitledOrder)
	for _, l := range leaves {
		pl.placeOwn(l)
		pl.placeWants(l, pl.rules.grant, func(d *dueShare) Slots { return minSlots(d.ent, d.want) })
	}
	slices.SortFunc(leaves, pl.t.borrowOrder)
	for _, l := range leaves {
		pl.placeWants(l, pl.rules.borrow, func(d *dueShare) Slots { return d.want })
	}
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
	for _, i := range pl.ownOrder[l] {
		if k := minSlots(pl.want(l, l), pl.capRem[i]); k > 0 {
			pl.put(l, l, i, k, RuleOwnUse)
		}
	}
}

// placeWants places up to due(l, owner) of what leaf l is due of each
// owner's parts, its tiers in order, the roomiest part first.
func (pl *placement) placeWants(l int32, rule Rule, due func(*dueShare) Slots) {
	for _, owner := range pl.wants[l] {
		d := pl.dueOf(l, owner)
		for k := due(d); k > 0; k = due(d) {
			best := pl.roomiest(owner)
			if best < 0 {
				break
			}
			pl.put(l, owner, best, minSlots(k, pl.capRem[best]), rule)
		}
	}
}

// put places k slots of leaf l's due share of owner's parts in part i.
func (pl *placement) put(l, owner int32, i int, k Slots, rule Rule) {
	d := pl.dueOf(l, owner)
	d.want -= k
	d.ent -= minSlots(k, d.ent)
	pl.touch(i)
	pl.capRem[i] -= k
	pl.placed = append(pl.placed, placing{leaf: l, part: i, slots: k, rule: rule})
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
		for _, i := range pl.idx.byOwner[owner] {
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
func (h *partHeap) Push(x any)    { h.items = append(h.items, x.(partRoom)) }
func (h *partHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// pair is step 3: the slots each leaf gave up on a host (held, not kept)
// are paired with the slots others gained there. Gains come in the order
// they were placed (leaves by rank, each by tier), so the decisions read
// as the fold: first an owner (or a descendant of a parent owner)
// gaining its own part takes it back from whoever sits there (return);
// then slots a leaf gives up while it is not losing overall (it is placed
// elsewhere) are released (release.moved), so only what a leaf holds
// above its target can be reclaimed; then the remaining gains take those
// (reclaim), then free slots (grant, or lend on another consumer's part);
// what is still given up is released.
func (pl *placement) pair() {
	hs := make(map[int32]*hostLoss, len(pl.hosts0)) // the hosts of hosts0; others lose nothing
	for _, h := range pl.hosts0 {
		hs[h] = pl.lossesOn(h)
	}
	none := &hostLoss{}
	lossOn := func(h int32) *hostLoss {
		if hl := hs[h]; hl != nil {
			return hl
		}
		return none
	}
	gains := slices.Clone(pl.placed)
	for g := range gains { // a leaf giving up one part and gaining another on a host stays
		x := &gains[g]
		hl := lossOn(pl.parts[x.part].host)
		relabel := minSlots(x.slots, hl.lost[x.leaf])
		x.slots -= relabel
		if relabel > 0 {
			hl.lost[x.leaf] -= relabel
		}
	}
	for _, h := range pl.hosts0 {
		hl := hs[h]
		slices.SortFunc(hl.losers, func(a, b int32) int { return pl.giveBackOrder(hl.lost, a, b) })
	}
	for g := range gains { // returns
		x := &gains[g]
		h := pl.parts[x.part].host
		hl := lossOn(h)
		for _, v := range hl.losers {
			if x.slots == 0 {
				break
			}
			if n := minSlots(x.slots, hl.lost[v]); n > 0 && pl.isReturn(x.leaf, v, pl.parts[x.part].owner) {
				hl.lost[v] -= n
				x.slots -= n
				pl.moves = append(pl.moves, placeMove{kind: KindReturn, leaf: x.leaf, from: v, host: h, slots: n, rule: RuleOwnReturn, graceOf: pl.parts[x.part].owner})
			}
		}
	}
	for _, h := range pl.hosts0 { // moves: given up by a leaf placed elsewhere
		hl := hs[h]
		for _, v := range hl.losers {
			if moved := hl.lost[v] - minSlots(hl.lost[v], pl.over[v]); moved > 0 {
				hl.lost[v] -= moved
				pl.moves = append(pl.moves, placeMove{kind: KindRelease, leaf: v, from: noNode, host: h, slots: moved, rule: RuleMoved, graceOf: noNode})
			}
		}
	}
	// What is gained on a host beyond what is given up there comes from
	// free slots. Each leaf takes free slots first, on every host it
	// gains on, then what others give up (docs/rules.md#share-ratio: free
	// slots are used first).
	free := map[int32]Slots{}
	for _, x := range gains {
		free[pl.parts[x.part].host] += x.slots
	}
	for _, h := range pl.hosts0 {
		for _, v := range hs[h].losers {
			free[h] -= hs[h].lost[v]
		}
	}
	for i := 0; i < len(gains); {
		j := i
		for j < len(gains) && gains[j].leaf == gains[i].leaf {
			j++
		}
		for g := i; g < j; g++ {
			x := &gains[g]
			h := pl.parts[x.part].host
			if n := minSlots(x.slots, free[h]); n > 0 {
				pl.grant(*x, n)
				x.slots -= n
				free[h] -= n
			}
		}
		for g := i; g < j; g++ {
			if x := gains[g]; x.slots > 0 {
				hl := lossOn(pl.parts[x.part].host)
				pl.gain(x, hl.losers, hl.lost)
			}
		}
		i = j
	}
	for _, h := range pl.hosts0 {
		for _, v := range hs[h].losers {
			if k := hs[h].lost[v]; k > 0 {
				pl.moves = append(pl.moves, placeMove{kind: KindRelease, leaf: v, from: noNode, host: h, slots: k, rule: RuleMoved, graceOf: noNode})
			}
		}
	}
}

// hostLoss is what leaves give up on one host: held there, not kept.
type hostLoss struct {
	losers []int32
	lost   map[int32]Slots
}

func (pl *placement) lossesOn(h int32) *hostLoss {
	hl := &hostLoss{lost: map[int32]Slots{}}
	for j, x := range pl.holders[h] {
		keptHere := Slots(0)
		if pl.kept[h] != nil {
			keptHere = pl.kept[h][j]
		}
		if k := x.slots - keptHere; k > 0 {
			hl.lost[x.leaf] = k
			hl.losers = append(hl.losers, x.leaf)
		}
	}
	return hl
}

// giveBackOrder: lowest priority first, then most slots given up on the
// host, then path.
func (pl *placement) giveBackOrder(lost map[int32]Slots, a, b int32) int {
	x, y := &pl.t.nodes[a], &pl.t.nodes[b]
	if x.priority != y.priority {
		return cmp.Compare(x.priority, y.priority)
	}
	if lost[a] != lost[b] {
		return cmpDesc(lost[a], lost[b])
	}
	return cmp.Compare(a, b)
}

// gain records what a placing gains: taken from what leaves above their
// target give up on the host first (reclaim), then from free slots.
func (pl *placement) gain(x placing, losers []int32, lost map[int32]Slots) {
	k := x.slots
	reclaim := func(v int32, most Slots) Slots {
		n := minSlots(minSlots(k, lost[v]), most)
		if n <= 0 {
			return 0
		}
		lost[v] -= n
		pl.over[v] -= n
		k -= n
		pl.moves = append(pl.moves, placeMove{kind: KindReclaim, leaf: x.leaf, from: v, host: pl.parts[x.part].host, slots: n, rule: pl.rules.reclaim, graceOf: v})
		return n
	}
	owed := pl.owed[x.leaf]
	for i := range owed { // the victims the fold chose first
		owed[i].slots -= reclaim(owed[i].victim, owed[i].slots)
	}
	for _, v := range losers {
		if k == 0 {
			return
		}
		reclaim(v, Unlimited)
	}
	if k > 0 {
		pl.grant(x, k)
	}
}

// grant records k of placing x given from free slots: a grant on the
// leaf's own part (own.use), its ancestors' or the public part; a lend on
// a part another consumer owns.
func (pl *placement) grant(x placing, k Slots) {
	l, p := x.leaf, pl.parts[x.part]
	switch {
	case p.owner == l:
		pl.moves = append(pl.moves, placeMove{kind: KindGrant, leaf: l, from: noNode, host: p.host, slots: k, rule: RuleOwnUse, graceOf: noNode})
	case p.owner == noNode || pl.t.contains(p.owner, l):
		pl.moves = append(pl.moves, placeMove{kind: KindGrant, leaf: l, from: noNode, host: p.host, slots: k, rule: x.rule, graceOf: noNode})
	default:
		pl.moves = append(pl.moves, placeMove{kind: KindLend, leaf: l, from: p.owner, host: p.host, slots: k, rule: x.rule, graceOf: noNode})
	}
}

// isReturn reports whether leaf l taking slots of owner's part from v is
// the owner taking back what it lent: l is the owner, or a descendant of
// the owner while v is outside the owner's branch.
func (pl *placement) isReturn(l, v, owner int32) bool {
	if owner == noNode {
		return false
	}
	if owner == l {
		return true
	}
	return !pl.t.nodes[owner].leaf && pl.t.contains(owner, l) && !pl.t.contains(owner, v)
}

// deadline is when a move's slots must be free: its time plus the grace
// of the consumer named by graceOf (the lender's lend_grace for a return,
// the victim's reclaim_grace for a reclaim).
func (m placeMove) deadline(t *tree, at time.Time) *time.Time {
	if m.graceOf == noNode {
		return nil
	}
	g := t.nodes[m.graceOf].reclaimGrace
	if m.kind == KindReturn {
		g = t.nodes[m.graceOf].lendGrace
	}
	d := at.Add(g)
	return &d
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
