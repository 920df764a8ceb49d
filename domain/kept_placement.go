package domain

import "slices"

// The placement kept between events, beside the kept fold (kept_fold.go).
// After a placement most leaves are quiet: the slots they hold already
// count for everything they are due (step 1 keeps all of them, and they
// have nothing to place, give up or pair). A quiet leaf whose holdings
// and due shares have not changed since is quiet again, and does nothing
// in a placement but take room on the parts its slots count for; so a run
// over the other leaves alone, on the room the quiet ones leave, makes the
// same moves, provided step 1 cuts no leaf's keep for want of room (then
// the order in which leaves keep, and so who is in the run, could matter).
// That proviso is checked on every part, and when it fails the run is
// made over every leaf. TestKeptFoldMatchesFull compares the two.

// placeKeep is what is kept: which leaves are quiet, what each quiet
// leaf keeps where, and by part how much the quiet leaves keep.
type placeKeep struct {
	ready bool
	quiet []bool        // by node id
	keeps [][]partSlots // by node id: what a quiet leaf keeps, by part
	qsum  []Slots       // by part: what quiet leaves keep there
	qelse []Slots       // by part: of qsum, what leaves other than the part's owner keep
	room  []Slots       // by part: what the quiet leaves leave of it
	over  int           // parts where qsum exceeds the part
	// holders: by host, scratch for the leaves of a run.
	holders [][]leafSlots
	redo    leafSet // leaves to look at again: in the last run, or whose holdings changed
	bufs    placeBufs
	dueBuf  []dueShare // scratch: one leaf's due shares
	short   []bool     // wake's scratch: by part, short of room
}

// partSlots is a number of slots counted for one part (of the index).
type partSlots struct {
	part  int
	slots Slots
}

// noteHeld records that a leaf's holdings changed (addAlloc).
func (k *placeKeep) noteHeld(l int32) {
	if k.ready {
		k.redo.add(l)
	}
}

// partIndex is the placement's index of the current parts.
func (p *Pool) partIndex() *partIndex {
	parts, _ := p.hostParts()
	if ix := p.partIdx; ix != nil && ix.gen == p.partsGen {
		return ix
	}
	if old := p.partIdx; old == nil || old.t != p.t || len(old.hostAt) != len(p.hosts) || !slices.Equal(old.source, parts) {
		p.partIdx = newPartIndex(p.t, len(p.hosts), parts)
		p.partIdx.source = slices.Clone(parts)
		if p.pk.ready && old != nil && old.t == p.t && len(old.hostAt) <= len(p.hosts) {
			p.pk.carry(old, p.partIdx)
		} else {
			p.pk.ready = false
		}
	}
	p.partIdx.gen = p.partsGen
	return p.partIdx
}

// placeKept places the leaves that are not quiet, or every leaf when the
// proviso fails.
func (p *Pool) placeKept() []placeMove {
	idx := p.partIndex()
	k := &p.pk
	if !k.ready {
		k.reset(len(p.t.nodes), idx)
		for _, l := range p.t.sortedLeaves {
			k.noteHeld(l)
		}
	}
	moved := p.inc.dueMoved.take()
	for _, l := range moved {
		k.noteHeld(l)
	}
	var forced []int32
	if p.returnsFromKeepers() {
		// A quiet leaf seated on a part whose owner's due moved may give
		// the owner a return though it keeps its slots elsewhere on the
		// host (returnFromKeepers): it takes part in the run.
		// The owners are l and its ancestors, their parts from the index.
		parts, _ := p.hostParts()
		for _, l := range moved {
			for o := l; o != noNode; o = p.t.nodes[o].parent {
				for _, i := range idx.byOwner(o) {
					for _, s := range p.sittingsOn(parts, idx.parts[i].host) {
						if s.leaf != l && parts[s.part].owner == o {
							forced = append(forced, s.leaf)
						}
					}
				}
			}
		}
	}
	var run []int32
	for _, l := range k.redo.take() {
		if !k.settle(p, idx, l) {
			run = append(run, l)
		}
	}
	for _, l := range forced {
		if k.quiet[l] {
			k.addQuiet(idx, l, -1)
			k.quiet[l] = false
			run = append(run, l)
		}
	}
	slices.Sort(run)
	run = slices.Compact(run)
	// Where the proviso fails, the quiet leaves keeping on the parts
	// short of room join the run, and it is made again: the proviso is
	// then asked of the new run against the fewer quiet leaves, whose
	// keeps alone still hold. A few rounds, while the run stays well
	// short of every leaf; then every leaf takes part.
	var short []int
	for round := 0; ; round++ {
		if short = append(short, k.overParts(idx)...); len(short) > 0 {
			var woke bool
			if run, woke = k.wake(p, idx, short, run); !woke || round == maxWakeRounds || 2*len(run) > len(p.t.sortedLeaves) {
				break
			}
		}
		moves, failing := k.placeRun(p, idx, run)
		if len(failing) == 0 {
			for _, l := range run {
				k.noteHeld(l)
			}
			return moves
		}
		short = failing
	}
	// The proviso fails: every leaf takes part. What a quiet leaf keeps
	// alone still holds (it depends on that leaf alone); the others are
	// looked at again after, as after a run over them.
	for _, l := range run {
		k.noteHeld(l)
	}
	pl := p.place(idx, p.keptEveryLeaf(idx), &k.bufs)
	pl.release()
	return pl.moves
}

// maxWakeRounds bounds how many times placeKept wakes quiet leaves and
// runs again before a run over every leaf: each round is a run, and
// ownership of group slots spread over many hosts can chain parts short
// of room across the pool.
const maxWakeRounds = 3

// overParts are the parts where what the quiet leaves keep exceeds the
// part.
func (k *placeKeep) overParts(idx *partIndex) []int {
	if k.over == 0 {
		return nil
	}
	var out []int
	for i, pt := range idx.parts {
		if k.qsum[i] > pt.slots {
			out = append(out, i)
		}
	}
	return out
}

// wake makes the quiet leaves keeping on any of parts not quiet and adds
// them to run (kept sorted); false when none kept there. A leaf keeps
// only where it holds, so the holders of the parts' hosts are looked at.
func (k *placeKeep) wake(p *Pool, idx *partIndex, parts []int, run []int32) ([]int32, bool) {
	if len(k.short) != len(idx.parts) {
		k.short = make([]bool, len(idx.parts))
	}
	for _, i := range parts {
		k.short[i] = true
	}
	holders := p.hostHolders()
	n := len(run)
	for _, i := range parts {
		for _, l := range holders[idx.parts[i].host] {
			if k.quiet[l] && slices.ContainsFunc(k.keeps[l], func(ks partSlots) bool { return k.short[ks.part] }) {
				k.addQuiet(idx, l, -1)
				k.quiet[l] = false
				run = append(run, l)
			}
		}
	}
	for _, i := range parts {
		k.short[i] = false
	}
	if len(run) == n {
		return run, false
	}
	slices.Sort(run)
	return run, true
}

// keptEveryLeaf is a placement of every leaf on the kept fold's due
// shares and targets, on the whole room of every part.
func (p *Pool) keptEveryLeaf(idx *partIndex) placeInput {
	return placeInput{leaves: p.t.sortedLeaves, holders: p.holders(), target: func(l int32) Slots { return p.sh(l).target },
		due: func(l int32, add func(dueShare)) { p.inc.dueOf(p.t, l, add) }, room: idx.fullRoom(),
		transfers: p.keptTransfers(p.t.sortedLeaves)}
}

// placeRun places the leaves of run (path order) on the room the quiet
// leaves leave; failing are the parts where the proviso fails (none:
// the moves are those of a run over every leaf).
func (k *placeKeep) placeRun(p *Pool, idx *partIndex, run []int32) (moves []placeMove, failing []int) {
	in := placeInput{leaves: run, holders: k.holders, target: func(l int32) Slots { return p.sh(l).target },
		due: func(l int32, add func(dueShare)) { p.inc.dueOf(p.t, l, add) }, room: k.room,
		transfers: p.keptTransfers(run)}
	for _, l := range run {
		for _, h := range p.t.nodes[l].holdings {
			if len(k.holders[h.host]) == 0 {
				in.hosts = append(in.hosts, h.host)
			}
			k.holders[h.host] = append(k.holders[h.host], leafSlots{leaf: l, slots: h.slots})
		}
	}
	slices.Sort(in.hosts)
	if in.hosts == nil {
		in.hosts = []int32{}
	}
	pl := p.place(idx, in, &k.bufs)
	failing = k.uncut(idx, pl)
	pl.release()
	for _, h := range in.hosts {
		k.holders[h] = k.holders[h][:0]
	}
	return pl.moves, failing
}

// reset forgets every quiet leaf.
func (k *placeKeep) reset(n int, idx *partIndex) {
	k.ready = true
	k.quiet, k.keeps = make([]bool, n), make([][]partSlots, n)
	k.redo.reset(n)
	parts := len(idx.parts)
	k.qsum, k.qelse, k.room = make([]Slots, parts), make([]Slots, parts), make([]Slots, parts)
	for i, pt := range idx.parts {
		k.room[i] = pt.slots
	}
	k.holders = make([][]leafSlots, len(idx.hostAt))
	k.over = 0
}

// carry keeps the quiet leaves across new parts of the same tree (a host
// event changed the hosts or the assignment). What a quiet leaf keeps
// depends on its holdings, its due shares and the parts of the hosts it
// holds on (isolatedKeep): one whose keeps are all on hosts whose parts
// are as they were keeps them, at the parts' new places; one with a keep
// on a host whose parts changed is looked at again. The sums by part are
// made again over the new parts.
func (k *placeKeep) carry(old, idx *partIndex) {
	shift, changed := partsMoved(old.parts, idx.parts, len(old.hostAt))
	n := len(idx.parts)
	k.qsum, k.qelse, k.room = make([]Slots, n), make([]Slots, n), make([]Slots, n)
	for i, pt := range idx.parts {
		k.room[i] = pt.slots
	}
	k.over = 0
	for l := range k.quiet { // by node id: no order reaches an output, the sums are sums
		if !k.quiet[l] {
			continue
		}
		keeps := k.keeps[l]
		if slices.ContainsFunc(keeps, func(ks partSlots) bool { return changed[old.parts[ks.part].host] }) {
			k.quiet[l], k.keeps[l] = false, keeps[:0]
			k.redo.add(int32(l))
			continue
		}
		for j := range keeps {
			keeps[j].part += shift[old.parts[keeps[j].part].host]
		}
		k.addQuiet(idx, int32(l), 1)
	}
	for len(k.holders) < len(idx.hostAt) {
		k.holders = append(k.holders, nil)
	}
}

// settle looks at leaf l again: whether it is quiet, and if so what it
// keeps where (kept in qsum). It reports whether l is quiet.
func (k *placeKeep) settle(p *Pool, idx *partIndex, l int32) bool {
	if k.quiet[l] {
		k.addQuiet(idx, l, -1)
	}
	keeps, quiet := isolatedKeep(p, idx, l, k.keeps[l][:0])
	k.quiet[l], k.keeps[l] = quiet, keeps
	if quiet {
		k.addQuiet(idx, l, 1)
	}
	return quiet
}

func (k *placeKeep) addQuiet(idx *partIndex, l int32, sign Slots) {
	for _, ks := range k.keeps[l] {
		i := ks.part
		before := k.qsum[i] > idx.parts[i].slots
		k.qsum[i] += sign * ks.slots
		k.room[i] -= sign * ks.slots
		if idx.parts[i].owner != l {
			k.qelse[i] += sign * ks.slots
		}
		if after := k.qsum[i] > idx.parts[i].slots; after != before {
			if after {
				k.over++
			} else {
				k.over--
			}
		}
	}
}

// isolatedKeep is step 1 for leaf l alone, no part short of room: what it
// keeps on each part, and whether that is all it holds and all it is due
// (it is quiet).
// keeps is where it writes what the leaf keeps (its room is reused).
func isolatedKeep(p *Pool, idx *partIndex, l int32, keeps []partSlots) ([]partSlots, bool) {
	total, target := Slots(0), p.sh(l).target
	for _, h := range p.t.nodes[l].holdings {
		total += h.slots
	}
	if total != target {
		return nil, false
	}
	due := p.inc.appendDue(p.t, l, p.pk.dueBuf[:0])
	p.pk.dueBuf = due
	for _, h := range p.t.nodes[l].holdings {
		left := h.slots
		i0 := idx.hostAt[h.host]
		for _, lent := range []bool{false, true} {
			for i := i0; i < len(idx.parts) && idx.parts[i].host == h.host && left > 0; i++ {
				owner := idx.parts[i].owner
				if lentTo(p.t, l, owner) != lent {
					continue
				}
				for d := range due {
					if due[d].owner == owner && due[d].want > 0 {
						n := minSlots(left, due[d].want)
						due[d].want -= n
						left -= n
						keeps = append(keeps, partSlots{part: i, slots: n})
					}
				}
			}
		}
		if left > 0 {
			return nil, false
		}
	}
	return keeps, true // all held is kept, and total == target: nothing is still due
}

// uncut checks the proviso after a run over some leaves: on every part
// where they kept slots or an owner reserved some, what the quiet leaves
// and they keep fits, with the reserve when a leaf other than the owner
// keeps there; and where step 1 cut a keep of the run for want of room,
// no quiet leaf keeps. Then a run over every leaf keeps as this one does:
// a quiet leaf keeps what it keeps alone (nothing is short where it
// keeps), and where the run's leaves were cut they met the same room and
// the same others in the same order. It returns the parts where that
// fails.
func (k *placeKeep) uncut(idx *partIndex, pl *placement) []int {
	var failing []int
	for _, i := range pl.cutAt {
		if k.qsum[i] > 0 {
			failing = append(failing, i)
		}
	}
	for _, t := range pl.b.touched {
		i, pt := t.part, idx.parts[t.part]
		total := k.qsum[i] + pl.keptSum[i]
		if k.qelse[i]+pl.keptElse[i] > 0 {
			total += pl.reserved[i]
		}
		if total > pt.slots {
			failing = append(failing, i)
		}
	}
	return failing
}

// place runs the placement on in with the pool's rules; after a plan or
// host event under rules 4 it gives it what leaves sit on in parts they
// may no longer hold (ruling 10).
func (p *Pool) place(idx *partIndex, in placeInput, bufs *placeBufs) *placement {
	if p.allTouch && p.mode.behaviour.lendRevoked {
		in.ineligible = p.ineligibleSittings()
	}
	return place(p.t, p.hosts, idx, in, p.placeRules(), bufs)
}

// placeAll places every leaf on the layered targets of a full fold.
func (p *Pool) placeAll() []placeMove {
	idx := p.partIndex()
	pl := p.place(idx, p.layered.everyLeaf(p.t, idx, p.holders()), &p.pk.bufs)
	pl.release()
	return pl.moves
}

// keptTransfers is who gives to whom for the placement: share_ratio's
// pairing on the leaves' totals (leaves: every leaf off its target, path
// order), or what priority's reclaims moved in the kept fold.
func (p *Pool) keptTransfers(leaves []int32) []transfer {
	if p.mode.shareRatio {
		return p.shareRatioPairing(leaves)
	}
	return p.inc.transfers()
}
