package domain

// host is one machine of the pool. Hosts keep the id they were registered
// with (the order of their first host_up); name order is used for ties.
type host struct {
	name  string
	group string
	slots Slots
	up    bool
	used  Slots
}

func (h *host) free() Slots {
	if !h.up {
		return 0
	}
	return h.slots - h.used
}

// moreFree ranks hosts for a grant: most free slots, then name.
func moreFree(a, b *host) bool {
	if fa, fb := a.free(), b.free(); fa != fb {
		return fa > fb
	}
	return a.name < b.name
}

// mostFreeHost returns the up host with the most free slots (then name),
// or -1 when no host has a free slot.
func (p *Pool) mostFreeHost() int32 {
	best := int32(-1)
	for i := range p.hosts {
		h := &p.hosts[i]
		if h.free() <= 0 {
			continue
		}
		if best < 0 || moreFree(h, &p.hosts[best]) {
			best = int32(i)
		}
	}
	return best
}

// freeSlots is the capacity not allocated to anyone.
func (p *Pool) freeSlots() Slots { return p.pub.capacity - p.t.nodes[0].alloc }
