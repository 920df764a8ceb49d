package domain

import "slices"

// Ownership figures that move without an allocation changing. In a pool
// with ownership a consumer's own-used and lent-out slots and a leaf's
// sources follow from which part of each host every slot sits in (the
// sittings, seating.go). A decision on a host re-seats the slots of every
// leaf holding slots there, so the figures of consumers the event did not
// touch can move: another borrower's slots shift from the public part to
// a lent part, and its lender now lends more. The event's Result names
// them (Result.OwnershipMoved), so its readers learn every change from
// the Result instead of comparing views.
//
// The names are exact: a demand or release event changes neither the
// parts nor the assignment, so every figure is a sum over sittings, and
// the sittings of a host change only when it is seated again (sitOn).
// Each time it is, the difference between its old and new sittings is
// added to the figures it feeds; the differences of one event add up to
// the difference between the sittings before and after it, and a
// consumer is named when its net difference is not zero. Plan and host
// events change the parts (Result.All): every consumer is reported then.

// figureMoves is the net change of the ownership figures during one
// demand or release event, by node id.
type figureMoves struct {
	on         bool
	used, lent []Slots
	sources    [][]sourceMove // a leaf's sources, by source
	marked     []bool
	nodes      []int32 // the marked nodes, in the order met
}

// sourceMove is the net change of one of a leaf's sources: a Source
// named by node ids (see sourceKey).
type sourceMove struct {
	key   sourceKey
	slots Slots
}

// sourceKey names a Source by node ids: pool is the leaf itself for its
// own slots, the root (0) for the public pool, the parent whose pool it
// is otherwise; lender is the owner of slots lent into the pool (noNode
// for the pool's own slots).
type sourceKey struct{ pool, lender int32 }

// sourceKeyOf is the key of the source slots of owner's part are to leaf
// (sourceOf names the same with paths).
func (t *tree) sourceKeyOf(owner, leaf int32) sourceKey {
	switch {
	case owner == leaf:
		return sourceKey{pool: leaf, lender: noNode}
	case owner == noNode:
		return sourceKey{pool: 0, lender: noNode}
	case t.contains(owner, leaf):
		return sourceKey{pool: owner, lender: noNode}
	}
	return sourceKey{pool: t.commonAncestor(owner, leaf), lender: owner}
}

// HasOwnership reports whether the consumer views carry ownership
// figures: the plan names ownership, or an assignment is left from a plan
// that did (until the next plan or host event drops it).
func (p *Pool) HasOwnership() bool { return len(p.own) > 0 || p.mode.owned }

// beginFigures starts following the figures for a demand or release
// event: every host's sittings are made current first, so what the event
// changes is measured from them.
func (p *Pool) beginFigures() {
	f := &p.figs
	f.on = false
	if !p.HasOwnership() {
		return
	}
	parts, _ := p.hostParts()
	p.sitsFor(parts)
	if !p.sits.known {
		p.sittings(parts) // after the parts or the tree changed, or a restore
	}
	p.refreshSittings(parts)
	if n := len(p.t.nodes); len(f.marked) != n {
		f.used, f.lent, f.marked = make([]Slots, n), make([]Slots, n), make([]bool, n)
		f.sources = make([][]sourceMove, n)
	}
	f.on = true
}

// noteResit adds the difference between a host's old and new sittings
// (both by leaf in path order, then by part) to the figures they feed.
func (f *figureMoves) noteResit(p *Pool, parts []hostPart, before, after []sitting) {
	i, j := 0, 0
	for i < len(before) || j < len(after) {
		var s sitting
		switch {
		case j == len(after) || (i < len(before) && sittingBefore(before[i], after[j])):
			s, s.slots = before[i], -before[i].slots
			i++
		case i == len(before) || sittingBefore(after[j], before[i]):
			s = after[j]
			j++
		default:
			s, s.slots = after[j], after[j].slots-before[i].slots
			i++
			j++
		}
		if s.slots != 0 {
			f.add(p, parts, s)
		}
	}
}

// sittingBefore orders sittings by leaf, then part.
func sittingBefore(a, b sitting) bool {
	return a.leaf < b.leaf || (a.leaf == b.leaf && a.part < b.part)
}

// add counts a change of s.slots slots in one sitting: the leaf's source,
// and what the part's owner and its owning ancestors see used or lent
// out (as ownFigures counts them).
func (f *figureMoves) add(p *Pool, parts []hostPart, s sitting) {
	t, owner := p.t, parts[s.part].owner
	f.addSource(s.leaf, t.sourceKeyOf(owner, s.leaf), s.slots)
	for a := owner; a > 0; a = t.nodes[a].parent {
		if p.partTot.owned[a] == 0 {
			break
		}
		if t.contains(a, s.leaf) {
			f.used[a] += s.slots
		} else {
			f.lent[a] += s.slots
		}
		f.mark(a)
	}
}

func (f *figureMoves) addSource(leaf int32, k sourceKey, n Slots) {
	f.mark(leaf)
	for i := range f.sources[leaf] {
		if f.sources[leaf][i].key == k {
			f.sources[leaf][i].slots += n
			return
		}
	}
	f.sources[leaf] = append(f.sources[leaf], sourceMove{key: k, slots: n})
}

func (f *figureMoves) mark(id int32) {
	if !f.marked[id] {
		f.marked[id] = true
		f.nodes = append(f.nodes, id)
	}
}

// endFigures seats the hosts whose holdings the event changed and returns
// the paths of the consumers whose figures it moved, in path order, and
// forgets the event's counts.
func (p *Pool) endFigures() []string {
	f := &p.figs
	if !f.on {
		return nil
	}
	parts, _ := p.hostParts()
	p.refreshSittings(parts)
	f.on = false
	slices.Sort(f.nodes)
	var out []string
	for _, id := range f.nodes {
		moved := f.used[id] != 0 || f.lent[id] != 0
		for _, m := range f.sources[id] {
			moved = moved || m.slots != 0
		}
		if moved {
			out = append(out, p.t.nodes[id].path)
		}
		f.used[id], f.lent[id], f.marked[id], f.sources[id] = 0, 0, false, f.sources[id][:0]
	}
	f.nodes = f.nodes[:0]
	return out
}
