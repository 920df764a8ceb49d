package refmodel

// share_ratio's `balance: false` with ownership (rules version 3): the
// layered fold divided on reclaim targets T0, layer by layer, then the free
// slots left to the leaves below their full layered target
// (docs/rules.md#balance-false and #layer-division; AMBIGUITIES.md, ownership
// 31-32).

import "time"

// poolOf is where leaf l meets the slots of partition n (n's owner, or
// root for the public part): own is true for l's own slots; otherwise
// pool is the pool whose layer they are in (n itself when n is an
// ancestor or root, else the nearest ancestor of n that is also l's) and
// g their lending class there (the smallest lend_grace of the lending
// chain; noGrace for the pool's own slots). The same reading as sourceOf.
func (m *Model) poolOf(l, n string) (pool string, g time.Duration, own bool) {
	if n == l {
		return "", 0, true
	}
	if under(l, n) {
		return n, noGrace, false
	}
	g = m.nodes[n].lendGrace
	for pool = parentOf(n); !under(l, pool); pool = parentOf(pool) {
		g = min(g, m.nodes[pool].lendGrace)
	}
	return pool, g, false
}

// heldByClass is, for every leaf, the slots it holds now per pool and
// lending class (its own slots are not counted: the own layer has no T0).
func (m *Model) heldByClass() map[string]map[string]map[time.Duration]int64 {
	out := map[string]map[string]map[time.Duration]int64{}
	for _, h := range m.hostNames() {
		at, _ := m.attribute(h)
		for l, ps := range at {
			for n, v := range ps {
				pool, g, own := m.poolOf(l, n)
				if own || v == 0 {
					continue
				}
				if out[l] == nil {
					out[l] = map[string]map[time.Duration]int64{}
				}
				if out[l][pool] == nil {
					out[l][pool] = map[time.Duration]int64{}
				}
				out[l][pool][g] += v
			}
		}
	}
	return out
}

// plannedOver is the planned share (P, docs/rules.md#shares) of c slots
// over x's subtree, x getting c: every node that has a leaf of set below
// it (or is one) counts, with or without demand; the others get nothing.
func (m *Model) plannedOver(x string, c int64, set []string) map[string]int64 {
	in := map[string]bool{}
	for _, l := range set {
		for q := l; q != root && q != x; q = parentOf(q) {
			in[q] = true
		}
	}
	out := map[string]int64{x: c}
	for _, p := range m.preorder() {
		if !under(p, x) || m.isLeaf(p) {
			continue
		}
		var kids []string
		for _, ch := range m.nodes[p].children {
			if in[ch] {
				kids = append(kids, ch)
			}
		}
		m.split(out, out[p], kids, noCap)
	}
	return out
}

// t0Demand caps a leaf's demand in pool x's group of classes graces
// (size slots, eligible leaves set) at max(P, held0): P its planned share
// of the group over x's subtree, held0 what it held in the group when
// the rebalance started.
func (m *Model) t0Demand(x string, graces []time.Duration, size int64, set []string,
	held0 map[string]map[string]map[time.Duration]int64) func(string, int64) int64 {
	p := m.plannedOver(x, size, set)
	return func(l string, e int64) int64 {
		var a int64
		for _, g := range graces {
			a += held0[l][x][g]
		}
		return min(e, max(p[l], a))
	}
}

// layeredBalanceFalse is the share_ratio rebalance of an ownership plan
// with balance: false and preemption: the rounds of layeredRebalance on
// the layered reclaim targets T0 (returns included: the own layer is the
// same in both), then the rounds again on the full layered targets T
// with grants only, each leaf up to its T.
func (f *fold) layeredBalanceFalse() {
	m := f.m
	ly := m.layered(f.d)
	ly0 := m.layeredFrom(f.d, m.heldByClass())
	f.a0, f.t0 = m.Allocations(), ly0.T
	f.ly = &ly0
	for round := 0; round < rebalanceRounds; round++ {
		n := len(f.out)
		f.round(ly0)
		if len(f.out) == n {
			break
		}
	}
	f.afterReclaim = m.Allocations()
	f.ly, f.leftover = &ly, true
	for round := 0; round < rebalanceRounds; round++ {
		n := len(f.out)
		f.round(ly)
		if len(f.out) == n {
			break
		}
	}
	f.leftover = false
}
