package domain

import "slices"

// Placement (docs/rules.md#placement, without ownership): which host
// a granted, reclaimed or released slot sits on (decisions.md #15).

// grantTo gives leaf id up to k free slots, from the host with most free
// slots (then name) onward, and returns how many it placed.
func (p *Pool) grantTo(id int32, k Slots, rule Rule) Slots {
	placed := Slots(0)
	for placed < k {
		h := p.mostFreeHost()
		if h < 0 {
			break
		}
		n := minSlots(k-placed, p.hosts[h].free())
		p.addAlloc(id, h, n)
		p.emit(KindGrant, id, noNode, h, n, rule)
		placed += n
	}
	return placed
}

// releaseFrom takes k slots back from leaf id, from the host where it
// holds most (then name) onward; with ownership, tier by tier
// (releaseHost).
func (p *Pool) releaseFrom(id int32, k Slots, rule Rule) {
	for k > 0 {
		h, there := p.releaseHost(id)
		n := minSlots(k, there)
		p.addAlloc(id, h, -n)
		p.emit(KindRelease, id, noNode, h, n, rule)
		k -= n
	}
}

// transfer moves k slots from victim to claimant, taking the victim's
// slots in the order the claimant would use hosts: most free, then name.
func (p *Pool) transfer(claimant, victim int32, k Slots, rule Rule) {
	hosts := p.hostOrder(victim)
	for _, h := range hosts {
		if k == 0 {
			break
		}
		n := minSlots(k, p.held(victim, h))
		p.addAlloc(victim, h, -n)
		p.addAlloc(claimant, h, n)
		p.emit(KindReclaim, claimant, victim, h, n, rule)
		k -= n
	}
}

// hostOrder lists the hosts a leaf holds slots on, most free first, then name.
func (p *Pool) hostOrder(id int32) []int32 {
	hs := make([]int32, 0, len(p.t.nodes[id].holdings))
	for _, h := range p.t.nodes[id].holdings {
		hs = append(hs, h.host)
	}
	slices.SortFunc(hs, func(a, b int32) int {
		if moreFree(&p.hosts[a], &p.hosts[b]) {
			return -1
		}
		return 1
	})
	return hs
}

func (p *Pool) mostHeldHost(id int32) int32 {
	best := holding{host: -1}
	for _, h := range p.t.nodes[id].holdings {
		if best.host < 0 || h.slots > best.slots || (h.slots == best.slots && p.hosts[h.host].name < p.hosts[best.host].name) {
			best = h
		}
	}
	return best.host
}

func (p *Pool) held(id, hostID int32) Slots {
	for _, h := range p.t.nodes[id].holdings {
		if h.host == hostID {
			return h.slots
		}
	}
	return 0
}

// trimDownHosts takes every slot off hosts that are down (rule
// trim.host_down), leaves in path order.
func (p *Pool) trimDownHosts() {
	for hid := range p.hosts {
		h := &p.hosts[hid]
		if h.up || h.used == 0 {
			continue
		}
		for _, id := range p.leavesByPath() {
			if n := p.held(id, int32(hid)); n > 0 {
				p.addAlloc(id, int32(hid), -n)
				p.emit(KindTrim, id, noNode, int32(hid), n, RuleHostDown)
			}
		}
	}
}

// leavesByPath lists leaf ids in path order (shared: do not modify).
func (p *Pool) leavesByPath() []int32 { return p.t.sortedLeaves }
