package domain

// reclaim: priority (docs/rules.md#priority): free slots to entitled
// leaves, then first-come first-served to borrowers; then, with
// preemption, entitled leaves still short reclaim from borrowers.
func (p *Pool) rebalancePriority() {
	p.grantFree(p.pub.q.entitled, p.entitledNeed, RulePriorityEntitled)
	p.grantFree(p.pub.q.borrowing, p.borrowNeed, RulePriorityBorrow)
	if p.mode.preempt {
		p.reclaimForEntitled()
	}
}

func (p *Pool) entitledNeed(id int32) Slots {
	n := &p.t.nodes[id]
	return minSlots(n.eff, p.sh(id).target) - n.alloc
}
func (p *Pool) borrowNeed(id int32) Slots { return p.borrowCap(id) - p.t.nodes[id].alloc }

// grantFree walks a queue in order and grants free slots to each leaf up
// to its need and its ancestors' headroom, until no slot is free.
func (p *Pool) grantFree(q *queue, need func(int32) Slots, rule Rule) {
	var from *qkey
	for p.freeSlots() > 0 {
		keys := collect(q, from, 64, p.keys)
		p.keys = keys
		if len(keys) == 0 {
			return
		}
		for _, k := range keys {
			free := p.freeSlots()
			if free == 0 {
				return
			}
			give := minSlots(minSlots(need(k.id), free), p.headroom(k.id, noNode))
			if give > 0 {
				p.grantTo(k.id, give, rule)
			}
		}
		last := keys[len(keys)-1]
		from = &last
	}
}

// reclaimForEntitled lets each entitled leaf that is still short, in
// entitled order, take back slots from borrowers.
func (p *Pool) reclaimForEntitled() {
	if p.pub.q.victimsOver.Len()+p.pub.q.victimsUnder.Len() == 0 {
		return
	}
	var from *qkey
	var claimants []qkey
	for {
		claimants = collect(p.pub.q.entitled, from, 64, claimants)
		if len(claimants) == 0 {
			return
		}
		for _, k := range claimants {
			if need := p.entitledNeed(k.id); need > 0 {
				p.reclaimFor(k.id, need)
			}
		}
		last := claimants[len(claimants)-1]
		from = &last
	}
}

// reclaimFor takes up to need slots for claimant from borrowers. The next
// victim is always the first, in the victim order evaluated on the current
// state, that can still give (decisions.md #12): branches over their
// planned share first, then lowest priority, most borrowed, path.
func (p *Pool) reclaimFor(claimant int32, need Slots) {
	var blocked []int32
	for need > 0 {
		v, give := p.nextVictim(claimant, need, blocked)
		if v == noNode {
			return
		}
		if give == 0 {
			blocked = append(blocked, v)
			continue
		}
		p.transfer(claimant, v, give, RulePriorityReclaim)
		need -= give
	}
}

func (p *Pool) nextVictim(claimant int32, need Slots, blocked []int32) (int32, Slots) {
	for _, q := range []*queue{p.pub.q.victimsOver, p.pub.q.victimsUnder} {
		found, give := noNode, Slots(0)
		q.Ascend(func(k qkey) bool {
			for _, b := range blocked {
				if b == k.id {
					return true
				}
			}
			found, give = k.id, p.canGive(claimant, k.id, need)
			return false
		})
		if found != noNode {
			return found, give
		}
	}
	return noNode, 0
}

// canGive is how much victim may give claimant now: down to its G, no more
// than the claimant needs or its ancestors' headroom allows, and, with
// parent enforcement, not below what the victim's own top-level branch
// deserves when it is another branch: A(X) >= min(P(X), E(X)).
func (p *Pool) canGive(claimant, victim int32, need Slots) Slots {
	v := &p.t.nodes[victim]
	give := minSlots(need, v.alloc-p.sh(victim).target)
	if p.mode.parent {
		if x := v.top; x != p.t.nodes[claimant].top {
			xn := &p.t.nodes[x]
			give = minSlots(give, xn.alloc-minSlots(p.planned(x), xn.eff))
		}
	}
	give = minSlots(give, p.headroom(claimant, victim))
	return maxSlots(give, 0)
}
