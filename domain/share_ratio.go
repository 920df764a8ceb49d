package domain

import (
	"cmp"
	"slices"
)

// reclaim: share_ratio (docs/rules.md#share-ratio): every leaf ends at
// its target T. The pairing below only decides who gives to whom, for the
// decision log (decisions.md #14). With balance: false, reclaim first
// restores planned shares only (restoreGuarantees); free slots then go to
// whoever is below T, without reclaim.
func (p *Pool) rebalanceShareRatio() {
	if p.mode.guaranteesOnly() {
		p.restoreGuarantees()
		p.pairOffTarget(false)
		return
	}
	p.pairOffTarget(p.mode.preempt)
}

// pairOffTarget serves the leaves below T from free slots and, with
// reclaim, from the leaves above T.
func (p *Pool) pairOffTarget(reclaim bool) {
	var claimants, victims []int32
	p.pub.q.offTarget.Ascend(func(k qkey) bool {
		if p.t.nodes[k.id].alloc < p.sh(k.id).target {
			claimants = append(claimants, k.id)
		} else {
			victims = append(victims, k.id)
		}
		return true
	})
	p.pair(claimants, victims, reclaim)
}

// pair serves each claimant in claimant order from free slots first, then
// (with reclaim) from victims in walk order, all judged against the
// targets now in the nodes.
func (p *Pool) pair(claimants, victims []int32, reclaim bool) {
	if len(claimants) == 0 {
		return
	}
	slices.SortFunc(claimants, p.claimantOrder)
	p.sortVictimWalk(victims)
	first := 0
	for _, c := range claimants {
		need := p.sh(c).target - p.t.nodes[c].alloc
		if free := p.freeSlots(); free > 0 {
			if give := minSlots(minSlots(need, free), p.headroom(c, noNode)); give > 0 {
				need -= p.grantTo(c, give, RuleShareRatioGrant)
			}
		}
		if !reclaim {
			continue
		}
		for i := first; i < len(victims) && need > 0; i++ {
			excess := p.t.nodes[victims[i]].alloc - p.sh(victims[i]).target
			if excess <= 0 {
				if i == first {
					first++
				}
				continue
			}
			if give := minSlots(minSlots(need, excess), p.headroom(c, victims[i])); give > 0 {
				p.transfer(c, victims[i], give, RuleShareRatioReclaim)
				need -= give
			}
		}
	}
}

// restoreGuarantees is balance: false's reclaim. Its targets T0 are
// docs/rules.md#shares' targets with every leaf's E replaced by min(E, max(P,
// a)), a being its allocation now: nobody is lifted above max(its planned
// share, what it holds). Leaves below T0 are served from free slots and then
// from leaves above T0, with share_ratio's orders on T0. The full targets T
// are put back afterwards. This is a full pass over the tree: balance: false
// is rare enough not to need the incremental machinery.
func (p *Pool) restoreGuarantees() {
	t, sh, d := p.t, p.pub.sh, &p.pub.div
	saved := make([]struct{ eff, base, target Slots }, len(t.nodes))
	for i := range t.nodes {
		saved[i].eff, saved[i].base, saved[i].target = t.nodes[i].eff, d.base[i], sh[i].target
	}
	for id := len(t.nodes) - 1; id >= 0; id-- { // children before parents
		n := &t.nodes[id]
		if n.leaf {
			n.eff = minSlots(n.eff, maxSlots(d.planned[id], n.alloc))
			continue
		}
		var sum Slots
		for _, c := range n.children {
			sum += t.nodes[c].eff
		}
		n.eff = minSlots(n.maxCap, sum)
	}
	p.markAllDirty() // T0 from scratch, the pairing's alone: nothing touched
	p.shareRatioTargets()
	p.movedTargets = p.movedTargets[:0]
	for i := range t.nodes { // only the targets stay T0 while pairing
		t.nodes[i].eff, d.base[i] = saved[i].eff, saved[i].base
	}
	var claimants, victims []int32
	for _, id := range t.leaves {
		switch a, tgt := t.nodes[id].alloc, sh[id].target; {
		case a < tgt:
			claimants = append(claimants, id)
		case a > tgt:
			victims = append(victims, id)
		}
	}
	slices.Sort(victims) // pair expects path order before its walk sort
	p.pair(claimants, victims, true)
	for i := range t.nodes {
		sh[i].target, d.part[i] = saved[i].target, saved[i].target
	}
	p.markAllDirty() // the memo holds T0's passes: the next event's are from scratch
	for _, id := range t.leaves {
		p.refile(id)
	}
}

// claimantOrder: largest deficit per unit of share (T - a)/share first,
// then higher priority, then path. A zero share (rules 4) comes after every
// positive share; among zero shares the largest deficit T - a first.
func (p *Pool) claimantOrder(a, b int32) int {
	x, y := &p.t.nodes[a], &p.t.nodes[b]
	if c := compareRatios(deficitRatio(p.sh(a).target-x.alloc, x.share), deficitRatio(p.sh(b).target-y.alloc, y.share)); c != 0 {
		return -c
	}
	if x.priority != y.priority {
		return cmpDesc(x.priority, y.priority)
	}
	return cmp.Compare(a, b)
}

// ratio is an amount per unit of share, ranked: a ratio of a higher rank
// is larger than any of a lower one. Positive shares have rank 1 and are
// compared by cross-multiplication (never a division); zero shares (rules
// 4) get the ranks of the zero-share orders (docs/rules.md#version-4).
type ratio struct {
	rank     int8
	num, den int64
}

// deficitRatio ranks a claimant's deficit T - a per unit of share: a zero
// share comes after every positive one, by its deficit.
func deficitRatio(deficit Slots, share int64) ratio {
	if share == 0 {
		return ratio{0, int64(deficit), 1}
	}
	return ratio{1, int64(deficit), share}
}

// excessRatio ranks a sibling's over-allocation A - T per unit of share in
// the victim walk: a zero share above its target is the most
// over-allocated (YARN ranks a zero guarantee as the most over capacity),
// at its target it counts as 0, below its target it comes after every
// positive share.
func excessRatio(excess Slots, share int64) ratio {
	switch {
	case share > 0:
		return ratio{1, int64(excess), share}
	case excess > 0:
		return ratio{2, int64(excess), 1}
	case excess == 0:
		return ratio{1, 0, 1}
	default:
		return ratio{0, int64(excess), 1}
	}
}

// compareRatios orders two ratios, smaller first.
func compareRatios(x, y ratio) int {
	if x.rank != y.rank {
		return cmp.Compare(x.rank, y.rank)
	}
	return cmp.Compare(x.num*y.den, y.num*x.den)
}

// sortVictimWalk orders over-allocated leaves as a top-down, depth-first
// walk meets them when siblings are visited by over-allocation per unit of
// share (A - T)/share, largest first, then lowest priority, then path.
func (p *Pool) sortVictimWalk(victims []int32) {
	slices.SortFunc(victims, func(a, b int32) int {
		x, y := p.siblingsBelowCommonAncestor(a, b)
		return p.walkOrder(x, y)
	})
}

// siblingsBelowCommonAncestor returns the ancestors-or-self of a and b that
// are children of their lowest common ancestor.
func (p *Pool) siblingsBelowCommonAncestor(a, b int32) (int32, int32) {
	t := p.t
	for t.nodes[a].depth > t.nodes[b].depth {
		a = t.nodes[a].parent
	}
	for t.nodes[b].depth > t.nodes[a].depth {
		b = t.nodes[b].parent
	}
	for t.nodes[a].parent != t.nodes[b].parent {
		a, b = t.nodes[a].parent, t.nodes[b].parent
	}
	return a, b
}

// walkOrder orders siblings in the victim walk: largest over-allocation per
// unit of share (A - T)/share first (zero shares: excessRatio), then lowest
// priority, then path.
func (p *Pool) walkOrder(a, b int32) int {
	x, y := &p.t.nodes[a], &p.t.nodes[b]
	if c := compareRatios(excessRatio(x.alloc-p.sh(a).target, x.share), excessRatio(y.alloc-p.sh(b).target, y.share)); c != 0 {
		return -c
	}
	if x.priority != y.priority {
		return cmp.Compare(x.priority, y.priority)
	}
	return cmp.Compare(a, b)
}
