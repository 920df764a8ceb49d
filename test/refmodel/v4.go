package refmodel

// Rules version 4 with ownership (shared/spec/rules-v4.md, parts A and B):
// the seating (seating.go) is derived at the start of the rebalance and
// kept as slots move; the own layer takes owners' slots back from the
// leaves seated on their parts (rulings 5, 8, 11), holdings that became
// ineligible are released with the lender's grace (ruling 10), then the
// share rules run on totals (ruling 4; share_ratio) or pool by pool
// (ruling 1; priority, v4priority.go); with reclaim_for_preference: false
// a return is swapped with the borrower's compensation (ruling 9). Where
// rules-v4.md is open, AMBIGUITIES.md says what the model does.

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

// v4Owned reports whether the pool folds under version 4 with ownership.
func (m *Model) v4Owned() bool {
	return m.pol.rules >= rulesV4 && m.hasOwnership()
}

// ---------- slot moves that keep the seating ----------

func (f *fold) addAlloc(l, h string, n int64) {
	m := f.m
	if m.alloc[l] == nil {
		m.alloc[l] = map[string]int64{}
	}
	m.alloc[l][h] += n
	if m.alloc[l][h] == 0 {
		delete(m.alloc[l], h)
	}
}

// room is what part k has left.
func (f *fold) room(k hp) int64 {
	return f.m.parts(k.host)[k.part] - f.seat.used(k)
}

// grantOn gives l n free slots of part k: kind lend when the part is
// another consumer's (section 5, "Placement with ownership").
func (f *fold) grantOn(l string, k hp, n int64, rule string) {
	f.addAlloc(l, k.host, n)
	f.seat.add(l, k, n)
	// a descendant taking its ancestor's private part where a leaf that
	// could no longer hold it was released this rebalance takes the
	// holding by a return (ruling 10: "by a return, when the part's owner
	// (for a parent's private part, a descendant) takes it in this
	// event"; decision #351): the release shrinks by what the return takes
	if k.part != root && !f.m.isLeaf(k.part) && under(l, k.part) {
		for _, r := range f.revoked[k] {
			rel := &f.out[r.idx]
			if t := min(n, rel.Slots); t > 0 {
				rel.Slots -= t
				n -= t
				f.emit(Decision{Kind: "return", Consumer: l, From: r.from, Host: k.host, Slots: t, Rule: "own.return",
					Deadline: f.at.Add(f.m.nodes[k.part].lendGrace)})
				f.track()
			}
		}
		if n == 0 {
			return
		}
	}
	d := Decision{Kind: "grant", Consumer: l, Host: k.host, Slots: n, Rule: rule}
	if k.part != root && k.part != l && !under(l, k.part) {
		d.Kind, d.From = "lend", k.part
	} else {
		f.noteGiven(l, k, n)
	}
	f.emit(d)
	f.track()
}

// shiftSeat moves n of v's slots on part k to c.
func (f *fold) shiftSeat(v, c string, k hp, n int64) {
	f.addAlloc(v, k.host, -n)
	f.addAlloc(c, k.host, n)
	f.seat.add(v, k, -n)
	f.seat.add(c, k, n)
}

// returnOn is a return: c takes n slots of part k from v, deadline time +
// the part owner's lend_grace (rulings 8, 11).
func (f *fold) returnOn(c, v string, k hp, n int64) {
	f.shiftSeat(v, c, k, n)
	f.emit(Decision{Kind: "return", Consumer: c, From: v, Host: k.host, Slots: n, Rule: "own.return",
		Deadline: f.at.Add(f.m.nodes[k.part].lendGrace)})
	f.track()
}

// releaseTier is where leaf l's slots seated in part p come in its
// release order: lent by others first, then public, then private pools
// farthest ancestor first, its own last.
func releaseTier(l, p string) int {
	switch {
	case p == l:
		return 1 << 20
	case p == root:
		return 1
	case under(l, p):
		return 2 + depthOf(p) // farthest ancestor first
	default:
		return 0
	}
}

// releaseSeated gives back amt of l's slots in the release order of
// "Placement with ownership": slots lent by others first, then public,
// then private pools farthest ancestor first, its own last; within a tier
// the host holding most of its slots (as the release goes, #234), then
// name.
func (f *fold) releaseSeated(l string, amt int64, rule string, deadline time.Time) {
	m := f.m
	var ks []hp
	for k, v := range f.seat[l] {
		if v > 0 {
			ks = append(ks, k)
		}
	}
	// the host holding most of its slots is measured as the release goes,
	// after what it gave back on the hosts before (decision #234)
	less := func(a, b hp) bool {
		if ta, tb := releaseTier(l, a.part), releaseTier(l, b.part); ta != tb {
			return ta < tb
		}
		if ha, hb := m.alloc[l][a.host], m.alloc[l][b.host]; ha != hb {
			return ha > hb
		}
		if a.host != b.host {
			return a.host < b.host
		}
		return a.part < b.part
	}
	for amt > 0 {
		best := -1
		for i, k := range ks {
			if f.seat[l][k] > 0 && (best < 0 || less(k, ks[best])) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		// the host found, it gives back what it has there in the tier,
		// whichever part of the tier each slot sits in (section 5: "within
		// a tier, the host holding most of its slots"; docs/rules.md
		// section 17: "min(what is left to release, its slots there in that
		// tier)"), the parts in the same order; "most" is measured again
		// only before the next host (#234; decision 510)
		k := ks[best]
		var same []hp
		for _, k2 := range ks {
			if k2.host == k.host && f.seat[l][k2] > 0 && releaseTier(l, k2.part) == releaseTier(l, k.part) {
				same = append(same, k2)
			}
		}
		sort.Slice(same, func(i, j int) bool { return less(same[i], same[j]) })
		var n int64
		for _, k2 := range same {
			x := min(amt-n, f.seat[l][k2])
			f.seat.add(l, k2, -x)
			n += x
		}
		f.addAlloc(l, k.host, -n)
		amt -= n
		f.emit(Decision{Kind: "release", Consumer: l, Host: k.host, Slots: n, Rule: rule, Deadline: deadline})
		if f.reseat && amt > 0 {
			f.seat = m.seatReleases()
			ks = ks[:0]
			for k, v := range f.seat[l] {
				if v > 0 {
					ks = append(ks, k)
				}
			}
		}
	}
	if f.d != nil {
		f.track()
	}
}

// releaseV4 is a release (section 4's excess, a release event, a removed
// consumer) under version 4 with ownership: from the seating of now.
func (f *fold) releaseV4(l string, amt int64, rule string) {
	if f.seat == nil {
		// outside a rebalance the seating is not stored: it is derived
		// from what each leaf holds per host (ruling 8, "Seating"), so
		// it is worked out again after each host the release gives back
		// on (docs/rules.md section 17, "Releases by tier": "the seating
		// is worked out again before the next host"; #234; decision #390),
		// by the keepers' seating #383 gives version 4 (decisions 511, 512)
		f.seat = f.m.seatReleases()
		f.reseat = true
		defer func() { f.seat, f.reseat = nil, false }()
	}
	f.releaseSeated(l, amt, rule, time.Time{})
}

// ---------- the order in which a leaf takes slots ----------

// ownParts is l's own parts, most preferred first, then most free, then
// name.
func (f *fold) ownParts(l string) []hp {
	m := f.m
	var ks []hp
	for _, h := range m.hostNames() {
		if m.hosts[h].up && m.parts(h)[l] > 0 {
			ks = append(ks, hp{h, l})
		}
	}
	sort.SliceStable(ks, func(i, j int) bool {
		a, b := ks[i], ks[j]
		if pa, pb := m.ownPref[l][a.host], m.ownPref[l][b.host]; pa != pb {
			return pa > pb
		}
		if fa, fb := f.room(a), f.room(b); fa != fb {
			return fa > fb
		}
		return a.host < b.host
	})
	return ks
}

// lendClass is the class of owner o's part in pool x: the smallest
// lend_grace from o up to (not including) x.
func (m *Model) lendClass(o, x string) time.Duration {
	g := noGrace
	for q := o; q != x; q = parentOf(q) {
		g = min(g, m.nodes[q].lendGrace)
	}
	return g
}

// poolParts is pool x's parts as leaf l meets them: x's private part (the
// public part for root) and the parts lent into x's pool that l may hold,
// in ruling 1's order: class group by class group, the most restrictive
// first (the group holding the pool's own slots last); within a group the
// pool's own slots, then lent ones by lowest lend_grace, then lender path;
// within a part the host with most free slots, then name.
func (f *fold) poolParts(l, x string) []hp {
	m := f.m
	var members []string
	for _, k := range m.leaves() {
		if under(k, x) && k != x {
			members = append(members, k)
		}
	}
	eligible := func(g time.Duration) int {
		if g == noGrace {
			return len(members)
		}
		n := 0
		for _, k := range members {
			if m.nodes[k].reclaimGrace <= g {
				n++
			}
		}
		return n
	}
	type cand struct {
		k     hp
		cnt   int
		own   bool
		grace time.Duration
		free  int64
	}
	var cs []cand
	for _, h := range m.hostNames() {
		if !m.hosts[h].up {
			continue
		}
		for p, v := range m.parts(h) {
			if v <= 0 || p == l {
				continue
			}
			k := hp{h, p}
			switch {
			case p == x:
				cs = append(cs, cand{k, len(members), true, noGrace, f.room(k)})
			case p != root && !under(l, p) && dca(l, p) == x && m.mayHold(l, p):
				g := m.lendClass(p, x)
				cs = append(cs, cand{k, eligible(g), false, g, f.room(k)})
			}
		}
	}
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.cnt != b.cnt {
			return a.cnt < b.cnt
		}
		if a.own != b.own {
			return a.own
		}
		if a.grace != b.grace {
			return a.grace < b.grace
		}
		if a.k.part != b.k.part {
			return a.k.part < b.k.part
		}
		if a.free != b.free {
			return a.free > b.free
		}
		return a.k.host < b.k.host
	})
	out := make([]hp, len(cs))
	for i, c := range cs {
		out[i] = c.k
	}
	return out
}

// foldOrder is the order in which leaf l takes slots (ruling 4): its own
// parts, then its pools nearest first, the public pool last.
func (f *fold) foldOrder(l string) []hp {
	out := f.ownParts(l)
	for _, x := range append(chain(l)[1:], root) {
		out = append(out, f.poolParts(l, x)...)
	}
	return out
}

// mayTake is ruling 4's "may take": l may hold the part, and no leaf that
// may hold it, has unmet demand and room under every ancestor's max is
// nearer to its owner.
func (f *fold) mayTake(l, part string) bool {
	m := f.m
	if !m.mayHold(l, part) {
		return false
	}
	if part == root {
		return true
	}
	near := depthOf(dca(l, part))
	for _, k := range m.leaves() {
		if k == l || depthOf(dca(k, part)) <= near || !m.mayHold(k, part) {
			continue
		}
		if f.d.E[k] > m.held(k) && f.headroom(k, "") > 0 {
			return false
		}
	}
	return true
}

// victimNearer: victim v, left short by giving up a slot (its demand at
// least what it holds), is nearer than claimant c to part's owner and may
// hold the part (section 5's private-slot property counted for the
// victim).
func (f *fold) victimNearer(c, v, part string) bool {
	m := f.m
	if part == root || !m.mayHold(v, part) || depthOf(dca(v, part)) <= depthOf(dca(c, part)) {
		return false
	}
	return f.d.E[v] >= m.held(v)
}

// returnOrder sorts borrowers seated on a part of host h: the lowest
// priority first, then most slots on the host, then path.
func (m *Model) returnOrder(bs []string, h string) {
	sort.SliceStable(bs, func(i, j int) bool {
		a, b := bs[i], bs[j]
		if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
			return pa < pb
		}
		if ha, hb := m.alloc[a][h], m.alloc[b][h]; ha != hb {
			return ha > hb
		}
		return a < b
	})
}

// seatedOn lists the leaves other than l seated on part k, ineligible ones
// first (they must leave: ruling 10), then in return order.
func (f *fold) seatedOn(k hp, l string) []string {
	m := f.m
	var bad, ok []string
	for _, b := range m.leaves() {
		if b == l || f.seat[b][k] == 0 {
			continue
		}
		if m.mayHold(b, k.part) {
			ok = append(ok, b)
		} else {
			bad = append(bad, b)
		}
	}
	m.returnOrder(bad, k.host)
	m.returnOrder(ok, k.host)
	return append(bad, ok...)
}

// ---------- the fold ----------

// rebalance4 is the rebalance of a version 4 pool with ownership.
func (f *fold) rebalance4() {
	m := f.m
	ly := m.layered(f.d)
	f.ly = &ly
	start := len(f.out)
	if m.pol.reclaim == events.ReclaimPriority {
		// a leaf not waiting as the rebalance starts that is given slots
		// waits from this event (decision 411)
		since := map[string]uint64{}
		for _, l := range m.leaves() {
			since[l] = f.seq
		}
		for l, s := range m.since {
			if m.waiting[l] {
				since[l] = s
			}
		}
		f.priority4(ly)
		f.dropEmpty(start)
		f.swap4(start)
		f.netReclaims(start)
		f.netReclaimsAcross(start)
		f.dropEmpty(start)
		f.engineOrder(start)
		f.placedOrderPriority(start, since)
		return
	}
	placed := f.claimOrder4(ly.T, func(string) bool { return true }) // deficits as the rebalance starts
	f.free0 = map[string]int64{}
	for _, h := range m.hostNames() {
		f.free0[h] = m.hostFree(h)
	}
	f.seat = m.seatKeeper()
	f.ownLayer4(ly)
	f.revoke4()
	f.ownExcessAll()
	if m.pol.preemption && m.pol.balance {
		for round := 0; round < rebalanceRounds; round++ {
			n := len(f.out)
			order := placed // the first round in the claimant order as the rebalance starts (#473)
			if round > 0 {
				order = nil
			}
			f.balanced4(ly, order)
			if len(f.out) == n {
				break
			}
		}
	} else {
		f.totals4(ly)
	}
	f.dropEmpty(start)
	f.swap4(start)
	f.netReclaims(start)
	f.netReclaimsAcross(start)
	f.dropEmpty(start)
	f.engineOrder(start)
	if m.pol.preemption && m.pol.balance {
		// section 17's step 2 under share_ratio: the leaves by largest
		// deficit per unit of share, then rank (#238); on totals (ruling
		// 4) the model keeps its own order (the engine's differs, #238)
		f.placedOrder(start, placed)
	}
}

// dropEmpty removes the decisions (from start on) that a later one took
// all the slots of (a release of an ineligible holding turned into a
// return, grantOn), and forgets the releases' indexes.
func (f *fold) dropEmpty(start int) {
	out := f.out[:start]
	for _, d := range f.out[start:] {
		if d.Slots > 0 {
			out = append(out, d)
		}
	}
	f.out = out
	f.revoked = nil
}

// engineOrder puts the rebalance's decisions (from start on) in the
// order of decision #233 (the spec gives an event's decisions ordinals
// but no order among those of one rebalance; docs/rules.md sections 17
// and 21 give the project's): the returns, then the releases of
// holdings made ineligible (release.lend_revoked, right after the
// returns as the engine records them since #326; #319), then the moves'
// releases (release.moved), then the grants, lends and reclaims, then any
// other release, each kind in the order made.
func (f *fold) engineOrder(start int) {
	rank := func(d Decision) int {
		switch {
		case d.Kind == "return":
			return 0
		case d.Kind == "release" && d.Rule == "release.lend_revoked":
			return 1 // right after the returns (#326, #319)
		case d.Kind == "release" && d.Rule == "release.moved":
			return 2
		case d.Kind == "release":
			return 4
		}
		return 3
	}
	ds := f.out[start:]
	sort.SliceStable(ds, func(i, j int) bool { return rank(ds[i]) < rank(ds[j]) })
}

// placedOrderPriority orders the grants, lends and reclaims of a
// priority rebalance (from start on) as docs/rules.md section 17 places
// them (step 2, then step 5 "leaf by leaf in the order placed"): first
// the entitled phase, the leaves in entitled order (priority descending,
// waiting-since, path), each its own slots and entitled dues; then the
// borrow phase, the leaves in borrow order (waiting-since, priority
// descending, path). since is the waiting-since of the leaves when the
// rebalance started. (Decision #238.)
func (f *fold) placedOrderPriority(start int, since map[string]uint64) {
	m := f.m
	ls := m.leaves()
	ent := append([]string(nil), ls...)
	sort.SliceStable(ent, func(i, j int) bool {
		a, b := ent[i], ent[j]
		if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
			return pa > pb
		}
		if since[a] != since[b] {
			return since[a] < since[b]
		}
		return a < b
	})
	bor := append([]string(nil), ls...)
	sort.SliceStable(bor, func(i, j int) bool {
		a, b := bor[i], bor[j]
		if since[a] != since[b] {
			return since[a] < since[b]
		}
		if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
			return pa > pb
		}
		return a < b
	})
	f.placedOrder(start, ent, bor)
}

// placedOrder orders the grants, lends and reclaims of a rebalance (from
// start on, contiguous after engineOrder) by turns, as section 17's step
// 5 makes them "leaf by leaf in the order placed": the turns of orders[0]
// (every decision but priority.borrow), then those of orders[1] (the
// priority.borrow ones); within one leaf's turn its free slots (grants
// and lends) before its reclaims, otherwise in the order the model made
// them (#238).
func (f *fold) placedOrder(start int, orders ...[]string) {
	ds := f.out[start:]
	lo, hi := -1, -1
	for i, d := range ds {
		if d.Kind == "grant" || d.Kind == "lend" || d.Kind == "reclaim" {
			if lo < 0 {
				lo = i
			}
			hi = i + 1
		}
	}
	if lo < 0 {
		return
	}
	phase := func(d Decision) int {
		if d.Rule == "priority.borrow" && len(orders) > 1 {
			return 1
		}
		return 0
	}
	turn := make([]map[string]int, len(orders))
	for i, o := range orders {
		turn[i] = map[string]int{}
		for n, l := range o {
			turn[i][l] = n
		}
	}
	g := ds[lo:hi]
	sort.SliceStable(g, func(i, j int) bool {
		a, b := g[i], g[j]
		if pa, pb := phase(a), phase(b); pa != pb {
			return pa < pb
		}
		if ta, tb := turn[phase(a)][a.Consumer], turn[phase(a)][b.Consumer]; ta != tb {
			return ta < tb
		}
		return a.Kind != "reclaim" && b.Kind == "reclaim"
	})
	// Within one leaf's turn of a phase, section 17's step 2 places the
	// leaf's gains "on that owner's part with most room left, then host
	// name, again and again", and step 5 records them "leaf by leaf in the
	// order placed": its free slots on every host it gains on, then "the
	// rest of each gain from the host's losers". A part filled up to its
	// room gains its room and the last one placed gains the least, so the
	// reclaims come in the order of the hosts by what the leaf gains there
	// in its turn, most first, then name (byGain). The model takes a
	// victim's slots in its own order (ruling 4's fold order, #320's free
	// slots at the start), which says which slots, not the order of the
	// rows. (Its grants keep the order the model made them: the engine's
	// rooms there also count what others place before, and ordering them
	// by gain agreed less often.)
	for i := 0; i < len(g); {
		j := i + 1
		for j < len(g) && phase(g[j]) == phase(g[i]) && g[j].Consumer == g[i].Consumer {
			j++
		}
		byGain(g[i:j])
		i = j
	}
}

// byGain orders the reclaims of one leaf's turn (after its grants and
// lends, placedOrder) by the hosts where the leaf gains most in the turn,
// then host name; the victims on one host keep the order made.
func byGain(turn []Decision) {
	gain := map[string]int64{}
	for _, d := range turn {
		gain[d.Host] += d.Slots
	}
	i := 0
	for i < len(turn) && turn[i].Kind != "reclaim" {
		i++
	}
	rs := turn[i:]
	sort.SliceStable(rs, func(a, b int) bool {
		x, y := rs[a], rs[b]
		if gain[x.Host] != gain[y.Host] {
			return gain[x.Host] > gain[y.Host]
		}
		return x.Host < y.Host
	})
}

// ownLayer4 is the own layer (rulings 5, 8, 11): owners by rank take their
// own-layer use u, first from the free slots of their parts, then from the
// leaves seated there (returns). An owner then above E (or under an
// ancestor above its max) gives back the excess (release.moved) in
// ownExcessAll, after revoke4.
func (f *fold) ownLayer4(ly layers) {
	m := f.m
	ls := m.leaves()
	m.rankOrder(ls)
	for _, l := range ls {
		parts := f.ownParts(l)
		if len(parts) == 0 {
			continue
		}
		need := ly.own[l]
		for _, k := range parts {
			need -= f.seat[l][k]
		}
		free := func(k hp) {
			// a free slot within its ancestors' max (#244); where a max
			// binds, a return from a borrower inside the capped branch
			// keeps it. The leaf's own max does not bound the take: it
			// is in E, and ruling 5 takes u first and gives back what is
			// above E after ("If that takes it above E ..., it gives back
			// the excess at once ... rule release.moved")
			room := f.ancestorsRoom(l)
			if room < inf {
				// beyond the room, what it holds off its own parts: it
				// gives that back after, its work moving onto its own
				// slots (ruling 5; decision #366 amends #244)
				var own int64
				for _, q := range parts {
					own += f.seat[l][q]
				}
				room += max(0, m.held(l)-own)
			}
			if n := min(need, f.room(k), m.hostFree(k.host), room); n > 0 {
				f.grantOn(l, k, n, "own.use")
				need -= n
			}
		}
		back := func(k hp) {
			for _, b := range f.seatedOn(k, l) {
				if need <= 0 {
					return
				}
				if n := min(need, f.seat[b][k]); n > 0 {
					f.returnOn(l, b, k, n)
					need -= n
				}
			}
		}
		// a leaf seated on the part that may no longer hold it (ruling
		// 10) gives back first (#241): its slots leave the part anyway,
		// and "what cannot be re-seated is taken from it: by a return,
		// when the part's owner ... takes it in this event"; ruling 11
		// pairs the owner's gain with the leaves seated there before the
		// part's free slots
		backBad := func(k hp) {
			for _, b := range f.seatedOn(k, l) {
				if need <= 0 || m.mayHold(b, k.part) {
					return // seatedOn lists the ineligible first
				}
				if n := min(need, f.seat[b][k]); n > 0 {
					f.returnOn(l, b, k, n)
					need -= n
				}
			}
		}
		for _, k := range parts {
			backBad(k)
		}
		if m.pol.reclaimForPreference {
			for _, k := range parts {
				free(k)
				back(k)
			}
		} else {
			for _, k := range parts {
				free(k)
			}
			for _, k := range parts {
				back(k)
			}
		}
		if need > 0 && m.pol.reclaim == events.ReclaimPriority && m.pol.preemption {
			f.ownReclaimUnderMax(l, parts, need)
		}
	}
	// each owner's excess is given back after every owner's take
	// (ownExcessAll, decision #365): an owner's gain on its part is
	// paired with the borrowers seated there "at the start of the
	// rebalance" (ruling 11), so a borrower that is an owner taking its
	// own part back elsewhere gives a return before anyone's excess is
	// released; owner by owner, the first owner's excess would free the
	// later owner's slot and turn its return into an own.use
}

// ownReclaimUnderMax completes owner l's own use, under priority with
// preemption, where an ancestor's max binds and no borrower sits on l's
// parts: a leaf inside the capped branch that holds share slots there
// gives them up, a reclaim (decision #387). Section 5's property "an
// owner with demand holds at least min(E(l), owned(l))" (E counts every
// ancestor's max) and the own layer's "before any share rule applies"
// put l's own use ahead of a sibling's share slots under the same max;
// section 1 lets a reclaim inside the branch leave the ancestor's total
// as it is (#354). share_ratio reaches the same end state by its
// targets (a = T), and without preemption nothing is reclaimed (section
// 4). Victims: the lowest priority, then most share slots held, then
// path (section 4's victim order); a victim's slot goes on l's own part
// where it has room (l's work runs on its own slots).
func (f *fold) ownReclaimUnderMax(l string, parts []hp, need int64) {
	m := f.m
	var capped string
	for _, a := range chain(l)[1:] {
		if f.d.maxS[a] < inf && f.d.maxS[a]-m.allocOf(a) <= 0 {
			capped = a // the farthest binding ancestor holds every victim
		}
	}
	if capped == "" {
		return
	}
	shareHeld := func(v string) int64 {
		var s int64
		for k, n := range f.seat[v] {
			if k.part != v {
				s += n
			}
		}
		return s
	}
	var vs []string
	for _, v := range m.leaves() {
		if v != l && under(v, capped) && m.nodes[v].preemptable && shareHeld(v) > 0 {
			vs = append(vs, v)
		}
	}
	sort.SliceStable(vs, func(i, j int) bool {
		a, b := vs[i], vs[j]
		if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
			return pa < pb
		}
		if sa, sb := shareHeld(a), shareHeld(b); sa != sb {
			return sa > sb
		}
		return a < b
	})
	ownRoom := func(h string) (hp, int64) {
		for _, k := range parts {
			if k.host == h && f.room(k) > 0 {
				return k, f.room(k)
			}
		}
		return hp{}, 0
	}
	for _, v := range vs {
		var ks []hp
		for k, n := range f.seat[v] {
			if k.part != v && n > 0 {
				ks = append(ks, k)
			}
		}
		// the host the claimant would use first: where its own part has
		// room, then most free slots as the rebalance started, then name
		sort.Slice(ks, func(i, j int) bool {
			_, ra := ownRoom(ks[i].host)
			_, rb := ownRoom(ks[j].host)
			if (ra > 0) != (rb > 0) {
				return ra > 0
			}
			if fa, fb := f.free0[ks[i].host], f.free0[ks[j].host]; fa != fb {
				return fa > fb
			}
			if ks[i].host != ks[j].host {
				return ks[i].host < ks[j].host
			}
			return ks[i].part < ks[j].part
		})
		for _, k := range ks {
			n := min(need, f.seat[v][k], f.headroom(l, v))
			if n <= 0 {
				continue
			}
			f.addAlloc(v, k.host, -n)
			f.seat.add(v, k, -n)
			f.addAlloc(l, k.host, n)
			onto := k
			if ok, r := ownRoom(k.host); r >= n {
				onto = ok
			}
			f.seat.add(l, onto, n)
			f.emit(Decision{Kind: "reclaim", Consumer: l, From: v, Host: k.host, Slots: n, Rule: "priority.reclaim"})
			f.noteGiven(l, k, n)
			f.track()
			need -= n
			if need == 0 {
				return
			}
		}
	}
}

// ownExcessAll gives back each owner's excess, in rank order, after the
// own layer's takes (#365) and after what no return took of the holdings
// made ineligible is released (revoke4, ruling 10): a slot a leaf may no
// longer hold is released with the lender's grace ("The lending out grace
// period is enforced and may override the grace period of borrowers"),
// never as the owner's excess moving onto its own slots (decision #367).
func (f *fold) ownExcessAll() {
	ls := f.m.leaves()
	f.m.rankOrder(ls)
	for _, l := range ls {
		if len(f.ownParts(l)) > 0 {
			f.ownExcess(l)
		}
	}
}

// ownExcess gives back what owner l holds above E (or under an ancestor
// above its max) after the own layer's takes.
func (f *fold) ownExcess(l string) {
	m := f.m
	// the excess is work moving onto its own slots (ruling 5: "rule
	// release.moved, its work moving onto its own slots"): a move,
	// whose release carries the mover's grace (ruling 13), under every
	// policy (decision #232)
	moved := f.at.Add(m.nodes[l].reclaimGrace)
	if x := m.held(l) - f.d.E[l]; x > 0 {
		f.releaseSeated(l, x, "release.moved", moved)
	}
	for _, a := range chain(l)[1:] {
		if x := min(m.allocOf(a)-f.d.maxS[a], m.held(l)); x > 0 {
			f.releaseSeated(l, x, "release.moved", moved)
		}
	}
}

// ancestorsRoom is what l's ancestors' max leave: headroom without l's
// own max.
func (f *fold) ancestorsRoom(l string) int64 {
	h := inf
	for _, n := range chain(l)[1:] {
		h = min(h, f.d.maxS[n]-f.m.allocOf(n))
	}
	return h
}

// revoke4 releases what leaves still sit on parts they may not hold
// (ruling 10): rule release.lend_revoked, deadline time + the part owner's
// lend_grace. Leaves in path order, hosts by name.
func (f *fold) revoke4() {
	m := f.m
	for _, l := range m.leaves() {
		var ks []hp
		for k, v := range f.seat[l] {
			if v > 0 && !m.mayHold(l, k.part) {
				ks = append(ks, k)
			}
		}
		sort.Slice(ks, func(i, j int) bool {
			if ks[i].host != ks[j].host {
				return ks[i].host < ks[j].host
			}
			return ks[i].part < ks[j].part
		})
		for _, k := range ks {
			n := f.seat[l][k]
			f.addAlloc(l, k.host, -n)
			f.seat.add(l, k, -n)
			if k.part != root && !m.isLeaf(k.part) {
				if f.revoked == nil {
					f.revoked = map[hp][]revokedAt{}
				}
				f.revoked[k] = append(f.revoked[k], revokedAt{from: l, idx: len(f.out)})
			}
			f.emit(Decision{Kind: "release", Consumer: l, Host: k.host, Slots: n, Rule: "release.lend_revoked",
				Deadline: f.at.Add(m.nodes[k.part].lendGrace)})
			f.track()
		}
	}
}

// takeFree gives claimant c up to want slots in its fold order: on each
// part the free slots it may use (may take with strict, else may hold),
// then, on a private part of one of its ancestors, the slots outsiders sit
// on (returns, ruling 8). It returns what c got.
func (f *fold) takeFree(c string, want int64, rule string, strict bool) int64 {
	m := f.m
	var got int64
	for _, k := range f.foldOrder(c) {
		if got >= want {
			break
		}
		ok := m.mayHold(c, k.part)
		if strict {
			ok = f.mayTake(c, k.part)
		}
		if !ok {
			continue
		}
		if n := min(want-got, f.room(k), f.headroom(c, "")); n > 0 {
			f.grantOn(c, k, n, rule)
			got += n
		}
		if k.part == root || m.isLeaf(k.part) || !under(c, k.part) {
			continue
		}
		for _, b := range f.seatedOn(k, c) {
			if got >= want || under(b, k.part) {
				continue
			}
			if n := min(want-got, f.seat[b][k], f.headroom(c, b)); n > 0 {
				f.returnOn(c, b, k, n)
				got += n
			}
		}
	}
	return got
}

// takeFrom moves to claimant c up to want of victim v's slots that c may
// hold (may take with strict), parts in c's fold order: a reclaim, or a
// return when the part is private to an ancestor of c that v is outside
// (ruling 8). With victimOwnLast (ruling 4's T0 restore, decision #246)
// the victim's slots on its own parts are taken after every other part:
// taken first, the owner took them back by a return at the next event
// (its own layer does not look at what it holds elsewhere, ruling 5)
// while the claimant reclaimed elsewhere, an exchange on a no-op event.
func (f *fold) takeFrom(c, v string, want int64, rule string, strict, victimOwnLast bool) int64 {
	m := f.m
	var got int64
	order := f.foldOrder(c)
	if !strict {
		// with preemption and balance (section 17's placement) a victim
		// gives up first on the hosts that had most free slots as the
		// rebalance started (#320); on totals (ruling 4) the order stays
		// the fold order's (the engine's fill on totals took fewer logs
		// that way)
		order = f.byFree0(order)
	}
	if victimOwnLast {
		sort.SliceStable(order, func(i, j int) bool { return order[i].part != v && order[j].part == v })
	}
	may := map[string]bool{}
	if !strict {
		// the victim's slots the claimant may take (ruling 4: no nearer
		// leaf with unmet demand may hold the part) before those it only
		// may hold: section 5's private-slot property, "a slot privately
		// owned by X is used outside X's subtree only while no descendant
		// of X with unmet demand could use it" (decision 416)
		// the victim counted too: it is left short by what it gives, so
		// a part nearer to it than to c (its own, or a private pool of
		// its branch) is one c may hold but not take while another of
		// the victim's slots will do (the victim's demand unmet; decision
		// 485)
		for _, k := range order {
			may[k.part] = f.mayTake(c, k.part) && !f.victimNearer(c, v, k.part)
		}
		sort.SliceStable(order, func(i, j int) bool { return may[order[i].part] && !may[order[j].part] })
	}
	take := func(k hp, n int64) {
		if k.part != root && !m.isLeaf(k.part) && under(c, k.part) && !under(v, k.part) {
			f.returnOn(c, v, k, n)
		} else {
			f.shiftSeat(v, c, k, n)
			f.emit(Decision{Kind: "reclaim", Consumer: c, From: v, Host: k.host, Slots: n, Rule: rule})
			if !strict && !f.mayTake(c, k.part) {
				f.reseatTaken(c, k, n)
			} else {
				f.noteGiven(c, k, n)
			}
			f.track()
		}
		got += n
	}
	if !strict && f.ly != nil && f.ly.src[c] != nil {
		// first the victim's slots of the sources the division gave c
		// and c does not hold yet: a reclaim takes "from the host the
		// claimant would use first", and a claimant's slots are placed in
		// the tier they come from (section 5; decision 486)
		due := map[string]int64{}
		for src, n := range f.ly.src[c] {
			if src != "own" {
				due[src] = n
			}
		}
		for k, n := range f.seat[c] {
			due[m.sourceOf(c, k.part, f.ly)] -= n
		}
		for _, k := range order {
			if got >= want {
				break
			}
			src := m.sourceOf(c, k.part, f.ly)
			if f.seat[v][k] == 0 || !may[k.part] || !m.mayHold(c, k.part) || due[src] <= 0 {
				continue
			}
			n := min(want-got, f.seat[v][k], due[src])
			due[src] -= n
			take(k, n)
		}
	}
	for _, k := range order {
		if got >= want {
			break
		}
		if f.seat[v][k] == 0 || (strict && !f.mayTake(c, k.part)) || !m.mayHold(c, k.part) {
			continue
		}
		take(k, min(want-got, f.seat[v][k]))
	}
	return got
}

// reseatTaken: claimant c was just given n slots of part k, which a leaf
// nearer to k's owner with unmet demand could use (c may hold them but not
// take them). Where another leaf w on the same host sits on a part c may
// take and may hold k, the two exchange seats: only the accounting moves
// (which part of a host a slot is in is not stored, ruling 8's seating),
// so k's slots stay with the owner's branch (section 5's private-slot
// property) and the reclaim stays the victim walk's (section 4).
func (f *fold) reseatTaken(c string, k hp, n int64) {
	m := f.m
	for _, w := range m.leaves() {
		if w == c || !m.mayHold(w, k.part) {
			continue
		}
		for k2, v := range f.seat[w] {
			if n <= 0 || k2.host != k.host || k2 == k || v == 0 || !f.mayTake(c, k2.part) || !m.mayHold(c, k2.part) {
				continue
			}
			x := min(n, v)
			f.seat.add(w, k2, -x)
			f.seat.add(w, k, x)
			f.seat.add(c, k, -x)
			f.seat.add(c, k2, x)
			f.noteGiven(c, k2, x)
			n -= x
		}
	}
	if n > 0 {
		f.noteGiven(c, k, n)
	}
}

// claimOrder4 is section 4's share_ratio claimant order on t, computed on
// the state now.
func (f *fold) claimOrder4(t map[string]int64, below func(string) bool) []string {
	m := f.m
	var cs []string
	for _, l := range m.leaves() {
		if below(l) {
			cs = append(cs, l)
		}
	}
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		na, nb := m.nodes[a], m.nodes[b]
		if less, tie := claimRatio(t[a]-m.held(a), na.share).before(claimRatio(t[b]-m.held(b), nb.share)); !tie {
			return less
		}
		if na.priority != nb.priority {
			return na.priority > nb.priority
		}
		return a < b
	})
	return cs
}

// walk4 is section 4's victim walk on t: the leaves above t in the order
// the walk meets them.
func (f *fold) walk4(t map[string]int64) []string {
	m := f.m
	var walk []string
	var visit func(p string)
	visit = func(p string) {
		kids := append([]string(nil), m.nodes[p].children...)
		sort.SliceStable(kids, func(i, j int) bool {
			a, b := m.nodes[kids[i]], m.nodes[kids[j]]
			ra, rb := walkRatio(m.allocOf(a.path)-t[a.path], a.share), walkRatio(m.allocOf(b.path)-t[b.path], b.share)
			if less, tie := ra.before(rb); !tie {
				return less
			}
			if a.priority != b.priority {
				return a.priority < b.priority
			}
			return a.path < b.path
		})
		for _, ch := range kids {
			if m.isLeaf(ch) {
				if m.held(ch) > t[ch] {
					walk = append(walk, ch)
				}
			} else {
				visit(ch)
			}
		}
	}
	visit(root)
	return walk
}

// balanced4 is share_ratio with preemption and balance: every leaf to its
// layered target T. Claimants in section 4's order take free slots, then
// their victims' (reclaims; returns on an ancestor's private part), then,
// when their share lies where a holder could move off, a move (ruling 7:
// release.moved with the mover's reclaim_grace, ruling 13, and a grant).
// A non-nil order is the claimant order to serve them in: the first round
// serves them in the order as the rebalance starts, before the own layer
// placed any owner's slots, so an owner whose own slots were not in use
// counts its whole target as its deficit (#238's order for the record and
// the hosts, decision 473; gen.GenerateOwned seed 937); a later round
// orders them as they then stand.
func (f *fold) balanced4(ly layers, order []string) {
	m := f.m
	t := ly.T
	below := func(l string) bool { return m.held(l) < t[l] }
	var claimants []string
	if order == nil {
		claimants = f.claimOrder4(t, below)
	} else {
		for _, l := range order {
			if below(l) {
				claimants = append(claimants, l)
			}
		}
	}
	walk := f.walk4(t)
	f.kept = f.keptDues(t)
	for _, c := range claimants {
		// not clamped by the headroom: a reclaim from a victim inside
		// the claimant's capped branch leaves the branch's total as it is
		// (section 1: "no grant or reclaim takes a consumer or any of its
		// ancestors above its max"); takeFree bounds free slots by the
		// headroom, each victim by the headroom its branch leaves
		need := t[c] - m.held(c)
		// free slots of the sources its division gave it first (section
		// 5: "a grant is placed in the tier it comes from")
		need -= f.takeDues(c, need, "share_ratio.grant")
		// free slots only where c may take them (ruling 4's "may
		// take", section 5's private-slot property; decision 415)
		need -= f.takeFree(c, need, "share_ratio.grant", true)
		for _, v := range walk {
			if need <= 0 {
				break
			}
			if give := min(need, m.held(v)-t[v], f.headroom(c, v)); give > 0 {
				got := f.takeFrom(c, v, give, "share_ratio.reclaim", false, false)
				need -= got
				if got < give && f.headroom(c, v) > f.headroom(c, "") {
					need -= f.reclaimAcross(c, v, give-got, "share_ratio.reclaim")
				}
			}
		}
		if need > 0 {
			need -= f.moveFor(c, need)
		}
	}
}

// keptDues is, over the leaves at or above their target t, what they hold
// of each source beyond what the division gave them there (surplus) and
// what it gave them there that they do not hold (floating).
// onPart is the surplus by the holder's source and the owner of the
// parts it sits on there: a claimant can see the same parts as another
// source (a parent's private part is its pool's own slots to a leaf of
// the branch and a lent class to an outsider, decision 526).
type keptDues struct {
	surplus, floating map[string]int64
	onPart            map[partKept]int64
}

// partKept is a holder's surplus of a source on one host's part.
type partKept struct{ holder, src, host, part string }

func (f *fold) keptDues(t map[string]int64) keptDues {
	m := f.m
	out := keptDues{map[string]int64{}, map[string]int64{}, map[partKept]int64{}}
	for _, l := range m.leaves() {
		if m.held(l) < t[l] {
			continue
		}
		d := f.unseatedDues(l)
		for src, v := range d {
			if v > 0 {
				out.floating[src] += v
			} else if v < 0 {
				out.surplus[src] += -v
				for k, n := range f.seat[l] {
					if n > 0 && m.sourceOf(l, k.part, f.ly) == src {
						out.onPart[partKept{l, src, k.host, k.part}] += n
					}
				}
			}
		}
	}
	return out
}

// takeDues gives claimant c up to want free slots of the sources (pool
// and class group) the layered division gave it and it does not hold yet,
// parts in c's fold order, each source up to what c is due there: a grant
// is placed in the tier it comes from (section 5, "Placement with
// ownership"). It returns what c got.
func (f *fold) takeDues(c string, want int64, rule string) int64 {
	m := f.m
	due := map[string]int64{}
	for k, v := range f.ly.src[c] {
		if k != "own" {
			due[k] = v
		}
	}
	for k, v := range f.seat[c] {
		due[m.sourceOf(c, k.part, f.ly)] -= v
	}
	// a holder at its target that keeps slots of one source beyond what
	// it is due there, in place of a source it is due but does not hold,
	// leaves the claimants due that source instead (#329, #340: a holder
	// keeps where it sits rather than move for the division's classes)
	for src, n := range due {
		// only what the source's free room cannot give the leaves due
		// it: with room enough no holder has to move, and the grant is
		// placed in the tier it comes from (section 5; decision 500)
		n = min(n, f.dueAll(src)-f.freeFor(c, src))
		for alt, fl := range f.kept.floating {
			if n <= 0 || f.kept.surplus[src] <= 0 || fl <= 0 || alt == src {
				continue
			}
			x := min(n, f.kept.surplus[src], fl)
			due[src] -= x
			due[alt] += x
			f.kept.surplus[src] -= x
			f.kept.floating[alt] -= x
			n -= x
		}
		// the holder may see the parts c is due as another source: #340
		// swaps by "the part's room", whatever either calls the source;
		// where the holder's other due has free room on the same host, a
		// return with that compensation moves nobody (ruling 9 with
		// reclaim_for_preference true: "they stay its"), so only the rest
		// is swapped (decision 526)
		hks := slices.Collect(maps.Keys(f.kept.onPart))
		slices.SortFunc(hks, func(a, b partKept) int {
			return strings.Compare(a.holder+"\x00"+a.src+"\x00"+a.host+"\x00"+a.part, b.holder+"\x00"+b.src+"\x00"+b.host+"\x00"+b.part)
		})
		near := func(hk partKept, alt string) int64 { // the holder's free room of alt on the same host
			var r int64
			for p := range m.parts(hk.host) {
				if m.mayHold(hk.holder, p) && m.sourceOf(hk.holder, p, f.ly) == alt {
					r += max(f.room(hp{hk.host, p}), 0)
				}
			}
			return r
		}
		cross := func(hk partKept) bool {
			return hk.src != src && f.kept.onPart[hk] > 0 && f.kept.surplus[hk.src] > 0 && m.mayHold(c, hk.part) && m.sourceOf(c, hk.part, f.ly) == src
		}
		for _, hk := range hks {
			if cross(hk) {
				for alt, fl := range f.kept.floating {
					if fl > 0 && alt != src && alt != hk.src {
						n -= min(f.kept.onPart[hk], near(hk, alt))
					}
				}
			}
		}
		for _, hk := range hks {
			if n <= 0 {
				break
			}
			if !cross(hk) {
				continue
			}
			for _, alt := range slices.Sorted(maps.Keys(f.kept.floating)) {
				fl := f.kept.floating[alt]
				if n <= 0 || fl <= 0 || alt == src || alt == hk.src || f.kept.onPart[hk] <= 0 || f.kept.surplus[hk.src] <= 0 {
					continue
				}
				x := min(n, f.kept.onPart[hk]-near(hk, alt), f.kept.surplus[hk.src], fl)
				if x <= 0 {
					continue
				}
				due[src] -= x
				due[alt] += x
				f.kept.onPart[hk] -= x
				f.kept.surplus[hk.src] -= x
				f.kept.floating[alt] -= x
				n -= x
			}
		}
	}
	// spare: what c may take of owner o's parts, their room less what the
	// leaves nearer to o that may hold them still need (section 5's
	// private-slot property, ruling 4's "may take" counted in slots)
	spare := map[string]int64{}
	spareOf := func(o string) int64 {
		if v, ok := spare[o]; ok {
			return v
		}
		var room int64
		for _, h := range m.hostNames() {
			if m.hosts[h].up {
				room += f.room(hp{h, o})
			}
		}
		if o != root {
			near := depthOf(dca(c, o))
			for _, k := range m.leaves() {
				if k == c || depthOf(dca(k, o)) <= near || !m.mayHold(k, o) {
					continue
				}
				if need := min(f.d.E[k]-m.held(k), f.headroom(k, "")); need > 0 {
					room -= need
				}
			}
		}
		spare[o] = max(room, 0)
		return spare[o]
	}
	var got int64
	for _, k := range f.foldOrder(c) {
		if got >= want {
			break
		}
		src := m.sourceOf(c, k.part, f.ly)
		if due[src] <= 0 || !m.mayHold(c, k.part) {
			continue
		}
		if x := f.reseatOff(c, k, min(want-got, due[src], f.headroom(c, ""))-f.room(k)); x > 0 {
			if _, ok := spare[k.part]; ok {
				spare[k.part] += x
			}
		}
		if n := min(want-got, due[src], f.room(k), f.headroom(c, ""), spareOf(k.part)); n > 0 {
			f.grantOn(c, k, n, rule)
			due[src] -= n
			spare[k.part] -= n
			got += n
		}
	}
	return got
}

// freeFor is the room left on the up hosts' parts of source src that
// leaf c may hold.
func (f *fold) freeFor(c, src string) int64 {
	m := f.m
	var n int64
	for _, h := range m.hostNames() {
		if !m.hosts[h].up {
			continue
		}
		for p := range m.parts(h) {
			if m.mayHold(c, p) && m.sourceOf(c, p, f.ly) == src {
				n += max(f.room(hp{h, p}), 0)
			}
		}
	}
	return n
}

// dueAll is what the leaves below their target are due of source src
// and do not hold there.
func (f *fold) dueAll(src string) int64 {
	m := f.m
	var n int64
	for _, l := range m.leaves() {
		if m.held(l) >= f.ly.T[l] {
			continue
		}
		d := f.ly.src[l][src]
		for q, x := range f.seat[l] {
			if m.sourceOf(l, q.part, f.ly) == src {
				d -= x
			}
		}
		n += max(d, 0)
	}
	return n
}

// reseatOff makes up to n slots of part k room for claimant c by the
// seating alone: a leaf at its target seated on k beyond what its division
// gave it of k's source, and short of another source whose part on the
// same host has room and that it may hold, is seated there instead (the
// seating is derived from how many slots each leaf holds, ruling 8; a
// grant is placed in the tier it comes from, section 5): nothing moves,
// no decision. It returns the room made.
func (f *fold) reseatOff(c string, k hp, n int64) int64 {
	m := f.m
	if n <= 0 {
		return 0
	}
	var made int64
	for _, v := range m.leaves() {
		if made >= n {
			break
		}
		if v == c || f.seat[v][k] <= 0 || m.held(v) < f.ly.T[v] {
			continue
		}
		d := f.unseatedDues(v)
		// the same source for both is keptDues' (the claimant takes
		// the holder's floating source instead, #329, #340)
		s1 := m.sourceOf(v, k.part, f.ly)
		if s1 == "own" || d[s1] >= 0 || s1 == m.sourceOf(c, k.part, f.ly) {
			continue
		}
		for _, q := range f.foldOrder(v) {
			if made >= n || d[s1] >= 0 {
				break
			}
			if q.host != k.host || q == k || !m.mayHold(v, q.part) {
				continue
			}
			s2 := m.sourceOf(v, q.part, f.ly)
			if x := min(n-made, -d[s1], d[s2], f.seat[v][k], f.room(q)); s2 != s1 && x > 0 {
				f.seat.add(v, k, -x)
				f.seat.add(v, q, x)
				d[s1] += x
				d[s2] -= x
				f.kept.surplus[s1] = max(f.kept.surplus[s1]-x, 0)
				f.kept.floating[s2] = max(f.kept.floating[s2]-x, 0)
				made += x
			}
		}
	}
	return made
}

// moveFor makes room for claimant c by moves (ruling 7, with preemption
// only): a leaf seated on a part c may hold, in c's fold order, moves to a
// free slot it may hold that c may not (release.moved on the host it
// leaves, deadline time + its reclaim_grace, ruling 13; grant or lend on
// the one it goes to); c then takes the slot. It returns what c got.
func (f *fold) moveFor(c string, want int64) int64 {
	m := f.m
	var got int64
	for _, k := range f.foldOrder(c) {
		if got >= want || !m.mayHold(c, k.part) {
			continue
		}
		for _, v := range f.seatedOn(k, c) {
			if got >= want {
				break
			}
			for _, k2 := range f.foldOrder(v) {
				if got >= want || f.seat[v][k] == 0 {
					break
				}
				if k2 == k || m.mayHold(c, k2.part) || !m.mayHold(v, k2.part) {
					continue
				}
				n := min(want-got, f.seat[v][k], f.room(k2), f.headroom(c, v))
				if n <= 0 {
					continue
				}
				f.addAlloc(v, k.host, -n)
				f.seat.add(v, k, -n)
				f.emit(Decision{Kind: "release", Consumer: v, Host: k.host, Slots: n, Rule: "release.moved",
					Deadline: f.at.Add(m.nodes[v].reclaimGrace)})
				f.grantOn(v, k2, n, "share_ratio.grant")
				f.grantOn(c, k, n, "share_ratio.grant")
				got += n
			}
		}
	}
	return got
}

// totals4 is share_ratio with preemption: false or balance: false on
// totals (ruling 4): with balance: false and preemption the reclaim to T0
// over T's pools, then the fill toward T, then a final pass of the free
// slots to the leaves with unmet demand.
func (f *fold) totals4(ly layers) {
	m, d := f.m, f.d
	t := ly.T
	if m.pol.preemption && !m.pol.balance {
		f.a0 = m.Allocations()
		e0 := f.e0(ly)
		t0 := m.layeredT0(d, ly, e0)
		f.t0 = t0
		claimants := f.claimOrder4(t0, func(l string) bool { return m.held(l) < t0[l] })
		walk := f.walk4(t0)
		for _, c := range claimants {
			need := t0[c] - m.held(c) // as in balanced4: a victim in the branch frees headroom

			need -= f.takeFree(c, need, "share_ratio.grant", true)
			for _, v := range walk {
				if need <= 0 {
					break
				}
				if give := min(need, m.held(v)-t0[v], f.headroom(c, v)); give > 0 {
					need -= f.takeFrom(c, v, give, "share_ratio.reclaim", true, true) // #246
				}
			}
		}
		f.afterReclaim = m.Allocations()
	}
	for _, c := range f.claimOrder4(t, func(l string) bool { return m.held(l) < t[l] }) {
		f.takeFree(c, min(t[c]-m.held(c), f.headroom(c, "")), "share_ratio.grant", true)
	}
	// the final pass: largest (E - a)/share, then priority desc, then path
	for _, c := range f.claimOrder4(d.E, func(l string) bool { return d.E[l] > m.held(l) }) {
		if n := min(d.E[c]-m.held(c), f.headroom(c, "")); n > 0 {
			f.takeFreeOnly(c, n)
		}
	}
}

// takeFreeOnly gives c up to want free slots it may take, in its fold
// order (no returns: the final pass of ruling 4).
func (f *fold) takeFreeOnly(c string, want int64) int64 {
	var got int64
	for _, k := range f.foldOrder(c) {
		if got >= want {
			break
		}
		if !f.mayTake(c, k.part) {
			continue
		}
		if n := min(want-got, f.room(k), f.headroom(c, "")); n > 0 {
			f.grantOn(c, k, n, "share_ratio.grant")
			got += n
		}
	}
	return got
}

// e0 is ruling 4's E0(l) = min(E, max(P^L, a)), a taken now (after the
// event's releases, trims and returns); P^L is the leaf's own-layer use
// plus its planned share of every pool of T's fold it belongs to.
func (f *fold) e0(ly layers) map[string]int64 {
	m, d := f.m, f.d
	pl := map[string]int64{}
	for _, l := range m.leaves() {
		pl[l] = ly.own[l]
	}
	for x, pool := range ly.pools {
		var size int64
		for _, cl := range pool {
			size += cl.n
		}
		p := map[string]int64{x: size}
		for _, n := range m.preorder() {
			if under(n, x) && !m.isLeaf(n) {
				m.split(p, p[n], m.nodes[n].children, noCap)
			}
		}
		for _, l := range m.leaves() {
			if under(l, x) && l != x {
				pl[l] += p[l]
			}
		}
	}
	e0 := map[string]int64{}
	for _, l := range m.leaves() {
		e0[l] = min(d.E[l], max(pl[l], m.held(l)))
	}
	return e0
}

// layeredT0 is ruling 4's T0: the layered targets over the pools of T's
// fold, each pool keeping the classes it had there and lending nothing
// upward, with every leaf's E replaced by e0.
func (m *Model) layeredT0(d *derived, ly layers, e0 map[string]int64) map[string]int64 {
	r := map[string]int64{}
	rm := map[string]int64{}
	t := map[string]int64{}
	for p := range m.nodes {
		rm[p] = d.maxS[p]
	}
	for _, l := range m.leaves() {
		r[l] = e0[l]
	}
	scratch := layers{groups: map[string][][]time.Duration{}}
	give := func(l string, v int64, _ string) {
		t[l] += v
		r[l] -= v
		for _, a := range chain(l) {
			if rm[a] != inf {
				rm[a] -= v
			}
		}
	}
	ls := m.leaves()
	m.rankOrder(ls)
	for _, l := range ls {
		o := m.owned(l)
		if o == 0 {
			continue
		}
		u := min(r[l], o)
		for _, a := range chain(l) {
			u = min(u, rm[a])
		}
		give(l, max(u, 0), "own")
	}
	var pools []string
	for x := range ly.pools {
		pools = append(pools, x)
	}
	sort.Slice(pools, func(i, j int) bool {
		a, b := pools[i], pools[j]
		if (a == root) != (b == root) {
			return b == root
		}
		if da, db := depthOf(a), depthOf(b); da != db {
			return da > db
		}
		return a < b
	})
	for _, x := range pools {
		m.divide(x, ly.pools[x], r, rm, give, &scratch)
	}
	out := map[string]int64{}
	for _, p := range m.preorder() {
		for _, l := range m.leaves() {
			if under(l, p) {
				out[p] += t[l]
			}
		}
	}
	return out
}

// swap4 is ruling 9 (reclaim_for_preference: false): each return the
// event made (from its decision start on) is matched, in return order,
// with the slots the borrower was given in the same event that the owner
// may hold; for a matched slot the borrower keeps the owner's slot and
// the owner is given the borrower's (grant, own.use). Decisions are then
// the net change: a return and its compensation that cancel leave none.
// A descendant taking an ancestor's private part back (ruling 8) is
// swapped too, as decision #219 says the project does; its stand-in slot
// is the borrower's, with the borrower's kind and rule (it owns no part:
// withOwnership seed 61, event 8).
//
// swapReclaims: whether a slot the borrower reclaims from a third leaf is
// compensation too (item 41 of test/refmodel/AMBIGUITIES.md, reading (g)
// of round 6; the lead decided it is: docs/decisions.md #410).
var swapReclaims = true

func (f *fold) swap4(start int) {
	m := f.m
	if m.pol.reclaimForPreference {
		return
	}
	out := append([]Decision(nil), f.out[start:]...)
	var add []Decision // the owner's stand-in slots
	changed := false
	for i := range out {
		r := &out[i]
		if r.Kind != "return" || r.Slots == 0 || !m.isLeaf(r.Consumer) {
			continue
		}
		// the part taken back: the leaf's own, or (ruling 8) the private
		// part of its nearest ancestor on the host, which #219 swaps as
		// it swaps an owner's return ("an owner (or a descendant taking a
		// parent's private slots back, ruling 8) is given a borrower's
		// compensation slot instead of its own slot back")
		owner := ""
		for _, p := range chain(r.Consumer) {
			if m.parts(r.Host)[p] > 0 {
				owner = p
				break
			}
		}
		if owner == "" {
			continue
		}
		if !m.mayHold(r.From, owner) {
			continue // an ineligible holding (ruling 10) cannot stay
		}
		for j := range out {
			g := &out[j]
			if r.Slots == 0 {
				break
			}
			if g.Consumer != r.From || (g.Kind != "grant" && g.Kind != "lend" && !(g.Kind == "reclaim" && (swapReclaims || g.From == r.Consumer))) || g.Slots == 0 || g.Rule == "own.use" {
				continue
			}
			part, avail := g.From, min(r.Slots, g.Slots)
			if g.Kind != "lend" {
				part, avail = f.grantPartFor(g.Consumer, g.Host, avail, func(p string) bool { return m.mayHold(r.Consumer, p) })
			}
			if part == "" || !m.mayHold(r.Consumer, part) {
				continue
			}
			n := min(r.Slots, g.Slots, avail)
			// the borrower keeps the owner's slot; the owner takes the
			// borrower's compensation instead
			f.addAlloc(r.Consumer, r.Host, -n)
			f.addAlloc(r.From, r.Host, n)
			f.addAlloc(g.Consumer, g.Host, -n)
			f.addAlloc(r.Consumer, g.Host, n)
			r.Slots -= n
			g.Slots -= n
			changed = true
			if g.Kind == "reclaim" {
				switch {
				case g.From == r.Consumer: // the owner keeps its slot there: nothing moves
				case part == owner:
					// the victim's slot is on the part taken back: the
					// owner takes it back from that borrower, a return
					// with the owner's lend_grace (rulings 8 and 11;
					// decision 419)
					add = append(add, Decision{Kind: "return", Consumer: r.Consumer, From: g.From, Host: g.Host, Slots: n, Rule: "own.return",
						Deadline: f.at.Add(m.nodes[owner].lendGrace)})
				default: // the owner takes the slots from the victim itself
					add = append(add, Decision{Kind: "reclaim", Consumer: r.Consumer, From: g.From, Host: g.Host, Slots: n, Rule: g.Rule, Deadline: g.Deadline})
				}
				continue
			}
			// appended after the loops: r and g point into out
			if owner != r.Consumer {
				// a descendant's stand-in slot is the share slot the
				// borrower was given, with its rule (it owns no part)
				add = append(add, Decision{Kind: g.Kind, Consumer: r.Consumer, From: g.From, Host: g.Host, Slots: n, Rule: g.Rule})
				continue
			}
			add = append(add, Decision{Kind: "grant", Consumer: r.Consumer, Host: g.Host, Slots: n, Rule: "own.use"})
		}
	}
	if !changed {
		return
	}
	out = append(out, add...)
	// net: an owner's release (its excess after the return) and its own.use
	// grant on the same host cancel
	for i := range out {
		a := &out[i]
		if a.Kind != "release" || a.Rule != "release.moved" {
			continue
		}
		for j := range out {
			b := &out[j]
			if b.Kind == "grant" && b.Rule == "own.use" && b.Consumer == a.Consumer && b.Host == a.Host && a.Slots > 0 && b.Slots > 0 {
				n := min(a.Slots, b.Slots)
				a.Slots -= n
				b.Slots -= n
			}
		}
	}
	f.out = f.out[:start]
	for _, d := range out {
		if d.Slots > 0 {
			f.out = append(f.out, d)
		}
	}
	f.track()
}

// noteGiven records that a grant or a reclaim placed n of l's slots on
// part k: which part a compensation slot is in (ruling 9's swap, #385's
// netting; decisions 417 and 418).
func (f *fold) noteGiven(l string, k hp, n int64) {
	if f.given == nil {
		f.given = map[string]map[hp]int64{}
	}
	if f.given[l] == nil {
		f.given[l] = map[hp]int64{}
	}
	f.given[l][k] += n
}

// grantPartFor is the part of a grant (not a lend) or a reclaim to l on
// host h that ok accepts, from the parts this fold's grants and reclaims
// placed l's slots on (given), and how many of them are there (up to n,
// taken); grantPart's guess from the seating, for all n, when none is
// recorded.
func (f *fold) grantPartFor(l, h string, n int64, ok func(string) bool) (string, int64) {
	var ks []hp
	for k, v := range f.given[l] {
		if k.host == h && v > 0 {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return f.grantPart(l, h), n
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].part < ks[j].part })
	for _, k := range ks {
		if ok(k.part) {
			t := min(n, f.given[l][k])
			f.given[l][k] -= t
			return k.part, t
		}
	}
	return ks[0].part, n
}

// grantPart is the part a grant (not a lend) to l on host h was placed
// on, from the seating: l's own part, an ancestor's private part or the
// public part ("" when none of them holds it).
func (f *fold) grantPart(l, h string) string {
	for _, p := range append(chain(l), root) {
		if f.seat[l][hp{h, p}] > 0 {
			return p
		}
	}
	return ""
}

// netReclaims cancels, per host, a victim's reclaimed slots against what
// the same victim is granted or lent there in the same rebalance: its
// allocation on the host does not change, and section 7 records "every
// change of an allocation" (allocations are per consumer and host,
// section 5), so a leaf giving slots up on a host and gaining as many
// there keeps them where they run (docs/rules.md section 17, step 3.1,
// #99). The claimant is then given the slots the victim was granted (the
// same part: a grant, or a lend from its owner; its own part an own.use)
// with the rule it takes free slots by. Returns are not netted (ruling
// 11, #328, #342), nor releases of ineligible holdings (#330). (Decision
// #363; withOwnership seed 217, event 4.)
func (f *fold) netReclaims(start int) {
	m := f.m
	out := append([]Decision(nil), f.out[start:]...)
	var res []Decision
	for i := range out {
		r := out[i]
		if r.Kind != "reclaim" || r.Slots == 0 {
			res = append(res, r)
			continue
		}
		for j := range out {
			g := &out[j]
			if r.Slots == 0 {
				break
			}
			if (g.Kind != "grant" && g.Kind != "lend") || g.Consumer != r.From || g.Host != r.Host || g.Slots == 0 {
				continue
			}
			k := min(r.Slots, g.Slots)
			r.Slots -= k
			g.Slots -= k
			if j < i {
				for q := range res { // already emitted: shrink it there
					if res[q] == (Decision{Kind: g.Kind, Consumer: g.Consumer, From: g.From, Host: g.Host, Slots: g.Slots + k, Rule: g.Rule, Deadline: g.Deadline}) {
						res[q].Slots -= k
						break
					}
				}
			}
			d := Decision{Kind: g.Kind, Consumer: r.Consumer, From: g.From, Host: g.Host, Slots: k, Rule: "share_ratio.grant"}
			if m.pol.reclaim == events.ReclaimPriority {
				d.Rule = "priority.entitled"
			}
			switch {
			case g.Rule == "own.use": // the victim's own part: lent to the claimant
				d.Kind, d.From = "lend", g.Consumer
			case d.From == d.Consumer:
				d.Kind, d.From, d.Rule = "grant", "", "own.use"
			}
			merged := false
			for q := range res { // one row per kind, consumer, from, host and rule
				if e := &res[q]; e.Kind == d.Kind && e.Consumer == d.Consumer && e.From == d.From && e.Host == d.Host && e.Rule == d.Rule && e.Deadline.Equal(d.Deadline) {
					e.Slots += k
					merged = true
					break
				}
			}
			if !merged {
				res = append(res, d)
			}
		}
		res = append(res, r)
	}
	f.out = append(f.out[:start], res...)
}

// netReclaimsAcross is netReclaims across hosts, the lead's decision on
// reading (c) (AMBIGUITIES.md rounds 4 and 5; decision #385): a victim V
// reclaimed from for a claimant C and compensated in the same rebalance on
// another host (a grant or lend to V there, or V's reclaim from a third
// leaf W there) is not reclaimed from; C is given the compensation instead,
// slot for slot, where C may hold that part (a grant or lend with C's
// placing rule, or C's reclaim from W with the reclaim rule and W's
// reclaim_grace), and V keeps its slots (seed 004's "minimize the impact
// to existing workload"; ruling 7: no move nobody needs). A reclaim from W
// where W is C itself is a swap: both keep where they run. Returns stay
// unnetted (ruling 11), as in #363. (withOwnership seeds 240, event 6, and
// 642, event 7.)
func (f *fold) netReclaimsAcross(start int) {
	m := f.m
	out := f.out[start:]
	var add []Decision
	placing := "share_ratio.grant"
	if m.pol.reclaim == events.ReclaimPriority {
		placing = "priority.entitled"
	}
	for i := range out {
		r := &out[i]
		if r.Kind != "reclaim" || r.Slots == 0 {
			continue
		}
		c, v := r.Consumer, r.From
		for j := range out {
			if r.Slots == 0 {
				break
			}
			g := &out[j]
			if g.Consumer != v || g.Slots == 0 {
				continue
			}
			// on r's own host a grant or lend to V is #363's netting
			// (netReclaims, run before); V's reclaim from W there is
			// netted here as on another host: V's allocation there does
			// not change either (section 7, "every change of an
			// allocation"; decision #391)
			if g.Host == r.Host && g.Kind != "reclaim" {
				continue
			}
			var d Decision
			avail := min(r.Slots, g.Slots)
			switch g.Kind {
			case "grant", "lend":
				if g.Rule == "own.use" {
					continue // an owner's own use is ruling 5's, no share-rule compensation (#364, #385)
				}
				part := g.From
				if g.Kind == "grant" {
					part, avail = f.grantPartFor(v, g.Host, avail, func(p string) bool { return m.mayHold(c, p) })
				}
				if part == "" || !m.mayHold(c, part) {
					continue
				}
				d = Decision{Kind: "grant", Consumer: c, Host: g.Host, Rule: placing}
				switch {
				case part == c:
					d.Rule = "own.use"
				case part != root && !under(c, part):
					d.Kind, d.From = "lend", part
				}
			case "reclaim":
				w := g.From
				if w != c {
					part, t := f.grantPartFor(v, g.Host, avail, func(p string) bool { return m.mayHold(c, p) })
					avail = t
					if part == "" || !m.mayHold(c, part) {
						continue
					}
					d = Decision{Kind: "reclaim", Consumer: c, From: w, Host: g.Host, Rule: r.Rule,
						Deadline: f.at.Add(m.nodes[w].reclaimGrace)}
				}
			default:
				continue
			}
			k := min(r.Slots, g.Slots, avail)
			r.Slots -= k
			g.Slots -= k
			// V keeps its slot on r's host and does not take g's; C takes
			// g's instead of V's
			f.addAlloc(v, r.Host, k)
			f.addAlloc(v, g.Host, -k)
			f.addAlloc(c, r.Host, -k)
			f.addAlloc(c, g.Host, k)
			if d.Kind == "" {
				continue // a swap: nothing moves
			}
			d.Slots = k
			add = append(add, d)
		}
	}
	for _, d := range add {
		merged := false
		for q := start; q < len(f.out); q++ { // one row per kind, consumer, from, host and rule
			if e := &f.out[q]; e.Kind == d.Kind && e.Consumer == d.Consumer && e.From == d.From && e.Host == d.Host && e.Rule == d.Rule && e.Deadline.Equal(d.Deadline) {
				e.Slots += d.Slots
				merged = true
				break
			}
		}
		if !merged {
			f.out = append(f.out, d)
		}
	}
}

// cancelIdleMoves cuts each move of an event (a release.moved beside the
// leaf's share-rule grants or lends on other hosts) as far as the slots it
// frees are still free once the event has settled, with as much of those
// gains, the latest first: such a move helps no leaf towards its target and
// stops running work (ruling 7's move, seed 004's "minimize the impact to
// existing workload"; docs/decisions.md #347, which the engine follows,
// and the model's own #242: a move only when a claimant needs the slot).
// An owner's own use is no share-rule gain: its excess released after
// taking its own slots back stays (ruling 5), so the moves are cut latest
// first: a pool's moves, made after the own layer, are cut against their
// own gains before an owner's excess is reached (decision 525). It runs once the event's
// settles are done (#236): the model's public pool gives up what a deeper
// pool now gives a leaf after its own grants (#318), so a claimant takes
// the freed slot only in the next settle. (Decision #364; withOwnership
// seed 185, event 3.)
func (f *fold) cancelIdleMoves(start int) {
	m := f.m
	out := f.out[start:]
	free := map[string]int64{}
	for _, h := range m.hostNames() {
		free[h] = m.hostFree(h)
	}
	for i := len(out) - 1; i >= 0; i-- {
		r := &out[i]
		if r.Kind != "release" || r.Rule != "release.moved" || r.Slots == 0 {
			continue
		}
		for j := len(out) - 1; j >= 0 && r.Slots > 0 && free[r.Host] > 0; j-- {
			g := &out[j]
			if (g.Kind != "grant" && g.Kind != "lend") || g.Consumer != r.Consumer || g.Host == r.Host || g.Rule == "own.use" || g.Slots == 0 {
				continue
			}
			k := min(r.Slots, g.Slots, free[r.Host])
			r.Slots -= k
			g.Slots -= k
			free[r.Host] -= k
			free[g.Host] += k
			f.addAlloc(r.Consumer, r.Host, k)
			f.addAlloc(g.Consumer, g.Host, -k)
		}
	}
}

// reclaimsAsMoves records, once the event has settled, a victim's loss to a
// reclaim that its gain on another host in the same event makes up as a
// move (ruling 7: "what it gives up because its share of the event's end
// state lies on another host ... a release (rule release.moved) on the
// host it leaves and a grant or lend on the host it goes to, in the same
// event, its count unchanged"; "It is no more than a reclaim followed by
// a grant of the same count"): the victim's release.moved on the
// reclaim's host with its reclaim_grace (ruling 13), and the claimant's
// grant of the slot it frees with the claimant's placing rule; the
// reclaim keeps what the victim's count loses. The victim's gains are its
// grants and lends (not own.use, ruling 5's own layer, #364, #385) and its
// reclaims on other hosts, less what its moves already pair. Where the
// claimant may hold the gain's part #385 has already netted it.
// Allocations are unchanged. (Decision 413; gen.GenerateOwned seed 532,
// event 4.)
func (f *fold) reclaimsAsMoves(start int) {
	m := f.m
	out := f.out[start:]
	placing := "share_ratio.grant"
	if m.pol.reclaim == events.ReclaimPriority {
		placing = "priority.entitled"
	}
	// each leaf's gains per host, less what its moves pair already
	gains := map[string]map[string]int64{}
	for _, d := range out {
		if d.Slots <= 0 || !(d.Kind == "grant" || d.Kind == "lend" || d.Kind == "reclaim") || d.Rule == "own.use" || d.Rule == "priority.borrow" {
			continue
		}
		if gains[d.Consumer] == nil {
			gains[d.Consumer] = map[string]int64{}
		}
		gains[d.Consumer][d.Host] += d.Slots
	}
	take := func(v, notHost string, n int64) int64 {
		var got int64
		for _, h := range m.hostNames() {
			if h == notHost || got >= n || gains[v][h] <= 0 {
				continue
			}
			k := min(n-got, gains[v][h])
			gains[v][h] -= k
			got += k
		}
		return got
	}
	for _, d := range out {
		if d.Kind == "release" && d.Rule == "release.moved" && d.Slots > 0 {
			take(d.Consumer, d.Host, d.Slots)
		}
	}
	var add []Decision
	for i := range out {
		r := &out[i]
		if r.Kind != "reclaim" || r.Slots <= 0 {
			continue
		}
		n := take(r.From, r.Host, r.Slots)
		if n == 0 {
			continue
		}
		r.Slots -= n
		add = append(add,
			Decision{Kind: "release", Consumer: r.From, Host: r.Host, Slots: n, Rule: "release.moved", Deadline: r.Deadline},
			Decision{Kind: "grant", Consumer: r.Consumer, Host: r.Host, Slots: n, Rule: placing})
	}
	f.out = append(f.out, add...)
}

// reclaimAcross is a claimant's reclaim from a victim inside an ancestor
// whose max blocks the claimant's free slots (balance: true), where the
// claimant may not hold the victim's part: the victim gives up its slot on
// a host where the claimant may take a free slot of another part, and the
// claimant takes that one. The ancestor's total is as it was (section 1:
// a reclaim within the branch), the end state is the layered targets
// (section 5, share_ratio: a = T for every leaf), and the decision is the
// claimant's reclaim from the victim on that host, where the victim's
// slot was (section 5: "a reclaim takes the victim's slots"). (Decision
// #368; gen.GenerateOwned seed 703, event 3.)
func (f *fold) reclaimAcross(c, v string, want int64, rule string) int64 {
	m := f.m
	var vs []hp
	for k, n := range f.seat[v] {
		if n > 0 {
			vs = append(vs, k)
		}
	}
	sort.Slice(vs, func(i, j int) bool {
		if vs[i].host != vs[j].host {
			return vs[i].host < vs[j].host
		}
		return vs[i].part < vs[j].part
	})
	var got int64
	for _, k := range vs {
		for _, k2 := range f.foldOrder(c) {
			if got >= want || f.seat[v][k] == 0 {
				break
			}
			if k2.host != k.host || k2 == k || !m.mayHold(c, k2.part) {
				continue
			}
			n := min(want-got, f.seat[v][k], f.room(k2), m.hostFree(k.host))
			if n <= 0 {
				continue
			}
			f.addAlloc(v, k.host, -n)
			f.seat.add(v, k, -n)
			f.addAlloc(c, k.host, n)
			f.seat.add(c, k2, n)
			f.emit(Decision{Kind: "reclaim", Consumer: c, From: v, Host: k.host, Slots: n, Rule: rule})
			f.noteGiven(c, k, n)
			f.track()
			got += n
		}
	}
	return got
}

// unseatedDues is what the layered fold gave leaf l from each source
// other than its own part, less what it sits on from that source.
func (f *fold) unseatedDues(l string) map[string]int64 {
	d := map[string]int64{}
	for s, x := range f.ly.src[l] {
		if s != "own" {
			d[s] = x
		}
	}
	for q, x := range f.seat[l] {
		if s := f.m.sourceOf(l, q.part, f.ly); s != "own" {
			d[s] -= x
		}
	}
	return d
}
