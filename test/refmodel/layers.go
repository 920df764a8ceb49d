package refmodel

// The layered fold of share_ratio with ownership
// (docs/rules.md#layered-fold): the own layer, private pools deepest
// parent first, then the public pool; lent slots divided class by class.
// Every count is recomputed from scratch from the state.

import (
	"fmt"
	"sort"
	"time"
)

// noGrace marks a pool's own slots: nobody lent them, anyone may use them.
const noGrace = time.Duration(1<<63 - 1)

// class is a number of slots of one pool with the same lending: grace is
// the lowest lend_grace of the consumers that lent them (noGrace for the
// pool's own private or public slots).
type class struct {
	grace time.Duration
	n     int64
}

// layers is the result of the layered fold: every node's target (a
// parent's is the sum of its leaves') and each owner leaf's own-layer part.
type layers struct {
	T   map[string]int64
	own map[string]int64
	// src: leaf -> source -> slots its layers gave it; a source is "own"
	// or pool#group (srcKey). groups: pool -> its groups' graces.
	src    map[string]map[string]int64
	groups map[string][][]time.Duration
	order  []string // the sources in the order the fold divided them
	// held0, set only for share_ratio's balance: false (balance.go):
	// leaf -> pool -> grace class -> slots held when the rebalance
	// started. Each pool's group is then divided on its reclaim targets
	// T0, the demands capped at max(P, held) (AMBIGUITIES.md, ownership 31).
	held0 map[string]map[string]map[time.Duration]int64
	// pools: pool -> the classes it was divided with (its own slots and
	// what its children lent), as the fold met them (rules 4's T0 keeps
	// them: v4.go).
	pools map[string][]class
}

func srcKey(pool string, group int) string { return fmt.Sprintf("%s#%d", pool, group) }

// owned is the number of slots assigned to consumer c (on up hosts).
func (m *Model) owned(c string) int64 {
	var s int64
	for h, v := range m.own[c] {
		if m.hosts[h].up {
			s += v
		}
	}
	return s
}

// private is private(X): X's assigned slots not assigned to its children.
func (m *Model) private(x string) int64 {
	s := m.owned(x)
	for _, ch := range m.nodes[x].children {
		s -= m.owned(ch)
	}
	return s
}

// public is the up slots no top-level consumer owns.
func (m *Model) public() int64 {
	s := m.capacity()
	for _, ch := range m.nodes[root].children {
		s -= m.owned(ch)
	}
	return s
}

func (m *Model) layered(d *derived) layers {
	return m.layeredFrom(d, nil)
}

// layeredFrom is the layered fold; with held0 (balance: false) every
// pool's group is divided on the reclaim targets T0.
func (m *Model) layeredFrom(d *derived, held0 map[string]map[string]map[time.Duration]int64) layers {
	r := map[string]int64{}  // leaf -> demand earlier layers left unmet (within E)
	rm := map[string]int64{} // node -> max left after earlier layers
	t := map[string]int64{}  // leaf -> sum of its layers' targets
	for p := range m.nodes {
		rm[p] = d.maxS[p]
	}
	for _, l := range m.leaves() {
		r[l] = d.E[l]
	}
	out := layers{T: map[string]int64{}, own: map[string]int64{}, src: map[string]map[string]int64{},
		groups: map[string][][]time.Duration{}, held0: held0, pools: map[string][]class{}}
	give := func(l string, v int64, key string) {
		if out.src[l] == nil {
			out.src[l] = map[string]int64{}
		}
		out.src[l][key] += v
		t[l] += v
		r[l] -= v
		for _, a := range chain(l) {
			if rm[a] != inf {
				rm[a] -= v
			}
		}
	}
	// 1. own layer: leaves by rank, each within its ancestors' remaining max
	ls := m.leaves()
	m.rankOrder(ls)
	unused := map[string]int64{} // leaf -> owned slots its own layer left
	for _, l := range ls {
		o := m.owned(l)
		if o == 0 {
			continue
		}
		u := min(r[l], o)
		for _, a := range chain(l) {
			u = min(u, rm[a])
		}
		u = max(u, 0)
		give(l, u, "own")
		out.own[l] = u
		unused[l] = o - u
	}
	// lentBy is what child c lends its parent's pool: a leaf's unused
	// owned slots, a parent's unused pool, only where lend is true.
	passed := map[string][]class{} // parent -> its pool's leftover
	lentBy := func(c string) []class {
		n := m.nodes[c]
		if !n.lend {
			return nil
		}
		if m.isLeaf(c) {
			if unused[c] > 0 {
				return []class{{grace: n.lendGrace, n: unused[c]}}
			}
			return nil
		}
		var out []class
		for _, cl := range passed[c] {
			out = append(out, class{grace: min(cl.grace, n.lendGrace), n: cl.n})
		}
		return out
	}
	// 2. private pools, deepest parent first, then path
	var parents []string
	for p, n := range m.nodes {
		if p != root && len(n.children) > 0 {
			parents = append(parents, p)
		}
	}
	sort.Slice(parents, func(i, j int) bool {
		a, b := m.nodes[parents[i]], m.nodes[parents[j]]
		if a.depth != b.depth {
			return a.depth > b.depth
		}
		return a.path < b.path
	})
	for _, x := range parents {
		pool := []class{{grace: noGrace, n: m.private(x)}}
		for _, ch := range m.nodes[x].children {
			pool = append(pool, lentBy(ch)...)
		}
		out.pools[x] = pool
		passed[x] = m.divide(x, pool, r, rm, give, &out)
	}
	// 3. public pool: the public slots and what top-level consumers lend
	pool := []class{{grace: noGrace, n: m.public()}}
	for _, ch := range m.nodes[root].children {
		pool = append(pool, lentBy(ch)...)
	}
	out.pools[root] = pool
	m.divide(root, pool, r, rm, give, &out)
	for _, p := range m.preorder() {
		for _, l := range m.leaves() {
			if under(l, p) {
				out.T[p] += t[l]
			}
		}
	}
	return out
}

// divide shares pool x's classes among x's leaves with remaining demand,
// by the pool's policy: classes grouped by the set of leaves eligible to
// borrow them, the most restrictive group first. It returns the leftover,
// the lent slots with the highest lend_grace passed on first and the
// pool's own slots last.
func (m *Model) divide(x string, pool []class, r, rm map[string]int64, give func(string, int64, string),
	ly *layers) []class {
	groups := ly.groups
	merged := map[time.Duration]int64{}
	for _, cl := range pool {
		if cl.n > 0 {
			merged[cl.grace] += cl.n
		}
	}
	var graces []time.Duration
	for g := range merged {
		graces = append(graces, g)
	}
	sort.Slice(graces, func(i, j int) bool { return graces[i] < graces[j] })
	var ls []string
	for _, l := range m.leaves() {
		if under(l, x) && l != x {
			ls = append(ls, l)
		}
	}
	eligible := func(g time.Duration) []string {
		var out []string
		for _, l := range ls {
			if g == noGrace || m.nodes[l].reclaimGrace <= g {
				out = append(out, l)
			}
		}
		return out
	}
	var left []class
	for i := 0; i < len(graces); {
		set := eligible(graces[i])
		j := i + 1
		for j < len(graces) && sameSet(eligible(graces[j]), set) {
			j++
		}
		var size int64
		for _, g := range graces[i:j] {
			size += merged[g]
		}
		key := srcKey(x, len(groups[x]))
		groups[x] = append(groups[x], graces[i:j])
		ly.order = append(ly.order, key)
		var used int64
		if ly.held0 == nil {
			used = m.divideOnce(size, set, r, rm, func(l string, v int64) { give(l, v, key) })
		} else {
			used = m.divideOnceAdj(size, set, r, rm, func(l string, v int64) { give(l, v, key) },
				m.t0Demand(x, graces[i:j], size, set, ly.held0))
		}
		// the pool's own slots are used first, then lent ones, lowest
		// lend_grace first: the leftover is the highest lend_grace first
		unused := size - used
		for k := j - 1; k >= i; k-- {
			g := graces[k]
			if g == noGrace {
				continue
			}
			v := min(unused, merged[g])
			if v > 0 {
				left = append(left, class{grace: g, n: v})
			}
			unused -= v
		}
		if unused > 0 {
			left = append(left, class{grace: noGrace, n: unused})
		}
		i = j
	}
	return left
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// divideOnce is the target (docs/rules.md#shares) for c slots among the
// leaves set (the others count as without demand), with demand r and maxes
// rm; it gives each leaf its part and returns the total given.
func (m *Model) divideOnce(c int64, set []string, r, rm map[string]int64, give func(string, int64)) int64 {
	return m.divideOnceAdj(c, set, r, rm, give, nil)
}

// divideOnceAdj is divideOnce where adj (when not nil) replaces each
// leaf's demand before the parents' are summed.
func (m *Model) divideOnceAdj(c int64, set []string, r, rm map[string]int64, give func(string, int64),
	adj func(l string, e int64) int64) int64 {
	if c <= 0 || len(set) == 0 {
		return 0
	}
	in := map[string]bool{}
	for _, l := range set {
		in[l] = true
	}
	e := map[string]int64{}
	order := m.preorder()
	for i := len(order) - 1; i >= 0; i-- {
		p := order[i]
		if m.isLeaf(p) {
			v := int64(0)
			if in[p] {
				v = r[p]
				for _, a := range chain(p) {
					v = min(v, rm[a])
				}
			}
			e[p] = max(v, 0)
			if adj != nil && in[p] {
				e[p] = adj(p, e[p])
			}
			continue
		}
		var s int64
		for _, ch := range m.nodes[p].children {
			s += e[ch]
		}
		if p != root {
			s = min(rm[p], s)
		}
		e[p] = s
	}
	t := m.targetsC(c, e)
	var used int64
	for _, l := range m.leaves() {
		if in[l] && t[l] > 0 {
			give(l, t[l])
			used += t[l]
		}
	}
	return used
}
