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
	t, sh := p.t, p.pub.sh
	saved := make([]struct{ eff, base, target Slots }, len(t.nodes))
	for i := range t.nodes {
		saved[i].eff, saved[i].base, saved[i].target = t.nodes[i].eff, sh[i].base, sh[i].target
	}
	for id := len(t.nodes) - 1; id >= 0; id-- { // children before parents
		n := &t.nodes[id]
		if n.leaf {
			n.eff = minSlots(n.eff, maxSlots(sh[id].planned, n.alloc))
			continue
		}
		var sum Slots
		for _, c := range n.children {
			sum += t.nodes[c].eff
		}
		n.eff = minSlots(n.maxCap, sum)
	}
	p.shareRatioTargets()
	for i := range t.nodes { // only the targets stay T0 while pairing
		t.nodes[i].eff, sh[i].base = saved[i].eff, saved[i].base
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
		sh[i].target = saved[i].target
	}
	for _, id := range t.leaves {
		p.refile(id)
	}
}

// claimantOrder: largest deficit per unit of share (T - a)/share first,
// then higher priority, then path.
func (p *Pool) claimantOrder(a, b int32) int {
	x, y := &p.t.nodes[a], &p.t.nodes[b]
	if l, r := int64(p.sh(a).target-x.alloc)*y.share, int64(p.sh(b).target-y.alloc)*x.share; l != r {
		return cmpDesc(l, r)
	}
	if x.priority != y.priority {
		return cmpDesc(x.priority, y.priority)
	}
	return cmp.Compare(a, b)
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

func (p *Pool) walkOrder(a, b int32) int {
	x, y := &p.t.nodes[a], &p.t.nodes[b]
	if l, r := int64(x.alloc-p.sh(a).target)*y.share, int64(y.alloc-p.sh(b).target)*x.share; l != r {
		return cmpDesc(l, r)
	}
	if x.priority != y.priority {
		return cmp.Compare(x.priority, y.priority)
	}
	return cmp.Compare(a, b)
}
