package domain

// The placement's step 3 (docs/rules.md#ownership-placement): host by
// host, the slots leaves gain paired with those others give up there,
// which makes the return, reclaim, grant, lend and release decisions.

import (
	"cmp"
	"slices"
	"time"
)

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
	relabeled := make([]Slots, len(gains)) // by gain: what was netted against its leaf's loss on the host
	for g := range gains {                 // a leaf giving up one part and gaining another on a host stays
		x := &gains[g]
		h := pl.parts[x.part].host
		hl := lossOn(h)
		// Under rules 4 what the leaf loses of a part it may no longer
		// hold is released (ruling 10), not netted against what it gains
		// on the host: the gain is then recorded on its own (a reclaim,
		// a grant; docs/decisions.md #330).
		relabel := minSlots(x.slots, maxSlots(hl.lost[x.leaf]-pl.ineligibleOn(h, x.leaf), 0))
		x.slots -= relabel
		relabeled[g] = relabel
		if relabel > 0 {
			hl.lost[x.leaf] -= relabel
		}
	}
	// unnet gives back to leaf v's gains on host h up to k of what was
	// netted against its loss there, and returns how much.
	// Only the gains placed before the returns were netted (relabeled):
	// those returnFromKeepers appends never are.
	unnet := func(v, h int32, k Slots) Slots {
		done := Slots(0)
		for g := range relabeled {
			if x := &gains[g]; x.leaf == v && pl.parts[x.part].host == h && relabeled[g] > 0 && done < k {
				n := minSlots(relabeled[g], k-done)
				relabeled[g] -= n
				x.slots += n
				done += n
			}
		}
		return done
	}
	netted := func(v, h int32) Slots {
		n := Slots(0)
		for g := range relabeled {
			if gains[g].leaf == v && pl.parts[gains[g].part].host == h {
				n += relabeled[g]
			}
		}
		return n
	}
	for _, h := range pl.hosts0 {
		hl := hs[h]
		slices.SortFunc(hl.losers, func(a, b int32) int { return pl.giveBackOrder(hl.lost, a, b) })
	}
	var seatedLeft map[seatKey]Slots // rules 4: what each borrower still sits on in a part, as returns take it
	if pl.rules.returnSeated != nil {
		seatedLeft = map[seatKey]Slots{}
	}
	order := make([]int, len(gains))
	for g := range order {
		order[g] = g
	}
	if seatedLeft != nil && pl.rules.phased {
		// Rules 4 under priority: a return pairs with what a gain borrows
		// before what it is entitled to. Section 4's entitled leaves take
		// free slots first and the borrow step comes after, so the slots
		// free slots cannot cover, which the owner's branch takes back, are
		// the borrowed ones (docs/decisions.md #341).
		borrowsFirst := func(g int) int {
			if gains[g].rule == pl.rules.borrow {
				return 0
			}
			return 1
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(borrowsFirst(a), borrowsFirst(b)) })
	}
	// usedFree: by part, the free slots an owner's gain took before its
	// returns (rules 4).
	var usedFree map[int]Slots
	for _, g := range order { // returns
		x := &gains[g]
		h, owner := pl.parts[x.part].host, pl.parts[x.part].owner
		hl := lossOn(h)
		if pl.rules.freeBeforeKeepers && seatedLeft != nil && x.slots > 0 && owner == x.leaf && !pl.rules.noReclaim && pl.seatedLosing(h, owner, hl) {
			// Rules 4 (ruling 5): an owner takes the free slots of its
			// part first and takes back from borrowers only the rest,
			// though a borrower gives its slot up anyway: a share
			// claimant takes that one (engine dispute 31).
			if usedFree == nil {
				usedFree = map[int]Slots{}
			}
			if k := minSlots(x.slots-pl.ineligibleOf(h, owner), pl.freeAtStart(x.part)-usedFree[x.part]); k > 0 {
				pl.grant(*x, k)
				x.slots -= k
				usedFree[x.part] += k
			}
		}
		// most: what the owner may still take back from borrowers that
		// keep slots on the host (netted, or kept by step 1). Under rules 4
		// it takes the free slots of its part first (ruling 5; #379).
		// Worked out when a return first needs it: most gains are no
		// owner's take-back.
		most, mostKnown := Unlimited, !(pl.rules.freeBeforeKeepers && seatedLeft != nil)
		gain := x.slots
		mostNow := func() Slots {
			if !mostKnown {
				most, mostKnown = maxSlots(gain-(pl.freeAtStart(x.part)-usedFree[x.part]), 0), true
			}
			return most
		}
		for _, v := range hl.losers {
			if x.slots == 0 {
				break
			}
			n := minSlots(x.slots, hl.lost[v])
			if seatedLeft != nil && pl.isReturn(x.leaf, v, owner) {
				// Rules 4 (ruling 11): the owner's gain is paired with
				// what the borrower sits on in its part at the start,
				// though the borrower gains slots elsewhere on the host in
				// the same event: those gains, netted against the loss,
				// are given back to be paired on their own (a return, then
				// the borrower's grant or reclaim; docs/decisions.md #328).
				k := seatKey{h, owner, v}
				left, ok := seatedLeft[k]
				if !ok {
					left = pl.rules.returnSeated(h, owner, v)
				}
				n = minSlots(minSlots(x.slots, hl.lost[v]+minSlots(netted(v, h), maxSlots(mostNow()-hl.lost[v], 0))), left)
				if n > hl.lost[v] {
					hl.lost[v] += unnet(v, h, n-hl.lost[v])
				}
				seatedLeft[k] = left - n
			}
			if n > 0 && pl.isReturn(x.leaf, v, owner) {
				if mostKnown && most != Unlimited {
					most = maxSlots(most-n, 0)
				}
				hl.lost[v] -= n
				x.slots -= n
				pl.moves = append(pl.moves, placeMove{kind: KindReturn, leaf: x.leaf, from: v, host: h, slots: n, rule: RuleOwnReturn, graceOf: owner})
				pl.takeIneligible(h, v, owner, n)
			}
		}
		if x.slots > 0 && seatedLeft != nil && pl.rules.returnsFromKeepers {
			gains = pl.returnFromKeepers(g, gains, hl, seatedLeft, netted, mostNow())
		}
	}
	if pl.ineligible != nil {
		// Rules 4 (ruling 10): what a leaf sits on in a part it may no
		// longer hold, and the part's owner did not take back, is released
		// at once (release.lend_revoked), never another leaf's reclaim: the
		// share rules' gains take it as free slots (docs/decisions.md
		// #326).
		for _, h := range pl.hosts0 {
			hl := hs[h]
			for _, v := range hl.losers {
				if k := minSlots(hl.lost[v], pl.ineligibleOn(h, v)); k > 0 {
					hl.lost[v] -= k
					pl.releaseLost(v, h, k)
				}
			}
		}
	}
	for _, h := range pl.hosts0 { // moves: given up by a leaf placed elsewhere
		hl := hs[h]
		for _, v := range hl.losers {
			if moved := hl.lost[v] - minSlots(hl.lost[v], pl.over[v]); moved > 0 {
				hl.lost[v] -= moved
				pl.releaseLost(v, h, moved)
			}
		}
	}
	if pl.rules.noReclaim || pl.rules.onTotals {
		// Rules 4 without preemption: no reclaim (ruling 7); on totals
		// (ruling 4) only what the T0 restore took is reclaimed: every
		// other loss is released before gains are paired.
		for _, h := range pl.hosts0 {
			for _, v := range hs[h].losers {
				if k := hs[h].lost[v] - pl.reclaimed[seatKey{host: h, leaf: v}]; k > 0 {
					hs[h].lost[v] -= k
					pl.releaseLost(v, h, k)
				}
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
	var partFree map[int]Slots // freeByPart: by part, its slots free as the rebalance started not granted yet
	if pl.rules.freeByPart && pl.rules.returnSeated != nil {
		partFree = map[int]Slots{}
	}
	for i := 0; i < len(gains); {
		j := i
		for j < len(gains) && gains[j].leaf == gains[i].leaf {
			j++
		}
		if partFree != nil {
			// Rules 4: a leaf's free slots on a host are those of the parts
			// that had them, so a free slot of a lent part is a lend even
			// when the leaf also reclaims on the host (#380).
			for g := i; g < j; g++ {
				x := &gains[g]
				h := pl.parts[x.part].host
				if x.slots == 0 || free[h] == 0 {
					continue // nothing free to name a part for
				}
				left, ok := partFree[x.part]
				if !ok {
					left = pl.freeAtStart(x.part) - usedFree[x.part]
				}
				if n := minSlots(minSlots(x.slots, free[h]), left); n > 0 {
					pl.grant(*x, n)
					x.slots -= n
					free[h] -= n
					left -= n
				}
				partFree[x.part] = left
			}
		}
		for g := i; g < j; g++ {
			x := &gains[g]
			h := pl.parts[x.part].host
			want := x.slots
			if partFree != nil {
				// Rules 4: what the fold has the leaf reclaim from a victim
				// losing slots on the host is taken from that victim, not
				// from another part's free slots, which the leaf's pool did
				// not have: another pool's claimant takes those (#409).
				want -= minSlots(want, pl.owedOn(x.leaf, lossOn(h).lost))
			}
			if n := minSlots(want, free[h]); n > 0 {
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
				pl.releaseLost(v, h, k)
			}
		}
	}
}

// owedOn is what leaf l is owed by the fold's victims that lose slots in
// lost (one host's losses).
func (pl *placement) owedOn(l int32, lost map[int32]Slots) Slots {
	n := Slots(0)
	for _, o := range pl.owed[l] {
		n += minSlots(o.slots, lost[o.victim])
	}
	return n
}

// seatKey names a borrower's seat in an owner's part of a host.
type seatKey struct{ host, owner, leaf int32 }

// ineligibleSlots is what a leaf sits on, on one host, in a part it may no
// longer hold (docs/rules.md#version-4, ruling 10): the owner of the part
// and the slots.
type ineligibleSlots struct {
	leaf, owner int32
	slots       Slots
}

// takeIneligible counts down leaf v's ineligible slots of owner's part on
// host h by what a return took.
func (pl *placement) takeIneligible(h, v, owner int32, n Slots) {
	if pl.ineligible == nil {
		return
	}
	for i := range pl.ineligible[h] {
		if x := &pl.ineligible[h][i]; x.leaf == v && x.owner == owner && n > 0 {
			k := minSlots(n, x.slots)
			x.slots -= k
			n -= k
		}
	}
}

// ineligibleOn is what leaf v still sits on, on host h, in parts it may no
// longer hold.
func (pl *placement) ineligibleOn(h, v int32) Slots {
	n := Slots(0)
	if int(h) >= len(pl.ineligible) {
		return 0
	}
	for _, x := range pl.ineligible[h] {
		if x.leaf == v {
			n += x.slots
		}
	}
	return n
}

// seatedLosing reports whether a leaf giving slots up on host h sits on
// owner's part there: the owner's gain would otherwise be paired with it.
func (pl *placement) seatedLosing(h, owner int32, hl *hostLoss) bool {
	return slices.ContainsFunc(hl.losers, func(v int32) bool {
		return hl.lost[v] > 0 && pl.isReturn(owner, v, owner) && pl.rules.returnSeated(h, owner, v) > 0
	})
}

// ineligibleOf is what leaves still sit on, on host h, in owner's part
// while they may no longer hold it: the owner takes those back first
// (ruling 10: by a return, when the part's owner takes it in this event).
func (pl *placement) ineligibleOf(h, owner int32) Slots {
	n := Slots(0)
	if int(h) < len(pl.ineligible) {
		for _, x := range pl.ineligible[h] {
			if x.owner == owner {
				n += x.slots
			}
		}
	}
	return n
}

// releaseLost releases k slots leaf v gave up on host h that nobody took
// there: under rules 4, first those it sat on in parts it may no longer
// hold (release.lend_revoked, with the part owner's lend_grace: ruling
// 10), then the rest as a move (release.moved, with v's reclaim_grace:
// ruling 13); before, all as release.moved without a deadline.
func (pl *placement) releaseLost(v, h int32, k Slots) {
	if pl.ineligible != nil {
		for i := range pl.ineligible[h] {
			if x := &pl.ineligible[h][i]; x.leaf == v && x.slots > 0 && k > 0 {
				n := minSlots(k, x.slots)
				x.slots -= n
				k -= n
				pl.moves = append(pl.moves, placeMove{kind: KindRelease, leaf: v, from: noNode, host: h, slots: n, rule: RuleLendRevoked, graceOf: x.owner})
			}
		}
	}
	if k == 0 {
		return
	}
	grace := noNode
	if pl.rules.moveGrace {
		grace = v
	}
	pl.moves = append(pl.moves, placeMove{kind: KindRelease, leaf: v, from: noNode, host: h, slots: k, rule: RuleMoved, graceOf: grace})
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

// returnFromKeepers is rules 4's return from a borrower seated on the
// owner's part of the host that step 1 kept on the host, on another part
// (docs/decisions.md #342; ruling 11: the owner's gain is paired only with
// the slots leaves are seated on in its part). The borrower gives the
// owner what it sits on there, up to what is left of gains[g], and is
// given as much on the part it kept, a placing appended to gains and paired
// like the others (free slots, then what others give up on the host), so
// nobody's count changes: return /p from /w, then reclaim /w from /v
// where the engine recorded reclaim /p from /v. Only under share_ratio
// with preemption, where a leaf below its target takes from those above.
// most bounds what it takes back so (freeBeforeKeepers: what the free
// slots of the part do not cover, #379).
func (pl *placement) returnFromKeepers(g int, gains []placing, hl *hostLoss, seatedLeft map[seatKey]Slots, netted func(v, h int32) Slots, most Slots) []placing {
	x := gains[g]
	h, owner := pl.parts[x.part].host, pl.parts[x.part].owner
	i0, i1 := pl.partsOfHost(h)
	for _, b := range pl.holders[h] {
		if gains[g].slots == 0 || most == 0 {
			break
		}
		v := b.leaf
		if v == x.leaf || hl.lost[v] > 0 || netted(v, h) > 0 || !pl.isReturn(x.leaf, v, owner) {
			continue
		}
		k := seatKey{h, owner, v}
		seated, ok := seatedLeft[k]
		if !ok {
			seated = pl.rules.returnSeated(h, owner, v)
		}
		// the part it is given its slots back on: another part of the
		// host it may hold, its nearest tier first (tierOf: its own, its
		// ancestors' private parts, public, then parts lent to it)
		at := -1
		for i := i0; i < i1; i++ {
			if o := pl.parts[i].owner; o != owner && pl.t.mayUse(v, o) && (at < 0 || pl.tierOf(v, o) < pl.tierOf(v, pl.parts[at].owner)) {
				at = i
			}
		}
		n := minSlots(minSlots(gains[g].slots, seated), most)
		if n <= 0 || at < 0 {
			continue
		}
		most -= n
		seatedLeft[k] = seated - n
		gains[g].slots -= n
		pl.moves = append(pl.moves, placeMove{kind: KindReturn, leaf: x.leaf, from: v, host: h, slots: n, rule: RuleOwnReturn, graceOf: owner})
		gains = append(gains, placing{leaf: v, part: at, slots: n, rule: pl.rules.grant})
	}
	return gains
}

// freeAtStart is how many slots of part i nobody sat on as the placement
// started: its room (what the leaves not taking part leave of it) less
// what the leaves taking part sat on there, by the return seating.
func (pl *placement) freeAtStart(i int) Slots {
	room := pl.capRem[i]
	if pl.b.mark[i] { // touched: its room as the run found it
		for _, t := range pl.b.touched {
			if t.part == i {
				room = t.slots
				break
			}
		}
	}
	h, owner := pl.parts[i].host, pl.parts[i].owner
	for _, b := range pl.holders[h] {
		room -= pl.rules.returnSeated(h, owner, b.leaf)
	}
	return maxSlots(room, 0)
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
		pl.moves = append(pl.moves, placeMove{kind: KindReclaim, leaf: x.leaf, from: v, host: pl.parts[x.part].host, slots: n, rule: pl.rules.reclaim, graceOf: v, part: pl.parts[x.part].owner})
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
	p := pl.parts[x.part]
	pl.moves = append(pl.moves, freeGain(pl.t, x.leaf, p.owner, p.host, k, x.rule))
}

// freeGain is leaf l given k free slots of owner's part on host under
// rule: a grant on its own part (own.use), its ancestors' or the public
// part; a lend on a part another consumer owns.
func freeGain(t *tree, l, owner, host int32, k Slots, rule Rule) placeMove {
	switch {
	case owner == l:
		return placeMove{kind: KindGrant, leaf: l, from: noNode, host: host, slots: k, rule: RuleOwnUse, graceOf: noNode, part: owner}
	case owner == noNode || t.contains(owner, l):
		return placeMove{kind: KindGrant, leaf: l, from: noNode, host: host, slots: k, rule: rule, graceOf: noNode, part: owner}
	}
	return placeMove{kind: KindLend, leaf: l, from: owner, host: host, slots: k, rule: rule, graceOf: noNode, part: owner}
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
// of the consumer named by graceOf (the lender's lend_grace for a return
// and, under rules 4, a revoked lend; the victim's reclaim_grace for a
// reclaim and, under rules 4, the mover's for a move).
func (m placeMove) deadline(t *tree, at time.Time) *time.Time {
	if m.graceOf == noNode {
		return nil
	}
	g := t.nodes[m.graceOf].reclaimGrace
	if m.kind == KindReturn || m.rule == RuleLendRevoked {
		g = t.nodes[m.graceOf].lendGrace
	}
	d := at.Add(g)
	return &d
}
