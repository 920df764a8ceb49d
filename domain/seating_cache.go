package domain

import (
	"cmp"
	"slices"
)

// Which part of each host every leaf's slots sit in (sittings, seating.go)
// depends only on that host: its parts (the assignment), the leaves
// holding slots there and the tree. The fold reads it at every rebalance
// and the views after it, so it is kept per host and recomputed only for
// the hosts whose holdings changed since (addAlloc marks them), or all of
// them when the parts or the tree changed. This is derived state: it is
// never hashed nor stored, and it gives exactly what a full computation
// gives (TestSittingsCacheMatchesFull).
type sitCache struct {
	parts  []hostPart  // the parts the sittings were computed for
	byHost [][]sitting // by host
	fresh  []bool      // by host: byHost[h] is current
	stale  []int32     // hosts whose fresh was cleared since the last refreshSittings
	gen    uint64      // the pool's parts generation the cache was checked against (0: none)
	// known: every host's sittings were computed for the current parts
	// (each is fresh, or stale with the sittings it had before its
	// holdings changed), so a change can be measured from them (ownership_figures.go).
	known   bool
	prev    []sitting // scratch: a host's sittings before they are recomputed
	scratch seating   // scratch of sitHost
	// holders: by host, the leaves holding slots there, in path order (by
	// id); nil until built, dropped when the tree changes.
	holders [][]int32
}

// invalidate forgets every host's sittings (the parts or the tree changed).
func (c *sitCache) invalidate() {
	clear(c.fresh)
	c.parts, c.gen, c.known = nil, 0, false
}

// forgetTree drops what is keyed by node id (a plan replaced the tree).
func (c *sitCache) forgetTree() {
	c.invalidate()
	c.holders = nil
}

// held notes that leaf's holding on host changed (created, when before is
// 0; removed, when after is 0).
func (c *sitCache) held(leaf, host int32, before, after Slots) {
	if int(host) < len(c.fresh) {
		if c.fresh[host] {
			c.stale = append(c.stale, host)
		}
		c.fresh[host] = false
	}
	if int(host) >= len(c.holders) { // not built, or a host registered since
		c.holders = nil
		return
	}
	if (before != 0) == (after != 0) {
		return
	}
	hs := c.holders[host]
	i, found := slices.BinarySearch(hs, leaf)
	switch {
	case after != 0 && !found:
		c.holders[host] = slices.Insert(hs, i, leaf)
	case after == 0 && found:
		c.holders[host] = slices.Delete(hs, i, i+1)
	}
}

// hostHolders lists, by host, the leaves holding slots there, in path
// order.
func (p *Pool) hostHolders() [][]int32 {
	c := &p.sits
	if c.holders == nil || len(c.holders) != len(p.hosts) {
		c.holders = make([][]int32, len(p.hosts))
		for _, l := range p.t.sortedLeaves {
			for _, h := range p.t.nodes[l].holdings {
				c.holders[h.host] = append(c.holders[h.host], l)
			}
		}
	}
	return c.holders
}

// holdingOn is what leaf l holds on host h.
func (p *Pool) holdingOn(l, h int32) Slots { return p.t.holdingOn(l, h) }

func (t *tree) holdingOn(l, h int32) Slots {
	hs := t.nodes[l].holdings
	if i, ok := slices.BinarySearchFunc(hs, h, func(x holding, h int32) int { return cmp.Compare(x.host, h) }); ok {
		return hs[i].slots
	}
	return 0
}

// sittings says which part of each host every leaf's slots are in, for
// the parts of hostParts, host by host in the parts' order.
func (p *Pool) sittings(parts []hostPart) []sitting {
	p.sitsFor(parts)
	var out []sitting
	for i := 0; i < len(parts); {
		h := parts[i].host
		j := i
		for j < len(parts) && parts[j].host == h {
			j++
		}
		out = append(out, p.sitOn(parts, i, j)...)
		i = j
	}
	p.sits.known = true
	return out
}

// sittingsOn is sittings for host h alone (nil when it has no parts: it is
// down); the cache must be one for parts (sitsFor).
func (p *Pool) sittingsOn(parts []hostPart, h int32) []sitting {
	i := firstPartOf(parts, h)
	j := i
	for j < len(parts) && parts[j].host == h {
		j++
	}
	if i == j {
		return nil
	}
	return p.sitOn(parts, i, j)
}

// sitsFor makes the cache one for parts: emptied when they changed.
func (p *Pool) sitsFor(parts []hostPart) {
	c := &p.sits
	if c.gen != 0 && c.gen == p.partsGen && len(c.fresh) == len(p.hosts) && len(parts) == len(p.parts) && (len(parts) == 0 || &parts[0] == &p.parts[0]) {
		return // the pool's current parts, already checked
	}
	c.gen = 0
	if len(parts) == len(p.parts) && (len(parts) == 0 || &parts[0] == &p.parts[0]) {
		defer func() { c.gen = p.partsGen }()
	}
	if len(c.fresh) == len(p.hosts) && slices.Equal(c.parts, parts) {
		return
	}
	if c.parts == nil || len(c.fresh) > len(p.hosts) { // nothing to carry over
		c.fresh = make([]bool, len(p.hosts))
		c.byHost = make([][]sitting, len(p.hosts))
		c.stale = c.stale[:0]
		c.parts = slices.Clone(parts)
		c.known = false
		p.inc.heldStale = true // its held can no longer follow host by host (reparts)
		return
	}
	p.carrySittings(parts)
}

// carrySittings makes the cache one for new parts of the same tree (a
// host event changed the hosts or the assignment). A host's sittings
// depend on its own parts alone, so a host whose parts are as they were
// keeps them, their part indices moved with the parts before it; every
// other host, and a host registered since, is recomputed when next read
// (stale). The kept fold's held forgets the sittings it drops now, under
// the parts they were counted for, and takes the new ones as they are
// computed (sitOn).
func (p *Pool) carrySittings(parts []hostPart) {
	c := &p.sits
	old := c.parts
	follow := p.inc.ready && !p.inc.heldStale
	shift, changed := partsMoved(old, parts, len(c.fresh))
	for h := range len(c.fresh) {
		if !changed[h] {
			if d := shift[h]; d != 0 {
				for k := range c.byHost[h] {
					c.byHost[h][k].part += d
				}
			}
			continue
		}
		if follow {
			p.inc.noteResit(p.t, old, c.byHost[h], nil)
		}
		c.byHost[h] = c.byHost[h][:0]
		c.fresh[h] = false
		c.stale = append(c.stale, int32(h))
	}
	for h := len(c.fresh); h < len(p.hosts); h++ {
		c.fresh = append(c.fresh, false)
		c.byHost = append(c.byHost, nil)
		c.stale = append(c.stale, int32(h))
	}
	c.parts = slices.Clone(parts)
	c.known = false
}

// sitOn is the sittings of the host of parts[i:j], from the cache.
func (p *Pool) sitOn(parts []hostPart, i, j int) []sitting {
	c := &p.sits
	h := parts[i].host
	if !c.fresh[h] {
		holders := p.hostHolders()
		held := make([]holding, len(holders[h])) // (leaf as host field, slots), path order
		for k, l := range holders[h] {
			held[k] = holding{host: l, slots: p.holdingOn(l, h)}
		}
		c.prev = append(c.prev[:0], c.byHost[h]...) // the old sittings, for the kept fold
		before := c.prev
		c.byHost[h] = p.sitHost(c.byHost[h][:0], parts, i, j, held)
		c.fresh[h] = true
		if p.inc.ready && !p.inc.heldStale { // the kept fold's held follows the sittings
			p.inc.noteResit(p.t, parts, before, c.byHost[h])
		}
		if p.figs.on { // and so do the figures of the event's Result
			p.figs.noteResit(p, parts, before, c.byHost[h])
		}
	}
	return c.byHost[h]
}

// refreshSittings recomputes the sittings of the hosts whose holdings
// changed since they were last computed (the cache must be one for
// parts).
func (p *Pool) refreshSittings(parts []hostPart) {
	c := &p.sits
	for _, h := range c.stale {
		if !c.fresh[h] {
			p.sittingsOn(parts, h)
		}
	}
	c.stale = c.stale[:0]
}
