package refmodel

// reclaim: priority under rules 4 with ownership (rules-v4.md rulings 1, 3
// and 12): the own layer as under share_ratio (v4.go), then each pool,
// private pools deepest parent first, then the public pool, is divided
// once over all its slots S: G is the planned share of S over the pool's
// subtree (every consumer counted, ruling 2), and section 4's three steps
// run on what each leaf holds in the pool. What a leaf holds in a pool is
// its seating (ruling 12): the pool's tier is seated in three rounds, up
// to G in the entitled order, up to min(E', G + borrow_limit) in the borrow
// order, and the rest (a private pool's slots beyond that) counts in the
// pools above, where it is seated the same way (ruling 3); the public
// pool seats the rest in the keeper order.

import (
	"sort"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

// tierParts is pool x's parts for leaf l (l == "": every part of the
// pool): x's private part (the public part for root), and every part below
// x whose lending chain up to x lends, that l may hold. Parts below x are
// lent into x by their owners, or passed up by the pools between.
func (f *fold) tierParts(l, x string) []hp { return f.tierPartsBy(l, x, false) }

// tierPartsBy is tierParts; with seating, within a class the hosts go in
// registration order (decision #216: the rounds of ruling 12 seat a
// holder on the pool's classes in the pool's class order, "on each host
// the part of the class's owner, hosts in registration order"), not most
// free first as the division's grants take them. Hosts register in name
// order in the logs the model is compared on; the model keeps no
// registration order, so it takes name order.
func (f *fold) tierPartsBy(l, x string, seating bool) []hp {
	m := f.m
	members := f.members(x)
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
			if v <= 0 || (l != "" && p == l) {
				continue
			}
			k := hp{h, p}
			if p == x {
				cs = append(cs, cand{k, len(members), true, noGrace, f.room(k)})
				continue
			}
			if p == root || !under(p, x) || (l != "" && !m.mayHold(l, p)) {
				continue
			}
			if _, lends := m.lendChain(p, x); !lends {
				continue
			}
			g := m.lendClass(p, x)
			cs = append(cs, cand{k, eligible(g), false, g, f.room(k)})
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
		if a.free != b.free && !seating {
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

// members is the leaves of pool x's subtree.
func (f *fold) members(x string) []string {
	var out []string
	for _, k := range f.m.leaves() {
		if under(k, x) && k != x {
			out = append(out, k)
		}
	}
	return out
}

// seatedTotal is what leaf l has seated anywhere.
func (f *fold) seatedTotal(l string) int64 {
	var n int64
	for _, v := range f.seat[l] {
		n += v
	}
	return n
}

// unseated is what l holds on host h that is not seated yet.
func (f *fold) unseated(l, h string) int64 {
	return f.m.alloc[l][h] - f.seat.onHost(l, h)
}

// priority4 is the rebalance of a priority pool with ownership, version 4.
func (f *fold) priority4(ly layers) {
	m := f.m
	f.free0 = map[string]int64{}
	for _, h := range m.hostNames() {
		f.free0[h] = m.hostFree(h)
	}
	// the own layer reads who sits on an owner's part from the keeper
	// seating (ruling 8); the pools are then seated by their rounds
	f.seat = m.seatKeeper()
	f.ownLayer4(ly)
	f.revoke4()
	if m.pol.preemption {
		f.ownExcessByRounds()
	} else {
		f.ownExcessAll()
	}
	// who sits on a pool's private part as the pools are reached: the
	// keeper seating after the own layer (ruling 11 pairs a return only
	// with the borrowers seated on the part)
	f.sat = f.seat
	f.seatRounds()
}

// seatRounds seats every holder of a priority pool with ownership, version
// 4: each leaf on its own part, then each pool, deepest parent first and
// the public pool last, by ruling 12's rounds as the fold reaches it
// (#216), dividing each pool after its seating unless f.dry; what no tier
// seated is seated anywhere.
func (f *fold) seatRounds() {
	m := f.m
	f.seat = seats{}
	for _, h := range m.hostNames() {
		if !m.hosts[h].up {
			continue
		}
		for p, v := range m.parts(h) {
			if p != root && m.isLeaf(p) && v > 0 {
				f.seat.add(p, hp{h, p}, min(m.alloc[p][h], v))
			}
		}
	}
	var pools []string
	for p, n := range m.nodes {
		if p != root && len(n.children) > 0 {
			pools = append(pools, p)
		}
	}
	sort.Slice(pools, func(i, j int) bool {
		a, b := m.nodes[pools[i]], m.nodes[pools[j]]
		if a.depth != b.depth {
			return a.depth > b.depth
		}
		return a.path < b.path
	})
	for _, x := range append(pools, root) {
		f.pool4(x)
	}
	// what no tier seated (an accounting left over) is seated anywhere
	for _, h := range m.hostNames() {
		if m.hosts[h].up {
			m.seatHost(f.seat, h, map[int]bool{1: true})
		}
	}
}

// ownExcessByRounds gives back each owner's excess after the own layer
// (ruling 5: "in the release order of 'Placement with ownership' (slots
// lent by others, public, private pools, its own last)"), under priority
// with preemption, from the seating by ruling 12's rounds: ruling 12
// replaces the keeper order inside a pool's tier with the rounds under
// priority, #216 takes a pool's classes in its class order (a restrictive
// lent class first) and reads who sits where from that seating for the
// placement, and #383 leaves ruling 8's keepers' seating only to pair an
// owner's gain with the borrowers on its part and to the views (decision
// 525). The keepers' seating the pools' returns read then loses the
// released slots in the same order.
func (f *fold) ownExcessByRounds() {
	keeper := f.seat
	f.dry = true
	f.seatRounds()
	f.dry = false
	n0 := len(f.out)
	f.ownExcessAll()
	f.seat = keeper
	for _, d := range f.out[n0:] {
		if d.Kind == "release" {
			f.unseatReleased(d.Consumer, d.Host, d.Slots)
		}
	}
}

// unseatReleased takes n of l's slots on host h off the seating, in the
// release order's tiers: lent by others, public, private pools farthest
// first, its own last.
func (f *fold) unseatReleased(l, h string, n int64) {
	var ks []hp
	for k, v := range f.seat[l] {
		if k.host == h && v > 0 {
			ks = append(ks, k)
		}
	}
	sort.Slice(ks, func(i, j int) bool {
		if ta, tb := releaseTier(l, ks[i].part), releaseTier(l, ks[j].part); ta != tb {
			return ta < tb
		}
		return ks[i].part < ks[j].part
	})
	for _, k := range ks {
		x := min(n, f.seat[l][k])
		f.seat.add(l, k, -x)
		n -= x
	}
}

// pool4 seats and divides pool x.
func (f *fold) pool4(x string) {
	m, d := f.m, f.d
	members := f.members(x)
	var size int64
	for _, k := range f.tierParts("", x) {
		size += f.room(k)
	}
	// E': what earlier layers left unmet; parents within their max
	eP := map[string]int64{}
	order := m.preorder()
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		if !under(n, x) || n == x {
			continue
		}
		if m.isLeaf(n) {
			eP[n] = max(0, d.E[n]-f.seatedTotal(n))
			continue
		}
		var s, seated int64
		for _, ch := range m.nodes[n].children {
			s += eP[ch]
		}
		for _, l := range members {
			if under(l, n) {
				seated += f.seatedTotal(l)
			}
		}
		if d.maxS[n] != inf {
			s = min(s, max(0, d.maxS[n]-seated))
		}
		eP[n] = s
	}
	// P over x's subtree with P(x) = S, every consumer counted; G
	p := map[string]int64{x: size}
	for _, n := range order {
		if under(n, x) && !m.isLeaf(n) {
			m.split(p, p[n], m.nodes[n].children, noCap)
		}
	}
	g := map[string]int64{}
	if m.pol.enforcement == events.EnforcementLeaf {
		for _, l := range members {
			g[l] = p[l]
		}
	} else {
		for _, n := range order {
			if !under(n, x) || m.isLeaf(n) {
				continue
			}
			if n == x {
				for _, ch := range m.nodes[n].children {
					g[ch] = p[ch]
				}
				continue
			}
			m.split(g, g[n], m.childrenWith(eP, n), func(c string) int64 { return eP[c] })
		}
	}
	inX := map[string]int64{} // what each member holds in the pool
	mine := seats{}           // the seats counted in this pool (#239)
	bl := func(l string) int64 {
		if b := m.nodes[l].borrowLimit; b != nil {
			return *b
		}
		return g[l]
	}
	// waiting-since (section 4's order): a leaf whose demand is met but
	// that this pool gives slots (it then moves up from a pool above,
	// #318) waits from this event, after the leaves already waiting, not
	// before them as a missing entry would put it (decision 411)
	since := func(l string) uint64 {
		if s, ok := m.since[l]; ok && m.waiting[l] {
			return s
		}
		return f.seq
	}
	entCap := func(l string) int64 { return min(eP[l], g[l]) }
	borCap := func(l string) int64 { return min(eP[l], g[l]+bl(l)) }
	entOrder := func(ls []string) {
		sort.SliceStable(ls, func(i, j int) bool {
			a, b := ls[i], ls[j]
			if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
				return pa > pb
			}
			if since(a) != since(b) {
				return since(a) < since(b)
			}
			return a < b
		})
	}
	borOrder := func(ls []string) {
		sort.SliceStable(ls, func(i, j int) bool {
			a, b := ls[i], ls[j]
			if since(a) != since(b) {
				return since(a) < since(b)
			}
			if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
				return pa > pb
			}
			return a < b
		})
	}
	// seating, ruling 12: round 1 up to G, round 2 up to min(E', G + bl)
	seatRound := func(ls []string, bound func(string) int64) {
		for _, l := range ls {
			for _, k := range f.tierPartsBy(l, x, true) { // #216
				n := min(bound(l)-inX[l], f.unseated(l, k.host), f.room(k))
				if n > 0 {
					f.seat.add(l, k, n)
					mine.add(l, k, n)
					inX[l] += n
				}
			}
		}
	}
	ls := append([]string(nil), members...)
	entOrder(ls)
	seatRound(ls, func(l string) int64 { return g[l] })
	borOrder(ls)
	seatRound(ls, borCap)
	if x == root { // the public pool: the rest in the keeper order
		for _, h := range m.hostNames() {
			if !m.hosts[h].up {
				continue
			}
			hs := append([]string(nil), members...)
			sort.SliceStable(hs, func(i, j int) bool {
				a, b := hs[i], hs[j]
				if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
					return pa > pb
				}
				if m.alloc[a][h] != m.alloc[b][h] {
					return m.alloc[a][h] < m.alloc[b][h]
				}
				return a > b
			})
			for _, l := range hs {
				for _, k := range f.tierParts(l, x) {
					if k.host != h {
						continue
					}
					if n := min(f.unseated(l, h), f.room(k)); n > 0 {
						f.seat.add(l, k, n)
						mine.add(l, k, n)
						inX[l] += n
					}
				}
			}
		}
	}
	if f.dry {
		return // the seating only (ownExcessByRounds)
	}
	// what l may still be given in this pool: with preemption what
	// earlier layers left unmet (ruling 1: E replaced by E'), the rest of
	// its holdings in the pools above then moving (ruling 7; #216: the
	// division keeps at most E'); without preemption nothing moves, so
	// never above E in all (#318)
	unmet := func(l string) int64 {
		if m.pol.preemption {
			return eP[l] - inX[l]
		}
		return d.E[l] - m.held(l)
	}
	// section 4's procedure on the pool
	give := func(l string, want int64, rule string) {
		parts := f.tierParts(l, x)
		for _, k := range parts {
			if want <= 0 {
				return
			}
			n := min(want, f.room(k), m.hostFree(k.host), f.layerHeadroom(l), unmet(l))
			if n > 0 && m.seatsIneligible(k.host, l, n) {
				n = 0 // the host's free slots are on parts l may not hold
			}
			if n > 0 {
				f.grantOn(l, k, n, rule)
				mine.add(l, k, n)
				inX[l] += n
				want -= n
			}
		}
		// then, what the pool's free slots on every host did not give,
		// back from the outsiders on x's private part: the free slots of
		// the pool come first, on whatever host (section 4: free slots,
		// then a reclaim "if entitled leaves remain short"; ruling 5's
		// "first takes the free slots of its parts ..., then takes the
		// rest back"; #379; decision #389)
		for _, k := range parts {
			if want <= 0 || k.part == root || m.isLeaf(k.part) || !under(l, k.part) || x != k.part {
				continue
			}
			// the pool's private part, held by outsiders: a return (ruling 8)
			var bs []string
			for _, b := range m.leaves() {
				if !under(b, x) && min(f.unseated(b, k.host), f.sat[b][k]) > 0 {
					bs = append(bs, b)
				}
			}
			m.returnOrder(bs, k.host)
			for _, b := range bs {
				n := min(want, f.unseated(b, k.host), f.sat[b][k], f.room(k), f.headroom(l, b), unmet(l))
				if n <= 0 {
					continue
				}
				f.sat.add(b, k, -n)
				f.addAlloc(b, k.host, -n)
				f.addAlloc(l, k.host, n)
				f.seat.add(l, k, n)
				mine.add(l, k, n)
				f.emit(Decision{Kind: "return", Consumer: l, From: b, Host: k.host, Slots: n, Rule: "own.return",
					Deadline: f.at.Add(m.nodes[x].lendGrace)})
				f.track()
				inX[l] += n
				want -= n
			}
		}
	}
	ent := func() []string {
		var out []string
		for _, l := range members {
			if inX[l] < entCap(l) {
				out = append(out, l)
			}
		}
		entOrder(out)
		return out
	}
	for _, l := range ent() {
		give(l, entCap(l)-inX[l], "priority.entitled")
	}
	var bor []string
	for _, l := range members {
		if inX[l] < borCap(l) {
			bor = append(bor, l)
		}
	}
	borOrder(bor)
	for _, l := range bor {
		give(l, borCap(l)-inX[l], "priority.borrow")
	}
	if !m.pol.preemption {
		return
	}
	defer f.moveBeyond(x, members, eP, inX, mine)
	branch := func(l string) string {
		for q := l; ; q = parentOf(q) {
			if parentOf(q) == x {
				return q
			}
		}
	}
	inBranch := func(b string) int64 {
		var s int64
		for _, l := range members {
			if under(l, b) {
				s += inX[l]
			}
		}
		return s
	}
	for _, c := range ent() {
		for need := min(entCap(c)-inX[c], d.E[c]-m.held(c)); need > 0; {
			var vs []string
			for _, l := range members {
				if l != c && inX[l] > g[l] && m.nodes[l].preemptable {
					vs = append(vs, l)
				}
			}
			over := func(l string) bool { b := branch(l); return inBranch(b) > p[b] }
			sort.SliceStable(vs, func(i, j int) bool {
				a, b := vs[i], vs[j]
				if oa, ob := over(a), over(b); oa != ob {
					return oa
				}
				if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
					return pa < pb
				}
				if ba, bb := inX[a]-g[a], inX[b]-g[b]; ba != bb {
					return ba > bb
				}
				return a < b
			})
			moved := int64(0)
			for _, v := range vs {
				giveN := min(inX[v]-g[v], need, f.headroom(c, v))
				if bv := branch(v); m.pol.enforcement == events.EnforcementParent && bv != branch(c) {
					giveN = min(giveN, inBranch(bv)-min(p[bv], eP[bv]))
				}
				parts := f.byFree0(f.tierParts(c, x))
				for _, k := range parts {
					if moved >= giveN {
						break
					}
					// only what v holds in this pool: its seats on a
					// part of x's tier that a deeper pool counted are
					// that pool's (ruling 1, #239)
					if n := min(giveN-moved, mine[v][k]); n > 0 {
						f.shiftSeat(v, c, k, n)
						mine.add(v, k, -n)
						mine.add(c, k, n)
						// the victim's slot on the private part of the
						// claimant's ancestor, where the seating the own
						// layer read seats it, is ruling 8's take-back: a
						// return with the part owner's lend_grace, paired
						// with the borrower seated there (ruling 11; item
						// 44's take-back in the pool itself; decision 414)
						ret := int64(0)
						if k.part != root && !m.isLeaf(k.part) && under(c, k.part) && !under(v, k.part) {
							ret = min(n, f.sat[v][k])
						}
						if ret > 0 {
							f.sat.add(v, k, -ret)
							f.emit(Decision{Kind: "return", Consumer: c, From: v, Host: k.host, Slots: ret, Rule: "own.return",
								Deadline: f.at.Add(m.nodes[k.part].lendGrace)})
						}
						if n > ret {
							f.emit(Decision{Kind: "reclaim", Consumer: c, From: v, Host: k.host, Slots: n - ret, Rule: "priority.reclaim"})
							f.noteGiven(c, k, n-ret)
						}
						f.track()
						inX[v] -= n
						inX[c] += n
						moved += n
					}
				}
				if moved > 0 {
					break
				}
			}
			if moved == 0 {
				break
			}
			need -= moved
		}
	}
}

// layerHeadroom is what l's ancestors' max leave it in the pool being
// divided: ruling 1 runs each pool "with ... every max reduced by what
// they [the earlier layers] gave", so with preemption what the subtree's
// leaves hold but no pool has seated yet (their holdings in the pools
// above, which move when a deeper pool serves them, #318) does not count;
// without preemption nothing moves and the bound is the total (decision
// #392).
func (f *fold) layerHeadroom(l string) int64 {
	m := f.m
	if !m.pol.preemption {
		return f.headroom(l, "")
	}
	h := inf
	for _, n := range chain(l) {
		if f.d.maxS[n] == inf {
			continue
		}
		held := m.allocOf(n)
		for _, q := range m.leaves() {
			if under(q, n) {
				for hh := range m.alloc[q] {
					held -= max(0, f.unseated(q, hh))
				}
			}
		}
		h = min(h, f.d.maxS[n]-held)
	}
	return h
}

// seatsIneligible reports whether giving l n more slots on host h would
// leave a slot of h that no seating (ruling 8, with its augmenting paths)
// can put on a part its leaf may hold, while none is now.
func (m *Model) seatsIneligible(h, l string, n int64) bool {
	count := func() int64 {
		s := seats{}
		m.seatHost(s, h, nil)
		var bad int64
		for k, ks := range s {
			for x, v := range ks {
				if !m.mayHold(k, x.part) {
					bad += v
				}
			}
		}
		return bad
	}
	before := count()
	if m.alloc[l] == nil {
		m.alloc[l] = map[string]int64{}
	}
	m.alloc[l][h] += n
	after := count()
	m.alloc[l][h] -= n
	if m.alloc[l][h] == 0 {
		delete(m.alloc[l], h)
	}
	return after > before
}

// moveBeyond moves, in the public pool, what a leaf holds there beyond
// what the earlier layers left unmet (E'): a deeper pool gave it slots of
// its own part, and the public division keeps at most E' (#216), so the
// rest is given up where a claimant would take a slot first (the host
// with most free slots, then name): release.moved with the leaf's
// reclaim_grace (rulings 7 and 13; #318).
func (f *fold) moveBeyond(x string, members []string, eP, inX map[string]int64, mine seats) {
	m := f.m
	if x != root {
		return
	}
	for _, l := range members {
		for over := inX[l] - eP[l]; over > 0; {
			n := f.moveOne(l, over, inX, mine)
			if n == 0 {
				break
			}
			over -= n
		}
	}
	// a deeper pool's grants within a max reduced only by what the
	// earlier layers gave (layerHeadroom, #392) can leave a capped
	// ancestor above its max while its leaves still sit on slots of this
	// pool: they move (the same release.moved), lowest priority first,
	// then largest allocation, then path (section 1's release.max order),
	// so no max is exceeded (section 1)
	order := m.preorder()
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		if n == root || f.d.maxS[n] == inf {
			continue
		}
		for over := m.allocOf(n) - f.d.maxS[n]; over > 0; {
			var ls []string
			for _, l := range members {
				if under(l, n) {
					for _, v := range mine[l] {
						if v > 0 {
							ls = append(ls, l)
							break
						}
					}
				}
			}
			if len(ls) == 0 {
				break
			}
			sort.SliceStable(ls, func(i, j int) bool {
				a, b := ls[i], ls[j]
				if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
					return pa < pb
				}
				if ha, hb := m.held(a), m.held(b); ha != hb {
					return ha > hb
				}
				return a < b
			})
			over -= f.moveOne(ls[0], over, inX, mine)
		}
	}
}

// moveOne moves up to most of what leaf l holds in the pool (mine) off
// one seat, the one on the host a claimant would take a slot from first
// (most free slots, then host name, then part): release.moved with l's
// reclaim_grace (rulings 7 and 13). It says how many slots moved, 0 when
// l holds none in the pool.
func (f *fold) moveOne(l string, most int64, inX map[string]int64, mine seats) int64 {
	m := f.m
	best, found := hp{}, false
	for k, v := range mine[l] {
		if v <= 0 {
			continue
		}
		if !found || m.hostFree(k.host) > m.hostFree(best.host) || m.hostFree(k.host) == m.hostFree(best.host) && (k.host < best.host || k.host == best.host && k.part < best.part) {
			best, found = k, true
		}
	}
	if !found {
		return 0
	}
	n := min(most, mine[l][best])
	f.addAlloc(l, best.host, -n)
	f.seat.add(l, best, -n)
	mine.add(l, best, -n)
	inX[l] -= n
	f.emit(Decision{Kind: "release", Consumer: l, Host: best.host, Slots: n, Rule: "release.moved",
		Deadline: f.at.Add(m.nodes[l].reclaimGrace)})
	f.track()
	return n
}

// byFree0 orders the hosts within each class (a run of one part owner's
// parts, as tierParts groups them) by the free slots they had as the
// rebalance started, most first, then name: "the host the claimant would
// use first" (section 5) is the one a grant would have taken first, and
// a victim above its target gives up on the hosts claimants use first
// (docs/rules.md section 17, step 1; #320).
func (f *fold) byFree0(parts []hp) []hp {
	out := append([]hp(nil), parts...)
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && out[j].part == out[i].part {
			j++
		}
		run := out[i:j]
		sort.SliceStable(run, func(a, b int) bool {
			if fa, fb := f.free0[run[a].host], f.free0[run[b].host]; fa != fb {
				return fa > fb
			}
			return run[a].host < run[b].host
		})
		i = j
	}
	return out
}
