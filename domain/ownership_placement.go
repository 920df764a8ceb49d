package domain

import (
	"cmp"
	"slices"
)

// Placement with ownership (docs/rules.md#ownership-placement): given where
// every leaf's slots sit and how many slots of each owner's hosts the layered
// targets give it (layered_targets.go), where the slots sit afterwards, and the
// decisions that move them there. Like the assignment and the layered
// targets, this is a pure function of its input; the fold calls it on
// every rebalance of a pool with ownership (ownership_fold.go rebalanceOwned).
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
	// part: for a grant, a lend or a reclaim of the pairing, the owner of
	// the part the slots are in (noNode: the public part); rules 4's swap
	// of returns (ruling 9, return_swap.go) reads it.
	part int32
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
	// RuleLendRevoked (rules 4): slots a leaf held on a part it may no
	// longer hold after a plan or host event, neither re-seated on the
	// host nor taken back by a return, released with the deadline of the
	// part owner's lend_grace.
	RuleLendRevoked Rule = "release.lend_revoked"
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
	// moveGrace and lendRevoked: rules 4's ruling 13 and 10 (behaviour).
	moveGrace, lendRevoked bool
	// seated, under rules 4 (ruling 11): what leaf sits on in owner's part
	// of host h at the start of the rebalance (nil before), as the fold
	// seats it (under priority, the rounds of ruling 12); step 1 keeps it.
	// returnSeated is the same by the keepers' seating (ruling 8,
	// docs/rules.md#seating): the borrowers an owner's return is paired
	// with. The rounds seat an owner's own use on its part before anyone
	// else, so a borrower on the part an owner takes back whole sits
	// nowhere in them; ruling 8 seats holders by what they hold
	// (docs/decisions.md #341).
	seated, returnSeated func(h, owner, leaf int32) Slots
	// onTotals, under rules 4 with share_ratio without preemption (ruling
	// 4): step 2 fills on totals (fill_on_totals.go).
	onTotals bool
	// keepSeating, under rules 4 without preemption (ruling 7) or on
	// totals (ruling 4): step 1 keeps what each holder sits on in every
	// part it may hold but what its owner takes back (keepSeated).
	keepSeating bool
	// noReclaim, under rules 4 without preemption (ruling 7): what a
	// holder still loses is released before gains are paired, so nothing
	// is reclaimed or moved.
	noReclaim bool
	// keepMore, under rules 4: step 1 keeps along augmenting paths what
	// its greedy pass could not (ownership_keep_more.go).
	keepMore bool
	// returnsFromKeepers, under rules 4's share_ratio with preemption on
	// the layered targets: an owner's gain is paired as a return with a
	// borrower seated on its part that step 1 kept elsewhere on the host
	// (returnFromKeepers).
	returnsFromKeepers bool
	// swapDues, under rules 4 with preemption: the last keep swaps dues
	// between two leaves that may both hold both parts rather than move
	// one (keepInstead, swapDues).
	swapDues bool
	// restrictiveFirst, under rules 4: parts lent in a restrictive class
	// come before the pool's own (tree.restrictiveFor).
	restrictiveFirst bool
	// victimOwnLast, under rules 4: the T0 restore takes a victim's slots
	// on its own parts last (fill_on_totals.go reclaimFrom).
	victimOwnLast bool
	// excessByReleaseOrder, under rules 4 with preemption: what a leaf
	// holds beyond E less its own layer is given back in section 5's
	// release order before step 1 keeps the rest (releaseExcessFirst).
	excessByReleaseOrder bool
	// excessWithoutPreemption: the same where step 1 keeps what each
	// holder sits on (without preemption, or on totals): ruling 5 gives
	// the owner's excess back in the release order under every policy
	// (docs/decisions.md #404).
	excessWithoutPreemption bool
	// freeFirst, under rules 4 with preemption: step 2 places each
	// leaf's due on hosts with slots free as the placement started before
	// on slots others give up, so a claimant served first takes free
	// slots and the next reclaims (section 4: "Free slots are used
	// first"; nextPart). Without preemption nothing is reclaimed, and
	// the placement keeps where it placed before (ruling 7).
	freeFirst bool
	// freeBeforeKeepers, under rules 4: returnFromKeepers takes from the
	// borrowers seated on an owner's part only what the part's free slots
	// do not cover (ruling 5; docs/decisions.md #379).
	freeBeforeKeepers bool
	// freeByPart, under rules 4: the pairing gives a leaf the free slots
	// of a host from the parts that had them as the rebalance started
	// first, so the grant or lend names the part the slot is in
	// (docs/decisions.md #380).
	freeByPart bool
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
	holders [][]leafSlots // by host: who of the leaves taking part holds slots there now, path order
	// ineligible: placeInput's, counted down as returns and releases take
	// those slots (ownership_pairing.go).
	ineligible [][]ineligibleSlots
	hosts0     []int32           // the hosts where they hold slots, in host order
	kept       map[int32][]Slots // by host, by holder: the slots kept there in step 1
	placed     []placing         // step 2, in the order placed
	over       map[int32]Slots   // by leaf: what it holds above its target, which may be reclaimed
	moves      []placeMove
	// reserved: by part, the slots of a leaf owner's part kept for the
	// owner's own use (no one else keeps them); ownOrder: by owner, its
	// parts in the order it uses them.
	reserved []Slots
	// outsiderRoom: by part of a parent owner whose subtree takes slots
	// back, what the leaves outside the subtree may still keep there
	// (reserveTakeBacks).
	outsiderRoom map[int]Slots
	ownOrder     map[int32][]int
	byOwner      map[int32]*partHeap // the parts of each owner, roomiest first
	// freeFirst: freeLeft, by host, what step 2 has not placed yet of the
	// slots free as the placement started (absent: all of them), and
	// freeByOwner, each owner's parts on such hosts (freest).
	freeLeft    map[int32]Slots
	freeByOwner map[int32]*partHeap
	// excessFreed: by host, what owners gave back there as their excess
	// (releaseExcessFirst), free for the share rules of the same event
	// (ruling 5): counted with the slots free as the placement started.
	excessFreed map[int32]Slots
	useOrder    map[int32]*partCursor // each owner's parts in the order a claimant uses them (usedFirst)
	hostAt      []int                 // by host: index of its first part (len(parts) when none)
	keepCand    [][]int               // keepOn's scratch: by part of the host, who may keep there
	ownerPart   []int32               // keepOn's scratch: by owner, its part on the host
	// owed: by claimant, what the layered fold moved to it from each
	// victim (lookups only), paired first with what it gains.
	owed map[int32][]transfer
	// deficit: by leaf, what it is short of its target (share_ratio's
	// claimant order).
	deficit []Slots
	// target: in's (the leaves' layered targets T); t0: in's.
	target func(l int32) Slots
	t0     *guarantees
	// keptAt: under keepSeating, what each leaf kept in each part;
	// reclaimed: on totals, what the T0 restore took from each victim on
	// each host (the only losses the pairing may record as reclaims).
	keptAt    map[partLeaf]Slots
	reclaimed map[seatKey]Slots
	// keptSum: by part, what step 1 kept there; keptElse, of it, what
	// leaves other than the part's owner kept.
	keptSum, keptElse []Slots
	cutAt             []int // the parts where step 1 cut some keep for want of room
	// cur: under rules 4 without preemption with a max in the tree, by
	// leaf, what it keeps and is placed so far, and by parent the sum of
	// its leaves' (hold; grants fit under every max with it); nil
	// otherwise.
	cur []Slots
	b   *placeBufs
}

// dueShare is what a leaf is due of one owner's parts (owner noNode: the
// public parts): want, of which ent within its guarantee (priority).
type dueShare struct {
	owner     int32
	want, ent Slots
	// kept, keptEnt: of want, what the divisions counted as kept where the
	// leaf sits, and the entitled among it (poolTake); step 1's keeps count
	// against those first (keepEnt).
	kept, keptEnt Slots
}

// keepEnt counts k slots kept against the due and returns how many of
// them are within its guarantee: what the divisions counted as kept is
// entitled as they said (each pool's guarantee is its own, ruling 1), a
// keep beyond it stands in for a gain and is entitled while any is left
// (docs/decisions.md #472). Without the divisions' count (rules 3, the
// kept fold) every slot kept is entitled while any is left.
func (d *dueShare) keepEnt(k Slots) Slots {
	in := minSlots(k, d.kept)
	e := minSlots(in, d.keptEnt)
	d.kept, d.keptEnt = d.kept-in, d.keptEnt-e
	return minSlots(e+k-in, d.ent)
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

// partLeaf names a leaf's slots in one part.
type partLeaf struct {
	part int
	leaf int32
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

// placeInput is what one run covers: the leaves taking part, in path
// order; by host, what they hold there (path order); each one's due
// shares (ownUse, then its takes) and target; by part of the index, the
// room the leaves left out leave (the slots they keep there taken away);
// and the fold's transfers.
type placeInput struct {
	leaves    []int32
	holders   [][]leafSlots
	due       func(l int32, add func(dueShare))
	target    func(l int32) Slots
	room      []Slots
	transfers []transfer
	// target0: rules 4's T0 (balance: false on totals, totals.go; nil
	// otherwise), from the allocations after the own layer's returns.
	target0 *guarantees
	hosts   []int32 // the hosts where the leaves hold slots, in host order (nil: those of holders)
	// ineligible, by host: what leaves sit on in parts they may no longer
	// hold (rules 4 after a plan or host event; nil otherwise).
	ineligible [][]ineligibleSlots
}

// everyLeaf is a placement of every leaf on the layered targets of a full
// fold, on the whole room of every part.
func (lt layeredTargets) everyLeaf(t *tree, idx *partIndex, holders [][]leafSlots) placeInput {
	// The takes grouped by leaf in one backing array, each leaf's in the
	// order taken.
	at := make([]int32, len(t.nodes)+1)
	for _, tk := range lt.takes {
		at[tk.leaf+1]++
	}
	for i := 1; i < len(at); i++ {
		at[i] += at[i-1]
	}
	grouped := make([]poolTake, len(lt.takes))
	next := slices.Clone(at[:len(t.nodes)])
	for _, tk := range lt.takes {
		grouped[next[tk.leaf]] = tk
		next[tk.leaf]++
	}
	byLeaf := make([][]poolTake, len(t.nodes))
	for l := range byLeaf {
		if at[l] < at[l+1] {
			byLeaf[l] = grouped[at[l]:at[l+1]:at[l+1]]
		}
	}
	return placeInput{leaves: t.sortedLeaves, holders: holders, due: lt.dueFrom(byLeaf), target: func(l int32) Slots { return lt.target[l] },
		room: idx.fullRoom(), transfers: lt.transfers, target0: lt.t0}
}

// dueFrom hands out a leaf's due shares: its own layer, then its takes
// (byLeaf: the takes by leaf).
func (lt layeredTargets) dueFrom(byLeaf [][]poolTake) func(l int32, add func(dueShare)) {
	return func(l int32, add func(dueShare)) {
		if k := lt.ownUse[l]; k > 0 {
			add(dueShare{owner: l, want: k})
		}
		for _, tk := range byLeaf[l] {
			add(dueShare{owner: tk.takeOwner(), want: tk.slots, ent: tk.entitled, kept: tk.kept, keptEnt: tk.keptEnt})
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
		reserved: bufs.reserved, keptSum: bufs.keptSum, keptElse: bufs.keptElse, ineligible: in.ineligible}
	if rules.freeFirst {
		pl.freeLeft, pl.freeByOwner, pl.useOrder, pl.excessFreed = map[int32]Slots{}, map[int32]*partHeap{}, map[int32]*partCursor{}, map[int32]Slots{}
	}
	pl.hosts0, pl.target, pl.t0, pl.keptAt, pl.reclaimed = in.hosts, in.target, in.target0, map[partLeaf]Slots{}, map[seatKey]Slots{}
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
		in.due(l, func(d dueShare) { pl.addWant(l, d) })
		pl.sortWants(l)
	}
	pl.owed = map[int32][]transfer{}
	for _, tr := range in.transfers {
		pl.owed[tr.claimant] = append(pl.owed[tr.claimant], tr)
	}
	pl.reserve()
	if rules.keepSeating && !rules.onTotals {
		pl.reserveTakeBacks()
	}
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
func (pl *placement) firstPart(owner int32) int { return pl.idx.first(owner) }

// addWant adds a due share (want slots of owner's parts, ent of them
// within the leaf's guarantee, kept and keptEnt as the divisions counted
// them) to what leaf is due.
func (pl *placement) addWant(leaf int32, add dueShare) {
	d := pl.dueOf(leaf, add.owner)
	if d == nil {
		pl.wants[leaf] = append(pl.wants[leaf], add.owner)
		pl.due[leaf] = append(pl.due[leaf], dueShare{owner: add.owner})
		d = &pl.due[leaf][len(pl.due[leaf])-1]
	}
	d.want += add.want
	d.ent += add.ent
	d.kept += add.kept
	d.keptEnt += add.keptEnt
}

// sortWants puts leaf l's dues in the order it uses them: by tier, then
// the owner's first part.
func (pl *placement) sortWants(l int32) {
	slices.SortFunc(pl.wants[l], func(a, b int32) int {
		return cmp.Or(cmp.Compare(pl.tierOf(l, a), pl.tierOf(l, b)), cmp.Compare(pl.firstPart(a), pl.firstPart(b)))
	})
}

// tierOf ranks the parts of owner for leaf l's grants
// (docs/rules.md#ownership-placement): its own, then its ancestors' private
// parts nearest first, then public, then parts lent by others.
func (pl *placement) tierOf(l, owner int32) int64 {
	if pl.rules.restrictiveFirst {
		return pl.tierOf4(l, owner)
	}
	return pl.tierOfPart(l, owner)
}

// tierOfPart is tierOf without rules 4's restrictive classes; section 5's
// release order is its reverse (ownership_excess.go).
func (pl *placement) tierOfPart(l, owner int32) int64 {
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

// tierOf4 is tierOf under rules 4: pools nearest first, in each the parts
// lent in a restrictive class before the pool's own (tree.restrictiveFor),
// the public pool last; other lent parts after all of them.
func (pl *placement) tierOf4(l, owner int32) int64 {
	t := pl.t
	depth := int64(t.nodes[l].depth)
	switch {
	case owner == l:
		return 0
	case owner == noNode:
		return 2 + 2*depth
	case t.contains(owner, l):
		return 2 + 2*(depth-int64(t.nodes[owner].depth))
	case t.restrictiveFor(l, owner):
		return 1 + 2*(depth-int64(t.nodes[t.commonAncestor(owner, l)].depth))
	}
	return 1 << 41
}
