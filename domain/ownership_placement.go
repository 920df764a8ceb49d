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
	// part: for a grant or a lend, the owner of the part the slots are
	// in (noNode: the public part); rules 4's swap of returns (ruling 9,
	// return_swap.go) reads it.
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
	// of host h at the start of the rebalance (nil before).
	seated func(h, owner, leaf int32) Slots
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
	ownOrder map[int32][]int
	byOwner  map[int32]*partHeap // the parts of each owner, roomiest first
	hostAt   []int               // by host: index of its first part (len(parts) when none)
	// owed: by claimant, what the layered fold moved to it from each
	// victim (lookups only), paired first with what it gains.
	owed map[int32][]transfer
	// deficit: by leaf, what it is short of its target (share_ratio's
	// claimant order).
	deficit []Slots
	// target: in's (the leaves' layered targets T); t0: in's.
	target func(l int32) Slots
	t0     []Slots
	// keptAt: under keepSeating, what each leaf kept in each part;
	// reclaimed: on totals, what the T0 restore took from each victim on
	// each host (the only losses the pairing may record as reclaims).
	keptAt    map[partLeaf]Slots
	reclaimed map[seatKey]Slots
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
	due       func(l int32, add func(owner int32, want, ent Slots))
	target    func(l int32) Slots
	room      []Slots
	transfers []transfer
	// target0: rules 4's T0 (balance: false on totals, totals.go; nil
	// otherwise).
	target0 []Slots
	hosts   []int32 // the hosts where the leaves hold slots, in host order (nil: those of holders)
	// ineligible, by host: what leaves sit on in parts they may no longer
	// hold (rules 4 after a plan or host event; nil otherwise).
	ineligible [][]ineligibleSlots
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
		room: idx.fullRoom(), transfers: lt.transfers, target0: lt.t0}
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
		reserved: bufs.reserved, keptSum: bufs.keptSum, keptElse: bufs.keptElse, ineligible: in.ineligible}
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
			pl.keptAt[partLeaf{i, l}] += k
			left[j] -= k
			kept[j] += k
			pl.takeDue(l, p.owner, k)
			pl.touch(i)
			pl.capRem[i] -= k
			pl.keptSum[i] += k
			if l != p.owner {
				pl.keptElse[i] += k
			}
		}
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
		d.ent -= minSlots(n, d.ent)
		k -= n
	}
	for w := len(pl.wants[l]) - 1; w >= 0 && k > 0; w-- {
		if pl.wants[l][w] == l {
			continue
		}
		d := pl.dueOf(l, pl.wants[l][w])
		n := minSlots(k, d.want)
		d.want -= n
		d.ent -= minSlots(n, d.ent)
		k -= n
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
