package refmodel

// Placement with ownership (docs/rules.md#ownership-placement) and the
// share_ratio rebalance of an ownership plan: owners first (returns), then
// the share_ratio pairing (docs/rules.md#share-ratio) on the layered
// targets.
//
// The model keeps allocations as counts per (leaf, host). Which part of a
// host a leaf's slots sit in (its own slots, an ancestor's private pool,
// the public part, or slots someone else owns) is derived each time by
// attribute, a fixed rule (AMBIGUITIES.md, ownership).

import (
	"sort"
)

// parts returns host h's partitions: partition owner -> slots, where the
// owner is the deepest consumer whose assigned slots hold them (a leaf:
// its own slots; a parent: its private pool) or root (the public part).
func (m *Model) parts(h string) map[string]int64 {
	out := map[string]int64{}
	if !m.hosts[h].up {
		return out
	}
	out[root] = m.hosts[h].slots
	var cs []string
	for c := range m.own {
		cs = append(cs, c)
	}
	sort.Strings(cs)
	for _, c := range cs {
		if v := m.own[c][h]; v > 0 {
			out[c] += v
			out[parentOf(c)] -= v
		}
	}
	for k, v := range out {
		if v == 0 {
			delete(out, k)
		}
	}
	return out
}

// mayBorrow reports whether leaf l may use slots of partition n (not its
// own, an ancestor's or the public part): every consumer that lends them
// on the way to the pool l draws from (n, then n's ancestors below the
// nearest common one) has lend true and a lend_grace >= l's reclaim_grace.
func (m *Model) mayBorrow(l, n string) bool {
	for q := n; !under(l, q); q = parentOf(q) {
		c := m.nodes[q]
		if c == nil || !c.lend || c.lendGrace < m.nodes[l].reclaimGrace {
			return false
		}
	}
	return true
}

// tierOf is the placement tier of partition n for leaf l: 0 its own
// slots, 1.. its ancestors' private pools nearest first, then the public
// part, then slots lent by others; -1 when l may not use them.
func (m *Model) tierOf(l, n string) int {
	if n == l {
		return 0
	}
	for i, a := range chain(l)[1:] {
		if a == n {
			return 1 + i
		}
	}
	if n == root {
		return 1 << 20
	}
	if m.mayBorrow(l, n) {
		return 1<<20 + 1
	}
	return -1
}

// attribute splits the slots each leaf holds on host h over h's
// partitions: its own first, then its ancestors' private pools nearest
// first, then the public part, leaves in path order; what is left sits on
// other partitions, those the leaf may borrow first, partitions in path
// order. It returns leaf -> partition -> slots and each partition's free.
func (m *Model) attribute(h string) (map[string]map[string]int64, map[string]int64) {
	free := m.parts(h)
	at := map[string]map[string]int64{}
	left := map[string]int64{}
	ls := m.leaves()
	for _, l := range ls {
		if v := m.alloc[l][h]; v > 0 {
			left[l] = v
			at[l] = map[string]int64{}
		}
	}
	put := func(l, n string) {
		v := min(left[l], free[n])
		if v > 0 {
			at[l][n] += v
			free[n] -= v
			left[l] -= v
		}
	}
	for _, l := range ls {
		if left[l] > 0 {
			put(l, l)
		}
	}
	for _, l := range ls {
		for _, a := range chain(l)[1:] {
			if left[l] > 0 {
				put(l, a)
			}
		}
	}
	for _, l := range ls {
		if left[l] > 0 {
			put(l, root)
		}
	}
	var ns []string
	for n := range free {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	for _, pass := range []bool{true, false} {
		for _, l := range ls {
			for _, n := range ns {
				if left[l] > 0 && n != root && (m.mayBorrow(l, n) == pass) {
					put(l, n)
				}
			}
		}
	}
	// Repair: a slot that landed where its leaf may not be is swapped,
	// one at a time, with a slot of another leaf that may be there and
	// whose place the first leaf may use.
	for swapped := true; swapped; {
		swapped = false
		for _, l := range ls {
			for _, n := range ns {
				if at[l][n] == 0 || m.tierOf(l, n) >= 0 {
					continue
				}
				for _, l2 := range ls {
					if l2 == l || m.tierOf(l2, n) < 0 {
						continue
					}
					for _, n2 := range ns {
						if at[l2][n2] > 0 && n2 != l2 && m.tierOf(l, n2) >= 0 && !swapped {
							at[l][n]--
							at[l][n2]++
							at[l2][n2]--
							at[l2][n]++
							swapped = true
						}
					}
				}
			}
		}
	}
	for _, a := range at {
		for n, v := range a {
			if v == 0 {
				delete(a, n)
			}
		}
	}
	return at, free
}

// spot is one place a leaf may take slots from: a partition of a host.
type spot struct {
	host, part string
	tier       int
	free       int64
}

// spots lists where leaf l may be granted slots, in placement order: its
// owned hosts by preference, its ancestors' private hosts nearest first,
// public hosts, hosts lent by others; within a tier most free, then name.
func (m *Model) spots(l string) []spot {
	var out []spot
	for _, h := range m.hostNames() {
		_, free := m.attribute(h)
		for n, v := range free {
			if t := m.tierOf(l, n); t >= 0 && v > 0 {
				out = append(out, spot{host: h, part: n, tier: t, free: v})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.tier != b.tier {
			return a.tier < b.tier
		}
		if a.tier == 0 {
			if pa, pb := m.ownPref[l][a.host], m.ownPref[l][b.host]; pa != pb {
				return pa > pb
			}
		}
		if a.free != b.free {
			return a.free > b.free
		}
		if a.host != b.host {
			return a.host < b.host
		}
		return a.part < b.part
	})
	return out
}

func (m *Model) hostNames() []string {
	var hs []string
	for h := range m.hosts {
		hs = append(hs, h)
	}
	sort.Strings(hs)
	return hs
}

// sourceOf maps partition n, as seen by leaf l, to the fold's source
// (srcKey) its slots come from: l's own slots, a pool's own slots (an
// ancestor's private pool, the public pool), or slots lent into the pool
// where l meets them, in the group of their lend_grace. "" when the last
// fold had no such group.
func (m *Model) sourceOf(l, n string, ly *layers) string {
	if n == l {
		return "own"
	}
	pool, g := n, noGrace
	if !under(l, n) {
		g = m.nodes[n].lendGrace
		for pool = parentOf(n); !under(l, pool); pool = parentOf(pool) {
			g = min(g, m.nodes[pool].lendGrace)
		}
	}
	for i, gs := range ly.groups[pool] {
		for _, x := range gs {
			if x == g {
				return srcKey(pool, i)
			}
		}
	}
	return ""
}

// deficits is, per source, what the last fold gave leaf l there minus
// what l holds there now.
func (m *Model) deficits(l string, ly *layers) map[string]int64 {
	out := map[string]int64{}
	for k, v := range ly.src[l] {
		out[k] = v
	}
	for _, h := range m.hostNames() {
		at, _ := m.attribute(h)
		for n, v := range at[l] {
			out[m.sourceOf(l, n, ly)] -= v
		}
	}
	return out
}

// placeOrder is spots(l) with the spots of the sources where l is short
// first (a grant is placed in the tier it comes from), each limited to
// that shortfall, then every spot in placement order.
func (m *Model) placeOrder(l string, sp []spot, ly *layers) []spot {
	if ly == nil {
		return sp
	}
	def := m.deficits(l, ly)
	var first []spot
	for _, s := range sp {
		k := m.sourceOf(l, s.part, ly)
		if def[k] > 0 {
			x := s
			x.free = min(s.free, def[k])
			def[k] -= x.free
			first = append(first, x)
		}
	}
	return append(first, sp...)
}

// grantTiered gives l up to want free slots by placement order; a grant on
// slots another consumer owns is kind `lend`, from that owner. minTier
// skips the tiers before it (an owner already took its own free slots).
func (f *fold) grantTiered(l string, want int64, rule string, minTier int) int64 {
	m := f.m
	amt := min(want, f.headroom(l, ""))
	var got int64
	for got < amt {
		var s *spot
		for _, sp := range m.placeOrder(l, m.spots(l), f.ly) {
			if sp.tier >= minTier && sp.free > 0 {
				s = &sp
				break
			}
		}
		if s == nil {
			break
		}
		take := min(amt-got, s.free)
		if m.alloc[l] == nil {
			m.alloc[l] = map[string]int64{}
		}
		m.alloc[l][s.host] += take
		got += take
		d := Decision{Kind: "grant", Consumer: l, Host: s.host, Slots: take, Rule: rule}
		if s.tier > 1<<20 {
			d.Kind, d.From = "lend", s.part
		}
		f.emit(d)
	}
	f.track()
	return got
}

// claimOrder is the hosts in the order claimant c would use them.
func (m *Model) claimOrder(c string, ly *layers) []string {
	var hs []string
	seen := map[string]bool{}
	all := m.allSpots(c)
	if ly != nil {
		def := m.deficits(c, ly)
		var first []spot
		for _, s := range all {
			if def[m.sourceOf(c, s.part, ly)] > 0 {
				first = append(first, s)
			}
		}
		all = append(first, all...)
	}
	for _, sp := range all {
		if !seen[sp.host] {
			seen[sp.host] = true
			hs = append(hs, sp.host)
		}
	}
	for _, h := range m.hostNames() {
		if !seen[h] && m.hosts[h].up {
			hs = append(hs, h)
		}
	}
	return hs
}

// allSpots is spots(c) with full partitions included (free 0), so that a
// reclaim knows the claimant's order even where nothing is free.
func (m *Model) allSpots(c string) []spot {
	var out []spot
	for _, h := range m.hostNames() {
		for n := range m.parts(h) {
			if t := m.tierOf(c, n); t >= 0 {
				out = append(out, spot{host: h, part: n, tier: t})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.tier != b.tier {
			return a.tier < b.tier
		}
		if a.tier == 0 {
			if pa, pb := m.ownPref[c][a.host], m.ownPref[c][b.host]; pa != pb {
				return pa > pb
			}
		}
		if a.host != b.host {
			return a.host < b.host
		}
		return a.part < b.part
	})
	return out
}

// moveTiered reclaims amt of victim v's slots for claimant c, from the
// hosts c would use first, never from v's own slots while others remain.
func (f *fold) moveTiered(c, v string, amt int64, rule string) {
	m := f.m
	for _, ownToo := range []bool{false, true} {
		for _, h := range m.claimOrder(c, f.ly) {
			// only slots the claimant may hold: v's own slots on the
			// second pass only
			at, _ := m.attribute(h)
			var avail int64
			for n, x := range at[v] {
				if m.tierOf(c, n) >= 0 && (ownToo || n != v) {
					avail += x
				}
			}
			take := min(amt, avail)
			if take <= 0 {
				continue
			}
			before := m.ineligible(c, h)
			f.shift(v, c, h, take)
			if m.ineligible(c, h) > before { // the slots would land where c may not be
				f.shift(c, v, h, take)
				continue
			}
			amt -= take
			f.emit(Decision{Kind: "reclaim", Consumer: c, From: v, Host: h, Slots: take, Rule: rule})
		}
	}
	f.track()
}

// ineligible is how many of l's slots on h sit where l may not be.
func (m *Model) ineligible(l, h string) int64 {
	at, _ := m.attribute(h)
	var n int64
	for part, v := range at[l] {
		if m.tierOf(l, part) < 0 {
			n += v
		}
	}
	return n
}

func (f *fold) shift(from, to, h string, n int64) {
	m := f.m
	m.alloc[from][h] -= n
	if m.alloc[from][h] == 0 {
		delete(m.alloc[from], h)
	}
	if m.alloc[to] == nil {
		m.alloc[to] = map[string]int64{}
	}
	m.alloc[to][h] += n
}

// releaseTiered gives back amt of l's slots: slots lent by others first,
// then public, then private pools farthest ancestor first, its own last;
// within a tier the host holding most of its slots, then name.
func (f *fold) releaseTiered(l string, amt int64, rule string) {
	m := f.m
	type piece struct {
		host, part string
		rank       int // lower gives first
		n          int64
	}
	var ps []piece
	for _, h := range m.hostNames() {
		at, _ := m.attribute(h)
		for n, v := range at[l] {
			var rank int
			switch t := m.tierOf(l, n); {
			case t == 0:
				rank = 1 << 21
			case n == root:
				rank = 1
			case t > 0 && t < 1<<20:
				rank = 1<<20 - t // farthest ancestor (largest t) first
			default:
				rank = 0 // lent by others
			}
			ps = append(ps, piece{host: h, part: n, rank: rank, n: v})
		}
	}
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		if ha, hb := m.alloc[l][a.host], m.alloc[l][b.host]; ha != hb {
			return ha > hb
		}
		if a.host != b.host {
			return a.host < b.host
		}
		return a.part < b.part
	})
	for _, p := range ps {
		take := min(amt, p.n)
		if take <= 0 {
			continue
		}
		m.alloc[l][p.host] -= take
		if m.alloc[l][p.host] == 0 {
			delete(m.alloc[l], p.host)
		}
		amt -= take
		f.emit(Decision{Kind: "release", Consumer: l, Host: p.host, Slots: take, Rule: rule})
	}
	if f.d != nil {
		f.track()
	}
}

// ownUse is how many of l's owned slots l itself holds.
func (m *Model) ownUse(l string) int64 {
	var s int64
	for h, v := range m.own[l] {
		s += min(v, m.alloc[l][h])
	}
	return s
}

// takeBack returns up to want of owner l's slots on its host h from the
// borrowers sitting on them: lowest priority first, then most slots on
// the host, then path. Deadline: time + l's lend_grace.
func (f *fold) takeBack(l, h string, want int64) int64 {
	m := f.m
	var bs []string
	for _, b := range m.leaves() {
		if b != l && m.alloc[b][h] > m.own[b][h] {
			bs = append(bs, b)
		}
	}
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
	var got int64
	for _, b := range bs {
		take := min(want-got, m.alloc[b][h]-m.own[b][h], f.headroom(l, b))
		if take <= 0 {
			continue
		}
		f.shift(b, l, h, take)
		got += take
		f.emit(Decision{Kind: "return", Consumer: l, From: b, Host: h, Slots: take, Rule: "own.return",
			Deadline: f.at.Add(m.nodes[l].lendGrace)})
	}
	f.track()
	return got
}

// ownHosts lists l's owned up hosts, most preferred first, then name.
func (m *Model) ownHosts(l string) []string {
	var hs []string
	for h, v := range m.own[l] {
		if v > 0 && m.hosts[h].up {
			hs = append(hs, h)
		}
	}
	sort.Strings(hs)
	sort.SliceStable(hs, func(i, j int) bool { return m.ownPref[l][hs[i]] > m.ownPref[l][hs[j]] })
	return hs
}

// layeredRebalance is the share_ratio rebalance of a plan with ownership,
// in rounds (round).
func (f *fold) layeredRebalance() {
	m := f.m
	ly := m.layered(f.d)
	f.ly = &ly
	// Rounds until one changes nothing (at most rebalanceRounds): each
	// step is greedy and can undo a little of an earlier one (a reclaim
	// takes an owner's idle slot, an attribution moves a victim's slot).
	for round := 0; round < rebalanceRounds; round++ {
		n := len(f.out)
		f.round(ly)
		if len(f.out) == n {
			return
		}
	}
}

// rebalanceRounds bounds layeredRebalance's rounds.
const rebalanceRounds = 3

// round: revoke what leaves may no longer borrow; owners by rank take
// their own layer before any share rule (with or without preemption);
// then the share_ratio pairing source by source, then on the totals.
func (f *fold) round(ly layers) {
	m := f.m
	f.revoke()
	ls := m.leaves()
	m.rankOrder(ls)
	for _, l := range ls {
		f.ownerTakes(l, ly)
	}
	for _, src := range ly.order {
		f.pairSource(src)
	}
	// What placement could not match source by source (the attribution
	// of a host's slots is a fixed rule, not a record) is settled on the
	// totals, as the share_ratio pairing.
	f.pairing(ly.T, m.pol.preemption && !f.leftover)
}

// ownerTakes gives leaf l its own layer: it moves onto its own free slots,
// then takes free ones on its hosts, (reclaim_for_preference false) idle
// slots elsewhere, and slots lent out back (returns).
func (f *fold) ownerTakes(l string, ly layers) {
	m := f.m
	hosts := m.ownHosts(l)
	// An owner below its own layer that holds other slots while some
	// of its own are free moves onto its own: it gives back as many
	// other slots (release tiers: its own last) as it takes of its
	// own. Its count does not change.
	var freeOwn int64
	for _, h := range hosts {
		freeOwn += max(0, min(m.own[l][h]-m.alloc[l][h], m.hostFree(h)))
	}
	if mv := min(ly.own[l]-m.ownUse(l), m.held(l)-m.ownUse(l), freeOwn); mv > 0 {
		f.releaseTiered(l, mv, "release.own_moved")
		for _, h := range hosts {
			take := min(mv, m.own[l][h]-m.alloc[l][h], m.hostFree(h))
			if take > 0 {
				if m.alloc[l] == nil {
					m.alloc[l] = map[string]int64{}
				}
				m.alloc[l][h] += take
				mv -= take
				f.emit(Decision{Kind: "grant", Consumer: l, Host: h, Slots: take, Rule: "own.use"})
			}
		}
		f.track()
	}
	// max headroom is checked per take: a return from a borrower in
	// the same subtree does not change the shared ancestors' total
	need := min(ly.own[l]-m.ownUse(l), ly.T[l]-m.held(l))
	if need <= 0 {
		return
	}
	useFree := func(h string) {
		take := min(need, m.own[l][h]-m.alloc[l][h], m.hostFree(h), f.headroom(l, ""))
		if take > 0 {
			if m.alloc[l] == nil {
				m.alloc[l] = map[string]int64{}
			}
			m.alloc[l][h] += take
			need -= take
			f.emit(Decision{Kind: "grant", Consumer: l, Host: h, Slots: take, Rule: "own.use"})
			f.track()
		}
	}
	takeBack := func(h string) {
		if need > 0 {
			need -= f.takeBack(l, h, min(need, m.own[l][h]-m.alloc[l][h]))
		}
	}
	if m.pol.reclaimForPreference {
		// host by host, most preferred first: its free slots, then
		// its lent ones, before any less preferred host
		for _, h := range hosts {
			useFree(h)
			takeBack(h)
		}
		return
	}
	// idle slots first: on its own hosts (most preferred first), then
	// anywhere it may use; lent slots come back only when none is left
	for _, h := range hosts {
		useFree(h)
	}
	// idle: free slots the targets of the others leave unused
	idle := m.freeTotal()
	for _, o := range m.leaves() {
		if o != l {
			idle -= max(0, ly.T[o]-m.held(o))
		}
	}
	if k := min(need, idle); k > 0 {
		need -= f.grantTiered(l, k, "own.use", 1)
	}
	for _, h := range hosts {
		takeBack(h)
	}
}

// holdIn is how many slots leaf l holds that come from source src.
func (m *Model) holdIn(l, src string, ly *layers) int64 {
	var s int64
	for _, h := range m.hostNames() {
		at, _ := m.attribute(h)
		for n, v := range at[l] {
			if m.sourceOf(l, n, ly) == src {
				s += v
			}
		}
	}
	return s
}

// pairSource is the share_ratio pairing (docs/rules.md#share-ratio)
// inside one source (a
// layer, or a class group of a pool): claimants below their target there
// take its free slots, then (with preemption) the slots of leaves above
// their target there. Claimants by (target - held) / share, priority desc,
// path; victims by (held - target) / share, lowest priority, path.
func (f *fold) pairSource(src string) {
	m, ly := f.m, f.ly
	tgt := func(l string) int64 { return ly.src[l][src] }
	var claimants []string
	for _, l := range m.leaves() {
		if m.holdIn(l, src, ly) < tgt(l) {
			claimants = append(claimants, l)
		}
	}
	gap := map[string]int64{}
	for _, l := range claimants {
		gap[l] = tgt(l) - m.holdIn(l, src, ly)
	}
	sort.SliceStable(claimants, func(i, j int) bool {
		a, b := claimants[i], claimants[j]
		na, nb := m.nodes[a], m.nodes[b]
		if x, y := gap[a]*nb.share, gap[b]*na.share; x != y {
			return x > y
		}
		if na.priority != nb.priority {
			return na.priority > nb.priority
		}
		return a < b
	})
	for _, c := range claimants {
		// never above its effective demand; a leaf that holds slots of
		// another source beyond its target there may go above its total
		// target for a while: a later source takes them (it is a victim
		// there), or the pairing on the totals does
		need := min(tgt(c)-m.holdIn(c, src, ly), f.d.E[c]-m.held(c), f.headroom(c, ""))
		if f.leftover { // balance: false, second phase: up to the full target
			need = min(need, ly.T[c]-m.held(c))
		}
		need -= f.grantSource(c, src, need)
		for need > 0 && m.pol.preemption && !f.leftover {
			_, give := f.sourceVictim(c, src, need)
			if give <= 0 {
				break
			}
			need -= give
		}
	}
}

// grantSource grants c up to want free slots of source src, in placement order.
func (f *fold) grantSource(c, src string, want int64) int64 {
	m := f.m
	var got int64
	for got < want {
		var s *spot
		for _, sp := range m.spots(c) {
			if m.sourceOf(c, sp.part, f.ly) == src {
				s = &sp
				break
			}
		}
		if s == nil {
			break
		}
		take := min(want-got, s.free)
		if m.alloc[c] == nil {
			m.alloc[c] = map[string]int64{}
		}
		m.alloc[c][s.host] += take
		got += take
		d := Decision{Kind: "grant", Consumer: c, Host: s.host, Slots: take, Rule: "share_ratio.grant"}
		if s.tier > 1<<20 {
			d.Kind, d.From = "lend", s.part
		}
		f.emit(d)
	}
	f.track()
	return got
}

// sourceVictim moves to c, from the first victim of source src, up to
// need slots. A victim's slot qualifies when c sees it in src (and may
// hold it) and the victim holds more than its target in the source it
// sees the slot in (sources of lent slots depend on who looks). Victims
// by qualifying slots per share, largest first, then lowest priority,
// then path. It returns the victim and how many slots moved.
func (f *fold) sourceVictim(c, src string, need int64) (string, int64) {
	m, ly := f.m, f.ly
	takeable := func(v string) map[string]map[string]int64 { // host -> partition -> slots
		over := map[string]int64{}
		for s, t := range ly.src[v] {
			over[s] -= t
		}
		out := map[string]map[string]int64{}
		for _, h := range m.hostNames() {
			at, _ := m.attribute(h)
			for n, x := range at[v] {
				over[m.sourceOf(v, n, ly)] += x
			}
		}
		for _, h := range m.hostNames() {
			at, _ := m.attribute(h)
			for _, n := range sortedKeys(at[v]) {
				sv := m.sourceOf(v, n, ly)
				if m.sourceOf(c, n, ly) != src || m.tierOf(c, n) < 0 || over[sv] <= 0 {
					continue
				}
				k := min(at[v][n], over[sv])
				over[sv] -= k
				if out[h] == nil {
					out[h] = map[string]int64{}
				}
				out[h][n] += k
			}
		}
		return out
	}
	total := func(t map[string]map[string]int64) int64 {
		var s int64
		for _, ps := range t {
			for _, v := range ps {
				s += v
			}
		}
		return s
	}
	var vs []string
	tk := map[string]map[string]map[string]int64{}
	amount := map[string]int64{}
	for _, l := range m.leaves() {
		if l == c {
			continue
		}
		if t := takeable(l); total(t) > 0 {
			vs = append(vs, l)
			tk[l], amount[l] = t, total(t)
		}
	}
	sort.SliceStable(vs, func(i, j int) bool {
		a, b := vs[i], vs[j]
		na, nb := m.nodes[a], m.nodes[b]
		if x, y := amount[a]*nb.share, amount[b]*na.share; x != y {
			return x > y
		}
		if na.priority != nb.priority {
			return na.priority < nb.priority
		}
		return a < b
	})
	for _, v := range vs {
		give := min(need, amount[v], f.headroom(c, v))
		var moved int64
		for _, h := range m.claimOrder(c, ly) {
			var k int64
			for _, x := range tk[v][h] {
				k += x
			}
			k = min(k, give-moved)
			if k <= 0 {
				continue
			}
			before := m.ineligible(c, h)
			f.shift(v, c, h, k)
			if m.ineligible(c, h) > before {
				f.shift(c, v, h, k)
				continue
			}
			moved += k
			f.emit(Decision{Kind: "reclaim", Consumer: c, From: v, Host: h, Slots: k, Rule: "share_ratio.reclaim"})
		}
		if moved > 0 {
			f.track()
			return v, moved
		}
	}
	return "", 0
}

func sortedKeys(m map[string]int64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// revoke releases the slots a leaf holds on partitions it may no longer
// borrow (a plan changed lend or the grace periods, or ownership moved
// under it): "the lending out grace period is enforced and may override
// the grace period of borrowers who have existing allocations" (seed
// 004). Leaves in path order, hosts by name; the pairing then grants the
// leaf what it may use up to its target.
func (f *fold) revoke() bool {
	m := f.m
	any := false
	for _, h := range m.hostNames() {
		at, _ := m.attribute(h)
		for _, l := range m.leaves() {
			var n int64
			for part, v := range at[l] {
				if m.tierOf(l, part) < 0 {
					n += v
				}
			}
			if n > 0 {
				m.alloc[l][h] -= n
				if m.alloc[l][h] == 0 {
					delete(m.alloc[l], h)
				}
				f.emit(Decision{Kind: "release", Consumer: l, Host: h, Slots: n, Rule: "release.lend_revoked"})
				f.track()
				any = true
			}
		}
	}
	return any
}
