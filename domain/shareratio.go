package domain

import "cmp"

import "slices"

// reclaim: share_ratio (allocation-rules.md section 4): every leaf ends at
// its target T. The pairing below only decides who gives to whom, for the
// decision log (decisions.md #14).
func (p *Pool) rebalanceShareRatio() {
	var claimants, victims []int32
	p.q.offTarget.Ascend(func(k qkey) bool {
		n := &p.t.nodes[k.id]
		if n.alloc < n.target {
			claimants = append(claimants, k.id)
		} else {
			victims = append(victims, k.id)
		}
		return true
	})
	if len(claimants) == 0 {
		return
	}
	slices.SortFunc(claimants, p.claimantOrder)
	p.sortVictimWalk(victims)
	first := 0
	for _, c := range claimants {
		n := &p.t.nodes[c]
		need := n.target - n.alloc
		if free := p.freeSlots(); free > 0 {
			if give := minSlots(minSlots(need, free), p.headroom(c, noNode)); give > 0 {
				need -= p.grantTo(c, give, RuleShareRatioGrant)
			}
		}
		if !p.policy.Preemption {
			continue
		}
		for i := first; i < len(victims) && need > 0; i++ {
			v := &p.t.nodes[victims[i]]
			excess := v.alloc - v.target
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

// claimantOrder: largest deficit per unit of share (T - a)/share first,
// then higher priority, then path.
func (p *Pool) claimantOrder(a, b int32) int {
	x, y := &p.t.nodes[a], &p.t.nodes[b]
	if l, r := int64(x.target-x.alloc)*y.share, int64(y.target-y.alloc)*x.share; l != r {
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
	if l, r := int64(x.alloc-x.target)*y.share, int64(y.alloc-y.target)*x.share; l != r {
		return cmpDesc(l, r)
	}
	if x.priority != y.priority {
		return cmp.Compare(x.priority, y.priority)
	}
	return cmp.Compare(a, b)
}
