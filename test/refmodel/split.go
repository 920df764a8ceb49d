package refmodel

// Part D of rules-v4.md (rules version 4): priority bands, consumers that
// are not preempted and zero shares. They live in the targets: every split
// of a quantity among siblings goes through split (D.1.3), with floors
// (D.1.2), bases, caps and bands. A plan that names none of the fields
// reduces to section 3's apportion term for term ("Reduction"); the model
// takes the new path for every rules-4 plan without ownership, so the
// reduction is what its tests check (TestRules4ReducesToRules3).

import (
	"fmt"
	"sort"

	"github.com/cluster-ledger/ledger/events"
)

// addSat adds slot counts, saturating at inf (an infinite cap).
func addSat(a, b int64) int64 {
	if a >= inf-b {
		return inf
	}
	return a + b
}

// applyRules4 validates part D's fields of a plan (D.1.5) and stores them:
// the policy's priority_bands and every node's effective preemptable
// (inherited). Called after applyOwnership, on the tree buildPlanUpTo made.
func applyRules4(nodes map[string]*node, pol *policy, op *OwnedPlan) error {
	if len(op.Malformed) > 0 {
		return fmt.Errorf("%w: %v not a boolean", ErrMalformedPlan, op.Malformed)
	}
	named := op.PriorityBands != nil || len(op.Preemptable) > 0
	if pol.rules < rulesV4 {
		if named {
			return fmt.Errorf("%w: priority_bands and preemptable are rules 4 fields (rules %d)", ErrMalformedPlan, pol.rules)
		}
		for _, n := range nodes {
			n.preemptable = true
		}
		return nil
	}
	if op.PriorityBands != nil && pol.reclaim != events.ReclaimShareRatio {
		return fmt.Errorf("%w: priority_bands under reclaim %s", ErrInvalidPlan, pol.reclaim)
	}
	pol.priorityBands = op.PriorityBands != nil && *op.PriorityBands
	for path := range op.Preemptable {
		if _, ok := nodes[path]; !ok || path == root {
			return fmt.Errorf("%w: preemptable for %q, which the plan does not list", ErrMalformedPlan, path)
		}
	}
	// effective preemptable: the consumer's own value, else its parent's,
	// true at the top (D.1.1)
	var paths []string
	for p := range nodes {
		paths = append(paths, p)
	}
	sort.Strings(paths) // a parent sorts before its children
	pinned, zero := false, false
	for _, p := range paths {
		n := nodes[p]
		switch v, ok := op.Preemptable[p]; {
		case p == root:
			n.preemptable = true
		case ok && v != nil:
			n.preemptable = *v
		default:
			n.preemptable = nodes[parentOf(p)].preemptable
		}
		if p != root && len(n.children) == 0 && !n.preemptable {
			pinned = true
		}
		if p != root && n.share == 0 {
			zero = true
		}
	}
	// D.1.5: the new fields with ownership are refused in version 4. A
	// field given its default value is no field (decisions.md #240).
	owning := op.ReclaimForPreference != nil
	for _, o := range op.Owners {
		owning = owning || len(o.Own) > 0 || o.Lend != nil
	}
	notDefault := pol.priorityBands || zero
	for _, v := range op.Preemptable {
		notDefault = notDefault || (v != nil && !*v)
	}
	if owning && notDefault {
		return fmt.Errorf("%w: priority_bands, preemptable: false or a zero share with ownership", ErrUnsupportedWithOwnership)
	}
	pol.pins = pinned
	return nil
}

// sItem is one child of a split: its share and priority, floor f, base b
// and cap c (f <= b <= c).
type sItem struct {
	path      string
	w, prio   int64
	f, b, c   int64
	zeroShare bool
}

// apportionFloors is section 2's apportion with floors (D.1.2): an item
// the split leaves below its floor is held at it, and the others are split
// again.
func apportionFloors(q int64, its []sItem, floor, capOf func(sItem) int64) []int64 {
	held := make([]bool, len(its))
	for {
		rest := q
		var idx []int
		var items []item
		for i, it := range its {
			if held[i] {
				rest -= floor(it)
				continue
			}
			idx = append(idx, i)
			items = append(items, item{path: it.path, w: it.w, cap: capOf(it), priority: it.prio})
		}
		x := apportion(max(rest, 0), items)
		grew := false
		for k, i := range idx {
			if x[k] < floor(its[i]) {
				held[i], grew = true, true
			}
		}
		if !grew {
			out := make([]int64, len(its))
			for k, i := range idx {
				out[i] = x[k]
			}
			for i := range its {
				if held[i] {
					out[i] = floor(its[i])
				}
			}
			return out
		}
	}
}

func sumOf(its []sItem, v func(sItem) int64) int64 {
	var s int64
	for _, it := range its {
		s = addSat(s, v(it))
	}
	return s
}

func fOf(it sItem) int64 { return it.f }
func bOf(it sItem) int64 { return it.b }
func cOf(it sItem) int64 { return it.c }

// group is D.1.3's group(Q, G, w): one water-fill, or with bands the
// priorities highest first, each band taking what the later bands are not
// guaranteed.
func group(q int64, g []sItem, bands bool) []int64 {
	same := true
	for _, it := range g {
		same = same && it.prio == g[0].prio
	}
	if !bands || same {
		return apportionFloors(q, g, fOf, cOf)
	}
	order := make([]int, len(g))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return g[order[i]].prio > g[order[j]].prio })
	out := make([]int64, len(g))
	r := q
	for i := 0; i < len(order); {
		j := i
		for j < len(order) && g[order[j]].prio == g[order[i]].prio {
			j++
		}
		var band, later []sItem
		for _, k := range order[i:j] {
			band = append(band, g[k])
		}
		for _, k := range order[j:] {
			later = append(later, g[k])
		}
		lb, lf := sumOf(later, bOf), sumOf(later, fOf)
		sb := sumOf(band, bOf)
		qb := min(sumOf(band, cOf), max(r-lb, min(sb, r-lf)))
		var x []int64
		if qb <= sb {
			x = apportionFloors(qb, band, fOf, bOf) // guarantees
		} else {
			x = apportionFloors(qb, band, bOf, cOf) // surplus
		}
		for k, idx := range order[i:j] {
			out[idx] = x[k]
		}
		r -= qb
		i = j
	}
	return out
}

// splitQ is D.1.3's split(Q, K): the positive shares first, then the zero
// shares, evenly, with what is left. It returns the slots of each item.
func splitQ(q int64, k []sItem, bands bool) []int64 {
	var s, z []sItem
	var si, zi []int
	for i, it := range k {
		if it.zeroShare {
			it.w = 1
			z, zi = append(z, it), append(zi, i)
		} else {
			s, si = append(s, it), append(si, i)
		}
	}
	qs := min(sumOf(s, cOf), q-sumOf(z, fOf))
	out := make([]int64, len(k))
	for n, x := range group(qs, s, bands) {
		out[si[n]] = x
	}
	for n, x := range group(q-qs, z, bands) {
		out[zi[n]] = x
	}
	return out
}

// split4 splits q over the children paths with floor, base and cap
// functions (nil: 0, 0, infinite) and stores the results in dst.
func (m *Model) split4(dst map[string]int64, q int64, paths []string, f, b, c func(string) int64, bands bool) {
	var k []sItem
	for _, p := range paths {
		n := m.nodes[p]
		it := sItem{path: p, w: n.share, prio: n.priority, c: inf, zeroShare: n.share == 0}
		if f != nil {
			it.f = f(p)
		}
		if b != nil {
			it.b = b(p)
		}
		if c != nil {
			it.c = c(p)
		}
		k = append(k, it)
	}
	for i, x := range splitQ(q, k, bands) {
		dst[paths[i]] = x
	}
}

// floors4 is D.1.3's floor F of every node, from the allocations now
// (the rebalance's start, after the event's releases and trims), in a pool
// with pins; nil otherwise (every floor 0).
func (m *Model) floors4(p map[string]int64) map[string]int64 {
	if !m.pol.pins {
		return nil
	}
	f := map[string]int64{}
	order := m.preorder()
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		if n == root {
			continue
		}
		if m.isLeaf(n) {
			a := m.held(n)
			if m.nodes[n].preemptable {
				a = min(a, p[n])
			}
			f[n] = a
			continue
		}
		var s int64
		for _, ch := range m.nodes[n].children {
			s += f[ch]
		}
		if m.pol.enforcement == events.EnforcementParent {
			s = max(min(m.allocOf(n), p[n]), s)
		}
		f[n] = s
	}
	return f
}

// targets4 is section 3's target under rules 4 (D.1.3's table) for the
// effective demands e (E for T, E0 for T0), with the planned shares p and
// the floors fl (nil: none). A parent's target is the sum of its leaves'.
func (m *Model) targets4(c int64, e, p, fl map[string]int64) map[string]int64 {
	order := m.preorder()
	bands := m.pol.priorityBands
	withE := func(n string) []string { return m.childrenWith(e, n) }
	fOf := func(n string) int64 { return fl[n] }
	t := map[string]int64{}
	if m.pol.enforcement == events.EnforcementParent {
		t[root] = c
		base := func(n string) int64 { return max(fl[n], min(e[n], p[n])) }
		capE := func(n string) int64 { return e[n] }
		for _, n := range order {
			m.split4(t, t[n], withE(n), fOf, base, capE, bands)
		}
	} else {
		pdyn := map[string]int64{root: c}
		for _, n := range order {
			m.split4(pdyn, pdyn[n], withE(n), nil, nil, nil, false)
		}
		b := map[string]int64{}
		var resplit func(n string, q int64)
		resplit = func(n string, q int64) {
			kids := withE(n)
			res := map[string]int64{}
			bOf := func(k string) int64 { return b[k] }
			m.split4(res, q, kids, fOf, bOf, bOf, bands)
			for _, ch := range kids {
				if res[ch] < b[ch] && !m.isLeaf(ch) {
					resplit(ch, res[ch])
				}
				b[ch] = res[ch]
			}
		}
		for i := len(order) - 1; i >= 0; i-- { // bottom-up
			n := order[i]
			if m.isLeaf(n) {
				b[n] = max(fl[n], min(e[n], pdyn[n]))
				continue
			}
			var s int64
			for _, ch := range withE(n) {
				s += b[ch]
			}
			limit := e[n]
			if n == root {
				limit = min(c, e[n]) // only floors can make the root re-split
			}
			if s > limit {
				resplit(n, limit)
				s = limit
			}
			b[n] = s
		}
		u := map[string]int64{root: min(c, e[root]) - b[root]}
		for _, n := range order {
			var kids []string
			for _, ch := range m.nodes[n].children {
				if e[ch]-b[ch] > 0 {
					kids = append(kids, ch)
				}
			}
			m.split4(u, u[n], kids, nil, nil, func(k string) int64 { return e[k] - b[k] }, bands)
		}
		for _, l := range m.leaves() {
			t[l] = b[l] + u[l]
		}
	}
	out := map[string]int64{}
	for _, n := range order {
		for _, l := range m.leaves() {
			if under(l, n) {
				out[n] += t[l]
			}
		}
	}
	return out
}

// ratio is a comparable fraction num/den (den > 0) in a class: lower
// classes come first.
type ratio struct{ class, num, den int64 }

// before reports whether a sorts before b, larger ratios first.
func (a ratio) before(b ratio) (less, tie bool) {
	if a.class != b.class {
		return a.class < b.class, false
	}
	x, y := a.num*b.den, b.num*a.den
	return x > y, x == y
}

// claimRatio is a share_ratio claimant's key (T - a)/share; under rules 4
// a zero-share claimant comes after every positive-share claimant, the
// largest deficit first (D.1.4).
func claimRatio(deficit, share int64) ratio {
	if share == 0 {
		return ratio{1, deficit, 1}
	}
	return ratio{0, deficit, share}
}

// walkRatio is the victim walk's key (A - T)/share of a sibling; a
// zero-share sibling above its target is the most over-allocated, at its
// target it counts as 0, below it comes after every positive share (D.1.4).
func walkRatio(over, share int64) ratio {
	switch {
	case share > 0:
		return ratio{1, over, share}
	case over > 0:
		return ratio{0, over, 1}
	case over == 0:
		return ratio{1, 0, 1}
	default:
		return ratio{2, over, 1}
	}
}
