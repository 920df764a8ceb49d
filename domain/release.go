package domain

import (
	"cmp"
	"slices"
)

// releaseExcess is step 1 of the fold: leaves above E give back a - E;
// then parents above their max, deepest first, give back the excess from
// their leaves (lowest priority, largest allocation, then path).
func (p *Pool) releaseExcess() {
	ids := p.loweredE
	if p.allTouch {
		ids = append(ids[:0], p.t.leaves...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for _, id := range ids {
		n := &p.t.nodes[id]
		if n.alloc <= n.eff {
			continue
		}
		rule := RuleMaxLowered
		if n.eff == n.demand {
			rule = RuleDemandDropped
		}
		p.releaseFrom(id, n.alloc-n.eff, rule)
	}
	p.loweredE = ids[:0]
	if p.allTouch {
		p.releaseParentsAboveMax()
	}
}

func (p *Pool) releaseParentsAboveMax() {
	t := p.t
	var parents []int32
	for id := 1; id < len(t.nodes); id++ {
		if n := &t.nodes[id]; !n.leaf && n.alloc > n.maxCap {
			parents = append(parents, int32(id))
		}
	}
	slices.SortStableFunc(parents, func(a, b int32) int { return cmpDesc(t.nodes[a].depth, t.nodes[b].depth) })
	for _, id := range parents {
		n := &t.nodes[id]
		leaves := slices.Clone(t.leaves[n.lo:n.hi])
		slices.SortFunc(leaves, func(a, b int32) int {
			x, y := &t.nodes[a], &t.nodes[b]
			if x.priority != y.priority {
				return cmp.Compare(x.priority, y.priority)
			}
			if x.alloc != y.alloc {
				return cmpDesc(x.alloc, y.alloc)
			}
			return cmp.Compare(a, b)
		})
		for _, l := range leaves {
			excess := n.alloc - n.maxCap
			if excess <= 0 {
				break
			}
			if k := minSlots(excess, t.nodes[l].alloc); k > 0 {
				p.releaseFrom(l, k, RuleParentMax)
			}
		}
	}
}
