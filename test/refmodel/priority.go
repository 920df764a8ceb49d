package refmodel

// reclaim: priority with ownership (rules version 3;
// docs/rules.md#layer-division: each layer runs the priority procedure on
// its own slots, with G = the planned share of that layer's capacity over
// the layer's subtree; first-come first-served and reclaim happen inside a
// layer). Readings: AMBIGUITIES.md, ownership 23-30.
//
// The own layer is share_ratio's (ownerTakes: moves onto own slots, free
// own slots, idle slots, returns), with the leaf's effective demand in
// place of its target. Then every pool's layers in the fold's order
// (private pools deepest parent first, then the public pool; in a pool,
// its lending classes grouped by eligible leaves, the most restrictive
// first, the pool's own slots in the last group). A layer's slots are
// concrete: the parts of hosts whose slots a member meets in that pool and
// class, less what the owners and deeper pools hold of them. A leaf's
// slots belong to the layer of the part they are attributed to.

import (
	"sort"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

// player is one layer of the priority fold's pools: a group of pool's
// lending classes with the same eligible leaves.
type player struct {
	index   int // in the fold's order
	pool    string
	graces  map[time.Duration]bool
	members []string // eligible leaves of the pool's subtree, path order
	member  map[string]bool
}

// lendChain is the class of partition n's slots in pool z (n below z): the
// smallest lend_grace from n up to z's child; ok is false when one of them
// does not lend.
func (m *Model) lendChain(n, z string) (time.Duration, bool) {
	g := noGrace
	for q := n; q != z; q = parentOf(q) {
		c := m.nodes[q]
		if c == nil || !c.lend {
			return 0, false
		}
		g = min(g, c.lendGrace)
	}
	return g, true
}

// priorityLayers lists the pools' layers in the fold's order.
func (m *Model) priorityLayers() []player {
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
	pools = append(pools, root)
	var out []player
	for _, z := range pools {
		classes := map[time.Duration]bool{noGrace: true}
		for _, h := range m.hostNames() {
			for n := range m.parts(h) {
				if n == z || n == root || !under(n, z) {
					continue
				}
				if g, ok := m.lendChain(n, z); ok {
					classes[g] = true
				}
			}
		}
		var graces []time.Duration
		for g := range classes {
			graces = append(graces, g)
		}
		sort.Slice(graces, func(i, j int) bool { return graces[i] < graces[j] })
		var ls []string
		for _, l := range m.leaves() {
			if under(l, z) && l != z {
				ls = append(ls, l)
			}
		}
		eligible := func(g time.Duration) []string {
			var e []string
			for _, l := range ls {
				if g == noGrace || m.nodes[l].reclaimGrace <= g {
					e = append(e, l)
				}
			}
			return e
		}
		for i := 0; i < len(graces); {
			set := eligible(graces[i])
			j := i + 1
			for j < len(graces) && sameSet(eligible(graces[j]), set) {
				j++
			}
			pl := player{index: len(out), pool: z, graces: map[time.Duration]bool{}, members: set, member: map[string]bool{}}
			for _, g := range graces[i:j] {
				pl.graces[g] = true
			}
			for _, l := range set {
				pl.member[l] = true
			}
			out = append(out, pl)
			i = j
		}
	}
	return out
}

// hp is a part of a host: the slots partition part owns on host.
type hp struct{ host, part string }

// lview is the state of a layer: what each member holds in it, its
// parts in placement order with their free slots and the slots outsiders
// (leaves outside the pool's subtree) hold there, and its capacity.
type lview struct {
	a     map[string]int64
	parts []hp
	class map[hp]time.Duration
	free  map[hp]int64
	out   map[hp]map[string]int64
	cap   int64
}

// inLayer reports whether part n's slots are in layer s, and their class.
func (m *Model) inLayer(s player, n string) (time.Duration, bool) {
	if n == s.pool {
		return noGrace, s.graces[noGrace]
	}
	if n == root || !under(n, s.pool) {
		return 0, false
	}
	g, ok := m.lendChain(n, s.pool)
	return g, ok && s.graces[g]
}

// layerView is the state of layer s. An owner's own-layer slots that sit
// outside its own part (idle slots it used with reclaim_for_preference
// false, while its own are lent) are its own layer's, not a pool's: they
// are deducted from what it holds in the pools' layers, in the fold's
// order, and no layer counts or reclaims them.
func (f *fold) layerView(s player) lview {
	m := f.m
	v := lview{a: map[string]int64{}, class: map[hp]time.Duration{}, free: map[hp]int64{}, out: map[hp]map[string]int64{}}
	earlier := map[string]int64{} // leaf -> slots it holds in the layers before s
	for _, h := range m.hostNames() {
		at, free := m.attribute(h)
		for l, ps := range at {
			for n, x := range ps {
				if i := f.layerOf(l, n); i >= 0 && i < s.index {
					earlier[l] += x
				}
			}
		}
		for n := range m.parts(h) {
			g, ok := m.inLayer(s, n)
			if !ok {
				continue
			}
			k := hp{h, n}
			v.parts = append(v.parts, k)
			v.class[k] = g
			v.free[k] = max(0, free[n])
			v.cap += v.free[k]
			for l, ps := range at {
				x := ps[n]
				if x == 0 {
					continue
				}
				if !under(l, s.pool) {
					if v.out[k] == nil {
						v.out[k] = map[string]int64{}
					}
					v.out[k][l] += x
					v.cap += x
					continue
				}
				if pool, _, own := m.poolOf(l, n); !own && pool == s.pool && s.member[l] {
					v.a[l] += x
					v.cap += x
				}
			}
		}
	}
	for l, a := range v.a {
		sub := max(0, min(f.ly.own[l], m.held(l))-m.ownUse(l))
		if ded := min(a, max(0, sub-earlier[l])); ded > 0 {
			v.a[l] -= ded
			v.cap -= ded
		}
	}
	// placement order: the pool's own slots first, then lent ones by
	// class (lowest lend_grace first); most free, then host, then part
	sort.SliceStable(v.parts, func(i, j int) bool {
		a, b := v.parts[i], v.parts[j]
		if oa, ob := a.part == s.pool, b.part == s.pool; oa != ob {
			return oa
		}
		if v.class[a] != v.class[b] {
			return v.class[a] < v.class[b]
		}
		if v.free[a] != v.free[b] {
			return v.free[a] > v.free[b]
		}
		if a.host != b.host {
			return a.host < b.host
		}
		return a.part < b.part
	})
	return v
}

// hostIneligible is how many slots on host h sit where their leaf may not be.
func (m *Model) hostIneligible(h string) int64 {
	at, _ := m.attribute(h)
	var n int64
	for l, ps := range at {
		for part, v := range ps {
			if m.tierOf(l, part) < 0 {
				n += v
			}
		}
	}
	return n
}

// layerOf is the index of the layer in which leaf l holds slots of part
// n, -1 for its own slots (or none).
func (f *fold) layerOf(l, n string) int {
	pool, g, own := f.m.poolOf(l, n)
	if own {
		return -1
	}
	for _, s := range f.players {
		if s.pool == pool && s.graces[g] {
			return s.index
		}
	}
	return -1
}

// usable reports whether leaf l meets part n's slots in layer s.
func (m *Model) usable(s player, l, n string) bool {
	pool, _, own := m.poolOf(l, n)
	return !own && pool == s.pool && m.tierOf(l, n) >= 0
}

// layerShares is a layer's P (planned share of its capacity over the
// pool's subtree, members only), E (each member's slots in the layer
// plus its unmet demand; a parent's min(its max room with the slots of
// the layer, the sum of its children's)) and G (the guarantee of
// docs/rules.md#shares with the pool's children as the top level).
func (f *fold) layerShares(s player, v lview) (p, e, g map[string]int64) {
	m, d := f.m, f.d
	p = m.plannedOver(s.pool, v.cap, s.members)
	e = map[string]int64{}
	order := m.preorder()
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		if n == s.pool || !under(n, s.pool) {
			continue
		}
		if m.isLeaf(n) {
			if s.member[n] {
				e[n] = v.a[n] + max(0, d.E[n]-m.held(n))
			}
			continue
		}
		var sum, as int64
		for _, ch := range m.nodes[n].children {
			sum += e[ch]
		}
		for _, l := range s.members {
			if under(l, n) {
				as += v.a[l]
			}
		}
		room := inf
		if d.maxS[n] != inf {
			room = max(0, d.maxS[n]-m.allocOf(n)+as)
		}
		e[n] = min(room, sum)
	}
	g = map[string]int64{}
	if m.pol.enforcement == events.EnforcementLeaf {
		for _, l := range s.members {
			g[l] = p[l]
		}
		return p, e, g
	}
	capE := func(x string) int64 { return e[x] }
	for _, n := range order {
		if !under(n, s.pool) || m.isLeaf(n) {
			continue
		}
		if n == s.pool {
			for _, ch := range m.nodes[n].children {
				g[ch] = p[ch]
			}
			continue
		}
		m.split(g, g[n], m.childrenWith(e, n), capE)
	}
	return p, e, g
}

// priorityOwned is the priority rebalance of a plan with ownership.
func (f *fold) priorityOwned() {
	m, d := f.m, f.d
	full := m.layered(d)
	// the own layer as share_ratio's, the leaf's E in place of a target
	ly := layers{T: map[string]int64{}, own: full.own, src: map[string]map[string]int64{},
		groups: map[string][][]time.Duration{}}
	for _, l := range m.leaves() {
		ly.T[l] = d.E[l]
	}
	f.ly = &ly
	f.revoke()
	ls := m.leaves()
	m.rankOrder(ls)
	for _, l := range ls {
		if !m.pol.reclaimForPreference {
			f.ownerTakes(l, ly)
			continue
		}
		// reclaim_for_preference: the owner takes its preferred slots
		// back although idle slots exist; "the flag changes which slots
		// move, never how many each consumer holds": a borrower that gave
		// slots back is granted as many of the idle slots, those the
		// owner would have used with the flag off (no layer's cap
		// applies: they are the owner's slots moved, rule own.return)
		n := len(f.out)
		f.ownerTakes(l, ly)
		back := map[string]int64{}
		var from []string
		for _, dec := range f.out[n:] {
			if dec.Kind == "return" {
				if back[dec.From] == 0 {
					from = append(from, dec.From)
				}
				back[dec.From] += dec.Slots
			}
		}
		idle := m.freeTotal()
		for _, o := range m.leaves() {
			if o != l {
				idle -= max(0, d.E[o]-m.held(o)-back[o])
			}
		}
		for _, b := range from {
			if k := min(back[b], idle); k > 0 {
				idle -= f.grantTiered(b, k, "own.return", 0)
			}
		}
	}
	// an owner's slots taken from free ones can push a borrower's slots
	// (counts per host, attributed by rule) onto a part it may not use
	f.revoke()
	f.players = m.priorityLayers()
	for _, s := range f.players {
		f.priorityLayer(s)
	}
}

// priorityLayer runs the priority procedure (docs/rules.md#priority) on
// layer s: free slots (then
// the layer's slots outsiders hold, taken back) to entitled members, then
// to borrowers first-come first-served, then (with preemption) reclaim
// among the members.
func (f *fold) priorityLayer(s player) {
	m, d := f.m, f.d
	v := f.layerView(s)
	if v.cap == 0 {
		return
	}
	p, e, g := f.layerShares(s, v)
	entCap := func(l string) int64 { return min(e[l], g[l]) }
	borCap := func(l string) int64 {
		bl := g[l]
		if b := m.nodes[l].borrowLimit; b != nil {
			bl = *b
		}
		return min(e[l], g[l]+bl)
	}
	entitled := func() []string {
		v := f.layerView(s)
		var out []string
		for _, l := range s.members {
			if v.a[l] < entCap(l) {
				out = append(out, l)
			}
		}
		sort.SliceStable(out, func(i, j int) bool {
			a, b := out[i], out[j]
			if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
				return pa > pb
			}
			if m.since[a] != m.since[b] {
				return m.since[a] < m.since[b]
			}
			return a < b
		})
		return out
	}
	// 1. entitled members
	for _, l := range entitled() {
		f.layerTake(s, l, entCap(l)-f.layerView(s).a[l], "priority.entitled")
	}
	// 2. borrowers, first-come first-served
	var bor []string
	v = f.layerView(s)
	for _, l := range s.members {
		if v.a[l] < borCap(l) {
			bor = append(bor, l)
		}
	}
	sort.SliceStable(bor, func(i, j int) bool {
		a, b := bor[i], bor[j]
		if m.since[a] != m.since[b] {
			return m.since[a] < m.since[b]
		}
		if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
			return pa > pb
		}
		return a < b
	})
	for _, l := range bor {
		f.layerTake(s, l, borCap(l)-f.layerView(s).a[l], "priority.borrow")
	}
	if !m.pol.preemption {
		return
	}
	// 3. entitled members still short reclaim from the layer's borrowers
	for _, c := range entitled() {
		for {
			v := f.layerView(s)
			need := min(entCap(c)-v.a[c], d.E[c]-m.held(c))
			if need <= 0 {
				break
			}
			if f.layerReclaim(s, c, need, v, p, e, g) == 0 {
				break
			}
		}
	}
}

// layerTake gives member l up to want slots of layer s: free ones in
// placement order (kind lend on a part another consumer owns), then,
// in a private pool, the layer's slots outsiders hold: taken back
// (return, deadline = time + the pool owner's lend_grace), on the parts
// in placement order, the lowest priority first, then most slots on the
// host, then path. It returns what l got.
func (f *fold) layerTake(s player, l string, want int64, rule string) int64 {
	m, d := f.m, f.d
	amt := min(want, d.E[l]-m.held(l), f.headroom(l, ""))
	var got int64
	skip := map[hp]bool{}
	for got < amt {
		v := f.layerView(s)
		var k *hp
		for _, x := range v.parts {
			if v.free[x] > 0 && !skip[x] && m.usable(s, l, x.part) {
				k = &x
				break
			}
		}
		if k == nil {
			break
		}
		take := min(amt-got, v.free[*k])
		before := m.hostIneligible(k.host)
		if m.alloc[l] == nil {
			m.alloc[l] = map[string]int64{}
		}
		m.alloc[l][k.host] += take
		if m.hostIneligible(k.host) > before { // a slot would land where its leaf may not be
			m.alloc[l][k.host] -= take
			if m.alloc[l][k.host] == 0 {
				delete(m.alloc[l], k.host)
			}
			skip[*k] = true
			continue
		}
		got += take
		dec := Decision{Kind: "grant", Consumer: l, Host: k.host, Slots: take, Rule: rule}
		if k.part != s.pool {
			dec.Kind, dec.From = "lend", k.part
		}
		f.emit(dec)
	}
	for got < amt && s.pool != root {
		v := f.layerView(s)
		moved := false
		for _, x := range v.parts {
			if moved || len(v.out[x]) == 0 || !m.usable(s, l, x.part) {
				continue
			}
			var bs []string
			for b := range v.out[x] {
				bs = append(bs, b)
			}
			sort.Slice(bs, func(i, j int) bool {
				a, b := bs[i], bs[j]
				if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
					return pa < pb
				}
				if ha, hb := m.alloc[a][x.host], m.alloc[b][x.host]; ha != hb {
					return ha > hb
				}
				return a < b
			})
			for _, b := range bs {
				take := min(amt-got, v.out[x][b], f.headroom(l, b))
				if take <= 0 {
					continue
				}
				before := m.ineligible(l, x.host)
				f.shift(b, l, x.host, take)
				if m.ineligible(l, x.host) > before {
					f.shift(l, b, x.host, take)
					continue
				}
				got += take
				f.emit(Decision{Kind: "return", Consumer: l, From: b, Host: x.host, Slots: take, Rule: "own.return",
					Deadline: f.at.Add(m.nodes[s.pool].lendGrace)})
				moved = true
				break
			}
		}
		if !moved {
			break
		}
	}
	f.track()
	return got
}

// layerReclaim moves to claimant c, from the first victim of layer s
// that can give something, up to need slots; it returns how many moved.
// Victims are the other members above their G in the layer: those whose
// branch (the pool's child they are under) holds more of the layer than
// its planned share first, then lowest priority, then most borrowed,
// then path; each gives at most what keeps it at G, and with enforcement
// parent a victim of another branch X at most A(X) - min(P(X), E(X)),
// counted in the layer. Only slots c meets in the layer move, on the
// layer's parts in c's placement order.
func (f *fold) layerReclaim(s player, c string, need int64, v lview, p, e, g map[string]int64) int64 {
	m := f.m
	branch := func(l string) string {
		for q := l; ; q = parentOf(q) {
			if parentOf(q) == s.pool {
				return q
			}
		}
	}
	as := func(x string) int64 {
		var t int64
		for _, l := range s.members {
			if under(l, x) {
				t += v.a[l]
			}
		}
		return t
	}
	var vs []string
	for _, l := range s.members {
		if l != c && v.a[l] > g[l] {
			vs = append(vs, l)
		}
	}
	over := func(l string) bool { x := branch(l); return as(x) > p[x] }
	sort.SliceStable(vs, func(i, j int) bool {
		a, b := vs[i], vs[j]
		if oa, ob := over(a), over(b); oa != ob {
			return oa
		}
		if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
			return pa < pb
		}
		if ba, bb := v.a[a]-g[a], v.a[b]-g[b]; ba != bb {
			return ba > bb
		}
		return a < b
	})
	for _, x := range vs {
		give := min(v.a[x]-g[x], need, f.headroom(c, x))
		if bx := branch(x); m.pol.enforcement == events.EnforcementParent && bx != branch(c) {
			give = min(give, as(bx)-min(p[bx], e[bx]))
		}
		if give <= 0 {
			continue
		}
		var moved int64
		for _, k := range v.parts {
			if moved >= give {
				break
			}
			if !m.usable(s, c, k.part) {
				continue
			}
			at, _ := m.attribute(k.host)
			if pool, _, own := m.poolOf(x, k.part); own || pool != s.pool {
				continue
			}
			take := min(give-moved, at[x][k.part])
			if take <= 0 {
				continue
			}
			before := m.ineligible(c, k.host)
			f.shift(x, c, k.host, take)
			if m.ineligible(c, k.host) > before {
				f.shift(c, x, k.host, take)
				continue
			}
			moved += take
			f.emit(Decision{Kind: "reclaim", Consumer: c, From: x, Host: k.host, Slots: take, Rule: "priority.reclaim"})
		}
		if moved > 0 {
			f.track()
			return moved
		}
	}
	return 0
}
