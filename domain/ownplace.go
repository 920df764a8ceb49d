package domain

import (
	"cmp"
	"slices"
	"time"
)

// Placement with ownership (allocation-rules.md section 5, "Placement with
// ownership"): given where every leaf's slots sit and how many slots of
// each owner's hosts the layered targets give it (layered.go), where the
// slots sit afterwards, and the decisions that move them there. Like the
// assignment and the layered targets, this is a pure function the fold
// does not call yet (ownplan.go).
//
// A host's slots are divided into parts by the assignment: each owner's
// part is what it owns there and its children do not (a leaf's own
// slots, a parent's private slots), and the public part is what no
// top-level consumer owns. A leaf's slots of the own layer belong in its
// own parts, its slots of pool(X) in X's private parts, its public slots
// in the public parts, and slots lent by L in L's parts. The placement:
//
//  1. keeps what can stay: host by host, part by part (owners' parts
//     first, then private parts deepest first, then the public part),
//     the slots a leaf already holds on the host count for a part it is
//     due slots of, the owner first, then by priority desc, fewest slots
//     on the host, path, so a borrower of lowest priority, most slots on
//     the host, gives back first (section 5's return order);
//  2. places what is still due: leaves by rank, each part where the leaf
//     is due slots, the host with most of the part free first, then name;
//  3. pairs, host by host, the slots gained with the slots given up on
//     the same host: an owner gaining its own part back from a borrower
//     is a return (also a descendant of X taking X's private slots back
//     from outside X's branch), any other gain from a leaf is a reclaim;
//     a gain from free slots is a grant, or a lend when the part is
//     another consumer's; slots given up and not taken on that host are
//     released (the leaf is placed elsewhere, or another host's claimant
//     took its share).
//
// Decisions come out host by host (registration order), gains in part
// order. Orders the spec leaves open are docs/decisions.md #98-#100.

// hostPart is the slots of one host in one owner's part (owner noNode:
// the public part).
type hostPart struct {
	host  int32
	owner int32
	slots Slots
}

// placeMove is one decision of the placement, before the fold numbers it.
// graceOf names the consumer whose grace sets the deadline (noNode: none):
// the lender for a return, the victim for a reclaim.
type placeMove struct {
	kind    Kind
	leaf    int32
	from    int32
	host    int32
	slots   Slots
	rule    Rule
	graceOf int32
}

// The rules of the placement's decisions that sections 4 and 5 do not
// name already.
const (
	// RuleOwnUse: a leaf given slots of its own part.
	RuleOwnUse Rule = "own.use"
	// RuleOwnReturn: an owner (or a descendant of a parent owner) takes
	// its lent slots back from a borrower.
	RuleOwnReturn Rule = "own.return"
	// RuleMoved: slots given up on one host because the leaf's share of
	// that part went elsewhere.
	RuleMoved Rule = "release.moved"
)

// placeRules is what the pool's policy decides in a placement: the rules
// its grants and reclaims are recorded with, whether an owner takes its
// most preferred slots back from borrowers even while some of its own
// are free (reclaim_for_preference), and each owner's preference for
// each host.
type placeRules struct {
	grant      func(leaf int32) Rule
	reclaim    Rule
	preferring bool
	preference func(owner, host int32) int64
}

// placement is one run's state.
type placement struct {
	t      *tree
	rules  placeRules
	hosts  []host
	parts  []hostPart // by host, then part order
	capRem []Slots    // by part: not yet placed
	want   map[partKey]Slots
	holdOn func(leaf, host int32) Slots
	kept   map[partKey]Slots // (leaf, part) kept in step 1, keyed by part index
	placed map[partKey]Slots // (leaf, part) placed in step 2
	moves  []placeMove
	// reserved: by part, the slots of a leaf owner's part kept for the
	// owner's own use (no one else keeps them); ownOrder: by owner, its
	// parts in the order it uses them.
	reserved []Slots
	ownOrder map[int32][]int
}

// partKey names a leaf's slots in an owner's parts (owner) or in one part
// (the part's index, as owner).
type partKey struct{ leaf, owner int32 }

// placeOwned computes the placement. parts must list every up host's
// parts; holdOn reports what a leaf holds on a host now.
func placeOwned(t *tree, hosts []host, parts []hostPart, lt layeredTargets, holdOn func(leaf, host int32) Slots, rules placeRules) []placeMove {
	pl := &placement{t: t, rules: rules, hosts: hosts, holdOn: holdOn, want: map[partKey]Slots{},
		kept: map[partKey]Slots{}, placed: map[partKey]Slots{}, ownOrder: map[int32][]int{}}
	pl.parts = slices.Clone(parts)
	slices.SortStableFunc(pl.parts, pl.partOrder)
	pl.capRem = make([]Slots, len(pl.parts))
	for i, p := range pl.parts {
		pl.capRem[i] = p.slots
	}
	for _, l := range t.leaves {
		if k := lt.ownUse[l]; k > 0 {
			pl.want[partKey{l, l}] += k
		}
	}
	for _, tk := range lt.takes {
		owner := tk.lender
		if owner == noNode && tk.pool != 0 {
			owner = tk.pool
		}
		pl.want[partKey{tk.leaf, owner}] += tk.slots
	}
	pl.reserve()
	pl.keep()
	pl.place()
	pl.pair()
	return pl.moves
}

// partOrder: hosts in registration order; on a host, leaf owners' parts
// (by path), then parents' private parts deepest first (then path), then
// the public part.
func (pl *placement) partOrder(a, b hostPart) int {
	if a.host != b.host {
		return cmp.Compare(a.host, b.host)
	}
	return cmp.Compare(pl.partTier(a.owner), pl.partTier(b.owner))
}

// partTier ranks an owner's part on a host (smaller first).
func (pl *placement) partTier(owner int32) int64 {
	if owner == noNode {
		return 1 << 62
	}
	n := &pl.t.nodes[owner]
	if n.leaf {
		return int64(owner)
	}
	return 1<<40 + int64(1<<20-n.depth)<<21 + int64(owner)
}

// keep is step 1.
func (pl *placement) keep() {
	left := map[partKey]Slots{} // (leaf, host) not yet counted for a part
	for i, p := range pl.parts {
		var keepers []int32
		for _, l := range pl.t.sortedLeaves {
			if pl.want[partKey{l, p.owner}] <= 0 {
				continue
			}
			k := partKey{l, p.host}
			if _, seen := left[k]; !seen {
				left[k] = pl.holdOn(l, p.host)
			}
			if left[k] > 0 {
				keepers = append(keepers, l)
			}
		}
		slices.SortFunc(keepers, func(a, b int32) int { return pl.keepOrder(p, left, a, b) })
		for _, l := range keepers {
			hk, wk := partKey{l, p.host}, partKey{l, p.owner}
			room := pl.capRem[i]
			if l != p.owner {
				room -= pl.reserved[i]
			}
			k := minSlots(minSlots(left[hk], pl.want[wk]), room)
			if k <= 0 {
				continue
			}
			left[hk] -= k
			pl.want[wk] -= k
			pl.capRem[i] -= k
			pl.kept[partKey{l, int32(i)}] += k
		}
	}
}

// keepOrder: the part's owner first, then priority desc, fewest slots on
// the host, path.
func (pl *placement) keepOrder(p hostPart, left map[partKey]Slots, a, b int32) int {
	if (a == p.owner) != (b == p.owner) {
		if a == p.owner {
			return -1
		}
		return 1
	}
	x, y := &pl.t.nodes[a], &pl.t.nodes[b]
	if x.priority != y.priority {
		return cmpDesc(x.priority, y.priority)
	}
	if ha, hb := left[partKey{a, p.host}], left[partKey{b, p.host}]; ha != hb {
		return cmp.Compare(ha, hb)
	}
	return cmp.Compare(a, b)
}

// reserve orders each leaf owner's parts and keeps what it still needs of
// its own slots on them: by preference (desc); then, unless the pool
// reclaims for preference, parts on hosts with free slots first, so an
// owner uses its idle slots before taking lent ones back; then most
// slots, then host name. Borrowers keep only what is not reserved.
func (pl *placement) reserve() {
	pl.reserved = make([]Slots, len(pl.parts))
	for _, o := range pl.t.sortedLeaves {
		want := pl.want[partKey{o, o}]
		if want <= 0 {
			continue
		}
		var mine []int
		sits := make(map[int]Slots)
		for i, p := range pl.parts {
			if p.owner == o {
				mine = append(mine, i)
				sits[i] = minSlots(pl.holdOn(o, p.host), p.slots)
				want -= sits[i]
			}
		}
		slices.SortStableFunc(mine, func(a, b int) int {
			pa, pb := pl.parts[a], pl.parts[b]
			c := cmpDesc(pl.rules.preference(o, pa.host), pl.rules.preference(o, pb.host))
			if c == 0 && !pl.rules.preferring {
				c = boolFirst(pl.hostFree(pa.host) > 0, pl.hostFree(pb.host) > 0)
			}
			return cmp.Or(c, cmpDesc(pa.slots-sits[a], pb.slots-sits[b]), cmp.Compare(pl.hosts[pa.host].name, pl.hosts[pb.host].name))
		})
		pl.ownOrder[o] = mine
		for _, i := range mine {
			if want <= 0 {
				break
			}
			r := minSlots(want, pl.parts[i].slots-sits[i])
			pl.reserved[i] = r
			want -= r
		}
	}
}

// hostFree is how many slots of a host nobody holds now.
func (pl *placement) hostFree(h int32) Slots { return pl.hosts[h].slots - pl.hosts[h].used }

// place is step 2.
func (pl *placement) place() {
	leaves := slices.Clone(pl.t.leaves)
	slices.SortFunc(leaves, func(a, b int32) int {
		if pa, pb := pl.t.nodes[a].priority, pl.t.nodes[b].priority; pa != pb {
			return cmpDesc(pa, pb)
		}
		return cmp.Compare(a, b)
	})
	for _, l := range leaves {
		for _, i := range pl.ownOrder[l] { // its own slots, in the order reserved
			k := minSlots(pl.want[partKey{l, l}], pl.capRem[i])
			if k > 0 {
				pl.want[partKey{l, l}] -= k
				pl.capRem[i] -= k
				pl.placed[partKey{l, int32(i)}] += k
			}
		}
		for i := range pl.parts {
			owner := pl.parts[i].owner
			for pl.want[partKey{l, owner}] > 0 {
				best := pl.roomiest(owner)
				if best < 0 {
					break
				}
				k := minSlots(pl.want[partKey{l, owner}], pl.capRem[best])
				pl.want[partKey{l, owner}] -= k
				pl.capRem[best] -= k
				pl.placed[partKey{l, int32(best)}] += k
			}
		}
	}
}

// roomiest returns the owner's part with most room left, then host name;
// -1 when none has room.
func (pl *placement) roomiest(owner int32) int {
	best := -1
	for i, p := range pl.parts {
		if p.owner != owner || pl.capRem[i] <= 0 {
			continue
		}
		if best < 0 || pl.capRem[i] > pl.capRem[best] ||
			(pl.capRem[i] == pl.capRem[best] && pl.hosts[p.host].name < pl.hosts[pl.parts[best].host].name) {
			best = i
		}
	}
	return best
}

// pair is step 3.
func (pl *placement) pair() {
	for h := range pl.hosts {
		var losers []int32
		lost := map[int32]Slots{}
		for _, l := range pl.t.sortedLeaves {
			keptHere := Slots(0)
			for i, p := range pl.parts {
				if p.host == int32(h) {
					keptHere += pl.kept[partKey{l, int32(i)}]
				}
			}
			if k := pl.holdOn(l, int32(h)) - keptHere; k > 0 {
				lost[l] = k
				losers = append(losers, l)
			}
		}
		// A leaf that gives up slots of one part and gains slots of
		// another on the same host keeps them where they are.
		self := map[int32]Slots{}
		for _, l := range losers {
			gained := Slots(0)
			for i, p := range pl.parts {
				if p.host == int32(h) {
					gained += pl.placed[partKey{l, int32(i)}]
				}
			}
			self[l] = minSlots(gained, lost[l])
			lost[l] -= self[l]
		}
		slices.SortFunc(losers, func(a, b int32) int { return pl.giveBackOrder(lost, a, b) })
		for i, p := range pl.parts {
			if p.host != int32(h) {
				continue
			}
			for _, l := range pl.t.sortedLeaves {
				k := pl.placed[partKey{l, int32(i)}]
				relabel := minSlots(k, self[l])
				self[l] -= relabel
				if k -= relabel; k > 0 {
					pl.gain(l, p, k, losers, lost)
				}
			}
		}
		for _, v := range losers {
			if k := lost[v]; k > 0 {
				pl.moves = append(pl.moves, placeMove{kind: KindRelease, leaf: v, from: noNode, host: int32(h), slots: k, rule: RuleMoved, graceOf: noNode})
			}
		}
	}
}

// giveBackOrder: lowest priority first, then most slots given up on the
// host, then path.
func (pl *placement) giveBackOrder(lost map[int32]Slots, a, b int32) int {
	x, y := &pl.t.nodes[a], &pl.t.nodes[b]
	if x.priority != y.priority {
		return cmp.Compare(x.priority, y.priority)
	}
	if lost[a] != lost[b] {
		return cmpDesc(lost[a], lost[b])
	}
	return cmp.Compare(a, b)
}

// gain records k slots leaf l gains in part p: taken from the slots
// others give up on the host first, then from free slots.
func (pl *placement) gain(l int32, p hostPart, k Slots, losers []int32, lost map[int32]Slots) {
	for _, v := range losers {
		if k == 0 {
			return
		}
		n := minSlots(k, lost[v])
		if n <= 0 {
			continue
		}
		lost[v] -= n
		k -= n
		if pl.isReturn(l, v, p.owner) {
			pl.moves = append(pl.moves, placeMove{kind: KindReturn, leaf: l, from: v, host: p.host, slots: n, rule: RuleOwnReturn, graceOf: p.owner})
		} else {
			pl.moves = append(pl.moves, placeMove{kind: KindReclaim, leaf: l, from: v, host: p.host, slots: n, rule: pl.rules.reclaim, graceOf: v})
		}
	}
	if k == 0 {
		return
	}
	switch {
	case p.owner == l:
		pl.moves = append(pl.moves, placeMove{kind: KindGrant, leaf: l, from: noNode, host: p.host, slots: k, rule: RuleOwnUse, graceOf: noNode})
	case p.owner == noNode || pl.t.contains(p.owner, l):
		pl.moves = append(pl.moves, placeMove{kind: KindGrant, leaf: l, from: noNode, host: p.host, slots: k, rule: pl.rules.grant(l), graceOf: noNode})
	default:
		pl.moves = append(pl.moves, placeMove{kind: KindLend, leaf: l, from: p.owner, host: p.host, slots: k, rule: pl.rules.grant(l), graceOf: noNode})
	}
}

// isReturn reports whether leaf l taking slots of owner's part from v is
// the owner taking back what it lent: l is the owner, or a descendant of
// the owner while v is outside the owner's branch.
func (pl *placement) isReturn(l, v, owner int32) bool {
	if owner == noNode {
		return false
	}
	if owner == l {
		return true
	}
	return !pl.t.nodes[owner].leaf && pl.t.contains(owner, l) && !pl.t.contains(owner, v)
}

// deadline is when a move's slots must be free: its time plus the grace
// of the consumer named by graceOf (the lender's lend_grace for a return,
// the victim's reclaim_grace for a reclaim).
func (m placeMove) deadline(t *tree, at time.Time) *time.Time {
	if m.graceOf == noNode {
		return nil
	}
	g := t.nodes[m.graceOf].reclaimGrace
	if m.kind == KindReturn {
		g = t.nodes[m.graceOf].lendGrace
	}
	d := at.Add(g)
	return &d
}

// partsOf divides the up hosts into parts by an assignment (rows of
// consumer path, host name, slots) and sums the ownership totals the
// layered targets need. Rows naming a consumer or host the pool does not
// have, or a host that is down, are ignored: the assignment only ever
// holds up hosts of the pool.
func partsOf(t *tree, hosts []host, rows []ownSlot) ([]hostPart, ownTotals) {
	n := len(t.nodes)
	tot := ownTotals{owned: make([]Slots, n), private: make([]Slots, n)}
	byHost := make([][]Slots, len(hosts)) // by host: owned slots by node id, lazily
	hostIdx := make(map[string]int32, len(hosts))
	for i, h := range hosts {
		if h.up {
			hostIdx[h.name] = int32(i)
		}
	}
	for _, r := range rows {
		id, ok := t.lookup(r.consumer)
		h, up := hostIdx[r.host]
		if !ok || !up || id == 0 {
			continue
		}
		if byHost[h] == nil {
			byHost[h] = make([]Slots, n)
		}
		byHost[h][id] += r.slots
		tot.owned[id] += r.slots
	}
	var parts []hostPart
	for h := range hosts {
		if !hosts[h].up {
			continue
		}
		public := hosts[h].slots
		for id := 1; id < n && byHost[h] != nil; id++ {
			inner := byHost[h][id]
			for _, c := range t.nodes[id].children {
				inner -= byHost[h][c]
			}
			if t.nodes[id].depth == 1 {
				public -= byHost[h][id]
			}
			if inner > 0 {
				parts = append(parts, hostPart{host: int32(h), owner: int32(id), slots: inner})
			}
		}
		if public > 0 {
			parts = append(parts, hostPart{host: int32(h), owner: noNode, slots: public})
		}
		tot.public += max(public, 0)
	}
	for id := 1; id < n; id++ {
		tot.private[id] = tot.owned[id]
		for _, c := range t.nodes[id].children {
			tot.private[id] -= tot.owned[c]
		}
		if t.nodes[id].leaf {
			tot.private[id] = 0
		}
	}
	return parts, tot
}
