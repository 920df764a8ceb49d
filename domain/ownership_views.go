package domain

// The ownership figures of the consumer views (views.go): what each
// consumer owns, uses of it and lends out, and where a leaf's slots come
// from, all read off the sittings (seating.go).

import (
	"cmp"
	"slices"
)

// ownFigures is the ownership part of the consumer views, by node id.
type ownFigures struct {
	owned, used, lent []Slots
	sources           [][]Source
}

// ownFigures computes the views' ownership figures from where the slots
// sit; nil when the pool has no assignment.
func (p *Pool) ownFigures() *ownFigures {
	if !p.HasOwnership() {
		return nil
	}
	n := len(p.t.nodes)
	parts, tot := p.hostParts()
	of := &ownFigures{owned: tot.owned, used: make([]Slots, n), lent: make([]Slots, n), sources: make([][]Source, n)}
	for _, s := range p.sittings(parts) {
		o := parts[s.part].owner
		of.sources[s.leaf] = addSource(of.sources[s.leaf], p.sourceOf(parts, s))
		// The owner of the part and its ancestors that own the slots too
		// see them used inside their subtree or lent out.
		for a := o; a > 0; a = p.t.nodes[a].parent {
			if tot.owned[a] == 0 {
				break
			}
			if p.t.contains(a, s.leaf) {
				of.used[a] += s.slots
			} else {
				of.lent[a] += s.slots
			}
		}
	}
	return of
}

// ownView is one consumer's ownership figures.
type ownView struct {
	owned, used, lent Slots
	sources           []Source
}

// of is consumer id's figures (nil figures: nil).
func (of *ownFigures) of(id int32) *ownView {
	if of == nil {
		return nil
	}
	return &ownView{owned: of.owned[id], used: of.used[id], lent: of.lent[id], sources: of.sources[id]}
}

// ownFiguresOf is ownFigures for consumer id alone: its sources from the
// sittings of the hosts it holds slots on, what it owns used or lent out
// from the sittings of the hosts it owns slots on (its descendants own
// only slots it owns). nil when the pool has no assignment.
func (p *Pool) ownFiguresOf(id int32) *ownView {
	if !p.HasOwnership() {
		return nil
	}
	parts, tot := p.hostParts()
	p.sitsFor(parts)
	of := &ownView{owned: tot.owned[id]}
	for _, h := range p.t.nodes[id].holdings {
		for _, s := range p.sittingsOn(parts, h.host) {
			if s.leaf == id {
				of.sources = addSource(of.sources, p.sourceOf(parts, s))
			}
		}
	}
	if tot.owned[id] == 0 {
		return of
	}
	for _, i := range p.ownRowsOf(p.t.nodes[id].path) {
		h, ok := p.hostByID[p.own[i].host]
		if !ok || !p.hosts[h].up {
			continue
		}
		for _, s := range p.sittingsOn(parts, h) {
			if p.ownsThrough(tot, id, parts[s.part].owner) {
				if p.t.contains(id, s.leaf) {
					of.used += s.slots
				} else {
					of.lent += s.slots
				}
			}
		}
	}
	return of
}

// ownRowsOf lists the rows of the assignment that name consumer path.
func (p *Pool) ownRowsOf(path string) []int { return p.ownRows().byConsumer[path] }

// ownIndex is the rows of the assignment by consumer and by host, for the
// assignment as it was when built (of).
type ownIndex struct {
	of                 []ownSlot
	byConsumer, byHost map[string][]int
}

// ownRows is the index of the current assignment, rebuilt when it changed.
func (p *Pool) ownRows() *ownIndex {
	ix := &p.ownIdx
	if len(ix.of) != len(p.own) || (len(p.own) > 0 && &ix.of[0] != &p.own[0]) || ix.byConsumer == nil {
		ix.byConsumer, ix.byHost = make(map[string][]int, len(p.own)), map[string][]int{}
		for i, o := range p.own {
			ix.byConsumer[o.consumer] = append(ix.byConsumer[o.consumer], i)
			ix.byHost[o.host] = append(ix.byHost[o.host], i)
		}
		ix.of = p.own
	}
	return ix
}

// ownsThrough reports whether slots of owner's part count as a's: owner
// is a or below it, and every consumer from owner up to a owns slots.
func (p *Pool) ownsThrough(tot ownTotals, a, owner int32) bool {
	if owner == noNode || (owner != a && !p.t.contains(a, owner)) {
		return false
	}
	for o := owner; ; o = p.t.nodes[o].parent {
		if tot.owned[o] == 0 {
			return false
		}
		if o == a {
			return true
		}
	}
}

// sourceOf is the source row of one sitting: its own slots, the public
// pool's, a private pool's, or a pool's slots lent by another consumer.
func (p *Pool) sourceOf(parts []hostPart, s sitting) Source {
	o := parts[s.part].owner
	src := Source{Pool: "/", Slots: int64(s.slots)}
	switch {
	case o == s.leaf:
		src.Pool = SourceOwn
	case o == noNode:
	case p.t.contains(o, s.leaf):
		src.Pool = p.t.nodes[o].path
	default:
		src.Pool = p.t.nodes[p.t.commonAncestor(o, s.leaf)].path
		src.Lender = p.t.nodes[o].path
	}
	return src
}

// addSource adds a row to a leaf's sources, kept sorted by pool then
// lender, merging equal ones.
func addSource(rows []Source, s Source) []Source {
	i, found := slices.BinarySearchFunc(rows, s, func(a, b Source) int {
		return cmp.Or(cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Lender, b.Lender))
	})
	if found {
		rows[i].Slots += s.Slots
		return rows
	}
	return slices.Insert(rows, i, s)
}
