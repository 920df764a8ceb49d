package refmodel

// The seating of rules 4 (rules-v4.md, ruling 8's "Seating" subsection
// and ruling 12): which part of a host each slot a leaf holds is in. It is
// not stored: the fold derives it from the counts per (leaf, host) at the
// start of every rebalance, then keeps it up to date as it moves slots
// (v4.go). Under reclaim: priority the tiers of the pools are seated by
// the fold itself, pool by pool, in the three rounds of ruling 12
// (v4priority.go); this file seats with the keeper order.

import (
	"sort"
	"strings"

	"github.com/cluster-ledger/ledger/events"
)

// seats is leaf -> (host, part) -> slots; a part is named by its owner
// (a leaf owner, a parent's private part, root for the public part).
type seats map[string]map[hp]int64

func (s seats) add(l string, k hp, n int64) {
	if n == 0 {
		return
	}
	if s[l] == nil {
		s[l] = map[hp]int64{}
	}
	s[l][k] += n
	if s[l][k] == 0 {
		delete(s[l], k)
	}
}

// used is how many slots are seated on part k.
func (s seats) used(k hp) int64 {
	var n int64
	for _, ks := range s {
		n += ks[k]
	}
	return n
}

// onHost is how many slots leaf l has seated on host h.
func (s seats) onHost(l, h string) int64 {
	var n int64
	for k, v := range s[l] {
		if k.host == h {
			n += v
		}
	}
	return n
}

// dca is the deepest common ancestor of two consumers (root included).
func dca(a, b string) string {
	for q := a; ; q = parentOf(q) {
		if under(b, q) {
			return q
		}
	}
}

// depthOf is the depth of a path (root 0).
func depthOf(p string) int {
	if p == root {
		return 0
	}
	return strings.Count(p, "/")
}

// mayHold is ruling 8's "may hold": its own part, an ancestor's private
// part, the public part, and the part of an owner o when every consumer
// from o up to (not including) their deepest common ancestor lends, with
// a lend_grace at least the leaf's reclaim_grace.
func (m *Model) mayHold(l, part string) bool {
	return m.tierOf(l, part) >= 0
}

// partOrderLess is ruling 8's part order: leaf owners' parts, then
// parents' private parts deepest first, then the public part; ties by
// owner path.
func (m *Model) partOrderLess(a, b string) bool {
	rank := func(p string) (int, int) {
		switch {
		case p == root:
			return 2, 0
		case m.isLeaf(p):
			return 0, 0
		default:
			return 1, -depthOf(p)
		}
	}
	ra, da := rank(a)
	rb, db := rank(b)
	if ra != rb {
		return ra < rb
	}
	if da != db {
		return da < db
	}
	return a < b
}

// seatKeeper derives the seating of every up host with the keeper order
// (priority desc, fewest slots on the host, path desc) in ruling 8's five
// passes, then moves leaves off parts they may not hold along augmenting
// paths where one exists.
func (m *Model) seatKeeper() seats {
	s := seats{}
	for _, h := range m.hostNames() {
		if !m.hosts[h].up {
			continue
		}
		m.seatHost(s, h, nil)
	}
	return s
}

// seatHost seats host h's holdings (what is not seated yet) in passes;
// pool, when not nil, seats a pool's tier instead of the keeper order
// (priority, v4priority.go: it is then called for passes 4 and 5 only).
// Pass 2 is #218's under share_ratio, and under priority with preemption
// ruling 8's as written when the whole host is seated (skip nil: the
// keepers' seating, #383; decision 511).
func (m *Model) seatHost(s seats, h string, skip map[int]bool) {
	mode := pass2Priority
	switch {
	case m.pol.reclaim != events.ReclaimPriority:
		mode = pass2Restrictive
	case m.pol.preemption && skip == nil:
		mode = pass2AsWritten
	}
	m.seatHostAs(s, h, skip, mode)
}

// How the keepers' seating takes ruling 8's pass 2 (the private pools).
const (
	// pass2Priority: under priority, where the rounds of #216 seat the
	// pools (v4priority.go): an ancestor's private part, and a part lent
	// into a private pool in a restrictive class, in part order.
	pass2Priority = iota
	// pass2Restrictive: decision #218 as #332 writes it (seatPools), a
	// part lent in a restrictive class before the pool's own part.
	pass2Restrictive
	// pass2AsWritten: ruling 8's text (seatPoolsAsWritten), in pool X
	// X's private part, then every part lent into X's pool.
	pass2AsWritten
)

// seatReleases is the keepers' seating a release reads outside a
// rebalance (docs/rules.md section 16: the seating says "which tier a
// release takes from"). Decision #383 says which seating that is under
// version 4: ruling 8's order as written under priority with preemption,
// and #218's restrictive classes first ("restrictiveFirst only under
// share_ratio or without preemption") under share_ratio and under
// priority without preemption (decision 512).
func (m *Model) seatReleases() seats {
	mode := pass2AsWritten
	if m.pol.reclaim != events.ReclaimPriority || !m.pol.preemption {
		mode = pass2Restrictive
	}
	s := seats{}
	for _, h := range m.hostNames() {
		if m.hosts[h].up {
			m.seatHostAs(s, h, nil, mode)
		}
	}
	return s
}

// seatHostAs is seatHost with pass 2 taken as mode says.
func (m *Model) seatHostAs(s seats, h string, skip map[int]bool, mode int) {
	size := m.parts(h)
	var parts []string
	for p, v := range size {
		if v > 0 {
			parts = append(parts, p)
		}
	}
	sort.Slice(parts, func(i, j int) bool { return m.partOrderLess(parts[i], parts[j]) })
	byPath := append([]string(nil), parts...)
	sort.Slice(byPath, func(i, j int) bool {
		if (byPath[i] == root) != (byPath[j] == root) {
			return byPath[j] == root
		}
		return byPath[i] < byPath[j]
	})
	left := map[string]int64{}
	var holders []string
	for _, l := range m.leaves() {
		if v := m.alloc[l][h] - s.onHost(l, h); v > 0 {
			left[l] = v
			holders = append(holders, l)
		}
	}
	sort.SliceStable(holders, func(i, j int) bool {
		a, b := holders[i], holders[j]
		if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
			return pa > pb
		}
		if m.alloc[a][h] != m.alloc[b][h] {
			return m.alloc[a][h] < m.alloc[b][h]
		}
		return a > b
	})
	seat := func(l, p string) {
		k := hp{h, p}
		n := min(left[l], size[p]-s.used(k))
		if n > 0 {
			s.add(l, k, n)
			left[l] -= n
		}
	}
	inPass := func(pass int, l, p string) bool {
		switch pass {
		case 1:
			return p == l
		case 2: // under priority (share_ratio: seatPools): what the own layer reads before the rounds seat the pools (#216)
			if p == root || p == l {
				return false
			}
			if !m.isLeaf(p) && under(l, p) {
				return true
			}
			return !under(l, p) && dca(l, p) != root && m.mayHold(l, p) && m.restrictiveIn(p, dca(l, p))
		case 3:
			return p == root
		case 4:
			return p != root && p != l && !under(l, p) && m.mayHold(l, p)
		default:
			return true
		}
	}
	for pass := 1; pass <= 5; pass++ {
		if skip[pass] {
			continue
		}
		if pass == 2 && mode == pass2Restrictive {
			m.seatPools(parts, holders, seat)
			continue
		}
		if pass == 2 && mode == pass2AsWritten {
			m.seatPoolsAsWritten(parts, holders, seat)
			continue
		}
		order := parts
		if pass >= 4 {
			order = byPath
		}
		for _, p := range order {
			for _, l := range holders {
				if left[l] > 0 && inPass(pass, l, p) {
					seat(l, p)
				}
			}
		}
	}
	m.repairHost(s, h)
}

// seatPools is ruling 8's pass 2 as decision #218 orders it under
// share_ratio (the project's seating under ruling 12's licence; decision
// #332): the private pools a leaf is in, deepest first, and in pool X first
// the parts lent into X in a class some leaf of X may not use
// (restrictiveIn), then X's private part; after every private pool, the
// parts lent across the root in a restrictive class (before the public
// part, pass 3). A lent part every leaf of its pool may use is seated in
// pass 4, after the public part (#218, settled-218-*.yaml). Pools of one
// depth share their two tiers; in a tier the parts go in part order, each
// part's holders in keeper order.
func (m *Model) seatPools(parts, holders []string, seat func(l, p string)) {
	m.seatByPool(parts, holders, seat, func(l, p string) (string, int, bool) {
		switch {
		case !m.isLeaf(p) && under(l, p):
			return p, 1, true // X's private part
		case under(l, p) || !m.mayHold(l, p):
			return "", 0, false
		case !m.restrictiveIn(p, dca(l, p)):
			return "", 0, false // a lent part every leaf of the pool may use: pass 4
		default:
			return dca(l, p), 0, true
		}
	})
}

// seatByPool seats the pairs of a holder and a part in pools: pool says in
// which private pool X (and which of its two tiers, sub) the leaf is seated
// on the part, or that it is not seated there in this pass. Pools go
// deepest first, the root's last; in a tier the parts go in part order,
// each part's holders in keeper order.
func (m *Model) seatByPool(parts, holders []string, seat func(l, p string), pool func(l, p string) (x string, sub int, ok bool)) {
	type pair struct{ l, p string }
	maxDepth := 0
	for _, k := range m.leaves() {
		maxDepth = max(maxDepth, depthOf(k))
	}
	tiers := make([][]pair, 2*(maxDepth+1)+1)
	for _, p := range parts {
		for _, l := range holders {
			if p == root || p == l {
				continue
			}
			x, sub, ok := pool(l, p)
			if !ok {
				continue
			}
			t := 2*(maxDepth-depthOf(x)) + sub
			if x == root {
				t = len(tiers) - 1
			}
			tiers[t] = append(tiers[t], pair{l, p})
		}
	}
	for _, tier := range tiers {
		for _, pr := range tier {
			seat(pr.l, pr.p)
		}
	}
}

// seatPoolsAsWritten is ruling 8's pass 2 as written, the keepers'
// seating under priority with preemption (decision #383: "under priority
// with preemption the keepers' seating takes ruling 8's order"; decision
// 511): "the private pools the leaf belongs to, deepest first. In pool X,
// first X's private part (for the leaves under X), then the parts lent
// into X's pool: the parts of owners whose deepest common ancestor with
// the leaf is X, where the leaf may hold them", whatever their class (a
// part lent across the root is pass 4's). Pools of one depth share their
// two tiers; in a tier the parts go in part order, each part's holders in
// keeper order.
func (m *Model) seatPoolsAsWritten(parts, holders []string, seat func(l, p string)) {
	m.seatByPool(parts, holders, seat, func(l, p string) (string, int, bool) {
		switch {
		case !m.isLeaf(p) && under(l, p):
			return p, 0, true // X's private part
		case under(l, p) || !m.mayHold(l, p) || dca(l, p) == root:
			return "", 0, false
		default:
			return dca(l, p), 1, true
		}
	})
}

// repairHost moves each leaf (in path order) off parts of host h it may
// not hold, one slot at a time, along an augmenting path: a chain of
// leaves each moving to a part it may hold, the last onto a part with
// room.
func (m *Model) repairHost(s seats, h string) {
	size := m.parts(h)
	var parts []string
	for p := range size {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return m.partOrderLess(parts[i], parts[j]) })
	for _, l := range m.leaves() {
		for {
			var bad string
			for _, p := range parts {
				if s[l][hp{h, p}] > 0 && !m.mayHold(l, p) {
					bad = p
					break
				}
			}
			if bad == "" || !m.augment(s, h, l, bad, parts, size) {
				break
			}
		}
	}
}

// augment moves one slot of leaf l off part from on host h along a
// shortest augmenting path; false when there is none.
func (m *Model) augment(s seats, h, l, from string, parts []string, size map[string]int64) bool {
	type step struct {
		leaf, from, to string
		prev           int
	}
	var queue []step
	seen := map[string]bool{}
	for _, p := range parts {
		if p != from && m.mayHold(l, p) {
			queue = append(queue, step{l, from, p, -1})
			seen[p] = true
		}
	}
	for i := 0; i < len(queue); i++ {
		st := queue[i]
		// a part with room, or the part l leaves (a swap)
		if size[st.to]-s.used(hp{h, st.to}) > 0 || (st.to == from && i > 0 && st.prev >= 0) {
			for j := i; j >= 0; j = queue[j].prev {
				s.add(queue[j].leaf, hp{h, queue[j].from}, -1)
				s.add(queue[j].leaf, hp{h, queue[j].to}, 1)
			}
			return true
		}
		for _, k := range m.leaves() {
			if s[k][hp{h, st.to}] == 0 || !m.mayHold(k, st.to) {
				continue
			}
			for _, p := range parts {
				if !seen[p] && m.mayHold(k, p) {
					queue = append(queue, step{k, st.to, p, i})
					seen[p] = true
				}
			}
		}
	}
	return false
}

// restrictiveIn reports whether owner o's part, lent into pool x, is in a
// class some leaf of x's subtree may not use: its lending chain's grace
// below the widest reclaim_grace of those leaves (decision #218).
func (m *Model) restrictiveIn(o, x string) bool {
	g := m.lendClass(o, x)
	for _, k := range m.leaves() {
		if under(k, x) && k != x && m.nodes[k].reclaimGrace > g {
			return true
		}
	}
	return false
}
