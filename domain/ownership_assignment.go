package domain

import (
	"cmp"
	"maps"
	"slices"

	"github.com/cluster-ledger/ledger/events"
)

// Ownership assignment (docs/rules.md#assignment): which slots of which up
// host each owner holds, re-run on every plan, host_up and host_down event
// with the least disruption. This file is the assignment alone, a pure
// function of its input; the fold (ownership_fold.go reassignOwnership) calls it on
// plan and host events.
//
// The procedure, top-down:
//   - top-level consumers are assigned from the up hosts, the children of
//     a consumer only from their parent's assigned slots; siblings are
//     served by rank (priority desc, then path);
//   - a consumer's entries are taken by preference (desc, then as
//     listed); a host entry takes what is available on its host; a group
//     entry takes its N slots of the group in three steps: (1) its own
//     previous slots (the host where it held most first, then name),
//     (2) slots no sibling holds (neither taken in this pass by a higher
//     rank nor held before by a lower rank), least workload first, then
//     name, (3) slots held before by lower-ranked siblings, the lowest
//     rank first, least workload, then name. Within a step a host is
//     taken whole while the remaining need is at least what it has
//     available, and the remainder comes from the next host, partially;
//   - what cannot be found stays short; every change of a consumer's
//     owned slots on a host is an own decision (assign, drop, trim).
//
// Orders the spec leaves open are docs/decisions.md #90-#93.

// ownConsumer is a consumer as assignment sees it. Its parent is the
// consumer named by its path's parent; a parent missing from the input
// owns nothing (an implied parent), so its children get nothing.
type ownConsumer struct {
	path     string
	priority int64
	own      []events.OwnEntry
	// byPreference: own by preference, desc, then as listed (newOwnPlan;
	// nil when own has one entry or none).
	byPreference []events.OwnEntry
}

// ownHost is a host of the pool. Workload is its allocated slots (every
// consumer's), the "least workload first" of group steps 2 and 3. A host
// that is down has nothing to give and counts as absent; the fold passes
// it all the same so that the host order stays the same from run to run
// (assignKeep).
type ownHost struct {
	name     string
	group    string
	slots    Slots
	workload Slots
	down     bool
}

// ownSlot is one row of an assignment: consumer owns slots of host.
type ownSlot struct {
	consumer string
	host     string
	slots    Slots
}

// ownInput is everything assignment depends on.
type ownInput struct {
	consumers []ownConsumer // any order
	hosts     []ownHost     // the hosts, any order, names unique
	previous  []ownSlot     // the previous assignment, any order
	// plan, when set, is newOwnPlan(consumers) made before (the fold keeps
	// it while the plan holds); consumers is then not read.
	plan *ownPlan
	// keep, when set, is the assignment kept from the run before
	// (kept_assignment.go): the run re-computes only the sibling sets whose
	// input changed, and updates it. The result is the same without it.
	keep *assignKeep
}

// ownPlan is what the assignment takes from the plan alone: the consumers
// sorted by path (index order is the "then path" tie-break), their
// indexes, and each one's children by rank. A host event re-runs the
// assignment on the same plan, so the fold keeps it (Pool.ownPlanFor).
type ownPlan struct {
	cons   []ownConsumer
	conIdx map[string]int32
	kids   [][]int32 // children by rank; kids[len(cons)] are the top-level consumers
}

func newOwnPlan(consumers []ownConsumer) *ownPlan {
	op := &ownPlan{cons: slices.Clone(consumers), conIdx: make(map[string]int32, len(consumers))}
	slices.SortFunc(op.cons, func(x, y ownConsumer) int { return cmp.Compare(x.path, y.path) })
	for i, c := range op.cons {
		op.conIdx[c.path] = int32(i)
	}
	root := int32(len(op.cons))
	op.kids = make([][]int32, len(op.cons)+1)
	for i, c := range op.cons {
		p := root
		if pp := parentPath(c.path); pp != "/" {
			id, ok := op.conIdx[pp]
			if !ok {
				continue // under an implied parent, which owns nothing: gets nothing
			}
			p = id
		}
		op.kids[p] = append(op.kids[p], int32(i))
	}
	for _, ks := range op.kids {
		slices.SortFunc(ks, op.byRank)
	}
	for i := range op.cons { // each consumer's entries by preference (desc, then as listed)
		if es := op.cons[i].own; len(es) > 1 {
			es = slices.Clone(es)
			slices.SortStableFunc(es, func(x, y events.OwnEntry) int {
				return cmp.Compare(y.PreferenceOrDefault(), x.PreferenceOrDefault())
			})
			op.cons[i].byPreference = es
		}
	}
	return op
}

// ownOutcome is one consumer's ownership after assignment.
type ownOutcome struct {
	path    string
	owned   Slots    // slots assigned, over all hosts
	short   Slots    // slots its entries name that it was not given
	private Slots    // owned slots not assigned to its children: private(X)
	missing []string // hosts its entries name that are not up (short by an unknown amount when owned whole)
}

// ownResult is a new assignment with the decisions that lead to it.
type ownResult struct {
	assignment []ownSlot // by consumer path, then host name
	// rowConsumer is each row's consumer, by its index in the plan's
	// consumers (ownPlan.cons, by path).
	rowConsumer []int32
	// rowHost is each row's host, by its index in the input's hosts.
	rowHost   []int32
	decisions []Decision // kind own; Seq and Ordinal are the fold's to set
	public    Slots      // up slots no top-level consumer owns
	// partial: the run had the previous assignment by consumer (the
	// keep's), and changedFrom and changedTo are the rows before and
	// after of the consumers whose rows changed, the only ones that
	// differ between the previous assignment and this one.
	partial                bool
	changedFrom, changedTo []ownSlot
	// The outcomes by the plan's consumer index (consumerOutcomes).
	plan     *ownPlan
	outcomes []ownOutcome
}

// hostSlots is a number of slots on a host (an index into assigner.hosts).
type hostSlots struct {
	h int32
	n Slots
}

// assigner holds one run's state. Hosts and consumers are sorted by name
// and path, so index order is the "then name/path" tie-break.
type assigner struct {
	*ownPlan             // read only
	keep     *assignKeep // nil: every sibling set is computed
	hosts    []ownHost   // the input's, by name
	inputIdx []int32     // by host: its index in the input's hosts
	hostIdx  map[string]int32
	prev     [][]hostSlots // by consumer: its previous slots on the hosts up
	// prevAll, when the previous assignment is the keep's: by consumer,
	// its previous slots on every host, down ones too (nil otherwise).
	prevAll  [][]hostSlots
	got      [][]hostSlots
	outcomes []ownOutcome
	served   []bool

	// Scratch, indexed by host, zero between sibling sets.
	avail     []Slots // the parent's slots not yet taken in this pass
	lowerPrev []Slots // slots held before by siblings not yet served, still unclaimed
	mine      []Slots // the current consumer's takes
	touched   []int32 // the hosts of mine that are not 0
	// reserved[c]: c's previous slots on its parent's hosts that no
	// higher-ranked sibling has taken, by host index.
	reserved [][]hostSlots
}

// assignOwnership computes the assignment of docs/rules.md#assignment. It is
// deterministic: no output depends on the order of the input's slices or
// on map iteration.
func assignOwnership(in ownInput) ownResult {
	a := newAssigner(in)
	root := int32(len(a.cons))
	queue := []int32{root}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		a.assignSiblings(parent)
		for _, c := range a.kids[parent] {
			if len(a.kids[c]) > 0 {
				queue = append(queue, c)
			}
		}
	}
	// Consumers under an implied parent (which owns nothing) were never
	// served: nothing is available to them, and they are short of all
	// their entries name.
	for c := range a.cons {
		if !a.served[c] {
			a.assignOne(int32(c), nil, nil)
		}
	}
	res := a.result(in.previous)
	a.keep.end(a, res.assignment)
	return res
}

func newAssigner(in ownInput) *assigner {
	op := in.plan
	if op == nil {
		op = newOwnPlan(in.consumers)
	}
	a := &assigner{ownPlan: op}
	if k := in.keep.begin(op, in.hosts); k != nil {
		a.keep, a.hostIdx, a.inputIdx = k, k.hostIdx, k.order
	} else {
		a.inputIdx = hostsByName(in.hosts)
		a.hostIdx = make(map[string]int32, len(in.hosts))
		for i, j := range a.inputIdx {
			a.hostIdx[in.hosts[j].name] = int32(i)
		}
	}
	a.hosts = make([]ownHost, len(in.hosts))
	for i, j := range a.inputIdx {
		a.hosts[i] = in.hosts[j]
	}
	k := a.keep
	if k != nil && k.holds(in.previous) {
		// The previous assignment is the one the keep made: its rows by
		// consumer are at hand, merged, without a lookup.
		a.prevAll = k.got
		a.prev = k.upRows(a.hosts)
	} else {
		a.prev = make([][]hostSlots, len(a.cons))
		for _, r := range in.previous {
			c, okc := a.conIdx[r.consumer]
			h, okh := a.upHost(r.host)
			if okc && okh && r.slots > 0 {
				a.prev[c] = append(a.prev[c], hostSlots{h, r.slots})
			}
		}
		for c := range a.prev {
			a.prev[c] = mergeHostSlots(a.prev[c])
		}
	}
	if k != nil && k.outcomes != nil {
		k.lend(a)
		return a
	}
	a.got = make([][]hostSlots, len(a.cons))
	a.reserved = make([][]hostSlots, len(a.cons))
	a.outcomes = make([]ownOutcome, len(a.cons))
	a.served = make([]bool, len(a.cons))
	a.avail = make([]Slots, len(a.hosts))
	a.lowerPrev = make([]Slots, len(a.hosts))
	a.mine = make([]Slots, len(a.hosts))
	return a
}

// hostsByName is the indexes of hosts in the order of their names.
func hostsByName(hosts []ownHost) []int32 {
	order := make([]int32, len(hosts))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int { return cmp.Compare(hosts[x].name, hosts[y].name) })
	return order
}

// upHost is the index of the host named, when it is up.
func (a *assigner) upHost(name string) (int32, bool) {
	h, ok := a.hostIdx[name]
	return h, ok && !a.hosts[h].down
}

// byRank orders siblings: priority desc, then path.
func (op *ownPlan) byRank(x, y int32) int {
	if px, py := op.cons[x].priority, op.cons[y].priority; px != py {
		return cmp.Compare(py, px)
	}
	return cmp.Compare(x, y)
}

// mergeHostSlots sorts by host and sums duplicates.
func mergeHostSlots(hs []hostSlots) []hostSlots {
	slices.SortFunc(hs, func(x, y hostSlots) int { return cmp.Compare(x.h, y.h) })
	out := hs[:0]
	for _, x := range hs {
		if n := len(out); n > 0 && out[n-1].h == x.h {
			out[n-1].n += x.n
			continue
		}
		out = append(out, x)
	}
	return out
}

// assignSiblings assigns the children of parent (the root: the top-level
// consumers) from the parent's slots, by rank.
func (a *assigner) assignSiblings(parent int32) {
	sibs := a.kids[parent]
	if len(sibs) == 0 {
		return
	}
	var cand []int32 // the hosts the parent has slots on
	if parent == int32(len(a.cons)) {
		for i := range a.hosts {
			if !a.hosts[i].down {
				cand = append(cand, int32(i))
				a.avail[i] = a.hosts[i].slots
			}
		}
	} else {
		if a.keep.reuse(a, parent) {
			return
		}
		for _, x := range a.got[parent] {
			cand = append(cand, x.h)
			a.avail[x.h] = x.n
		}
	}
	// Previous slots count only where the parent still has slots: the
	// rest are gone with the parent's (or the host's) loss.
	for _, s := range sibs {
		a.reserved[s] = a.reserved[s][:0]
		for _, x := range a.prev[s] {
			if n := min(x.n, a.avail[x.h]); n > 0 {
				a.reserved[s] = append(a.reserved[s], hostSlots{x.h, n})
				a.lowerPrev[x.h] += n
			}
		}
	}
	byGroup := a.groupOrder(cand)
	for i, c := range sibs {
		for _, x := range a.reserved[c] {
			a.lowerPrev[x.h] -= x.n // c is not lower than itself
		}
		a.assignOne(c, sibs[i+1:], byGroup)
	}
	for _, h := range cand {
		a.avail[h], a.lowerPrev[h] = 0, 0
	}
	a.keep.record(a, parent)
}

// groupOrder lists the candidate hosts of each group, least workload
// first, then name.
func (a *assigner) groupOrder(cand []int32) map[string][]int32 {
	byGroup := map[string][]int32{}
	for _, h := range cand {
		g := a.hosts[h].group
		byGroup[g] = append(byGroup[g], h)
	}
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		slices.SortFunc(byGroup[g], a.byWorkload)
	}
	return byGroup
}

func (a *assigner) byWorkload(x, y int32) int {
	if wx, wy := a.hosts[x].workload, a.hosts[y].workload; wx != wy {
		return cmp.Compare(wx, wy)
	}
	return cmp.Compare(x, y)
}

// assignOne serves consumer c; lower are its lower-ranked siblings, by
// rank (the lowest last).
func (a *assigner) assignOne(c int32, lower []int32, byGroup map[string][]int32) {
	a.outcomes[c] = ownOutcome{}
	out := &a.outcomes[c]
	a.served[c] = true
	touched := a.touched[:0]
	defer func() { a.touched = touched[:0] }()
	take := func(h int32, n Slots) {
		a.avail[h] -= n
		if a.mine[h] == 0 {
			touched = append(touched, h)
		}
		a.mine[h] += n
		if r := findHost(a.reserved[c], h); r != nil { // its own previous slots come back first
			r.n -= min(r.n, n)
		}
	}
	entries := a.cons[c].own
	if len(entries) > 1 {
		entries = a.cons[c].byPreference
	}
	// Slots of a host that one of c's own host entries names are that
	// entry's, whatever its preference: a group entry takes neither its
	// previous slots there (step 1) nor free or lower-ranked ones (steps 2
	// and 3) up to the host entry's claim. Otherwise the group entry would
	// eat its owner's host entry, which then takes other slots, and the
	// assignment would drift from run to run instead of staying put
	// (decisions.md #91).
	var pending map[int32]Slots
	for _, e := range entries {
		if h, up := a.upHost(e.Host); e.Host != "" && up {
			if pending == nil {
				pending = map[int32]Slots{}
			}
			pending[h] = a.hosts[h].slots
			if !e.WholeHost() {
				pending[h] = Slots(*e.Slots)
			}
		}
	}
	ownPrevious := func(h int32) Slots {
		r := findHost(a.reserved[c], h)
		if r == nil {
			return 0
		}
		return max(0, r.n-pending[h])
	}
	for _, e := range entries {
		if e.Host != "" {
			h, up := a.upHost(e.Host)
			delete(pending, h)
			if !up {
				out.missing = append(out.missing, e.Host)
				if !e.WholeHost() {
					out.short += Slots(*e.Slots)
				}
				continue
			}
			want := a.hosts[h].slots
			if !e.WholeHost() {
				want = Slots(*e.Slots)
			}
			if t := min(want, a.avail[h]); t > 0 {
				take(h, t)
				want -= t
			}
			out.short += want
			continue
		}
		need := Slots(*e.Slots)
		// Step 1: its previous slots in the group, where it held most first.
		var own []hostSlots
		for _, x := range a.reserved[c] {
			if n := ownPrevious(x.h); n > 0 && a.avail[x.h] > 0 && a.hosts[x.h].group == e.Group {
				own = append(own, hostSlots{x.h, n})
			}
		}
		slices.SortFunc(own, func(x, y hostSlots) int {
			if x.n != y.n {
				return cmp.Compare(y.n, x.n)
			}
			return cmp.Compare(x.h, y.h)
		})
		for _, x := range own {
			h := x.h
			if need == 0 {
				break
			}
			if t := min(need, ownPrevious(h), a.avail[h]); t > 0 {
				take(h, t)
				need -= t
			}
		}
		// Step 2: slots no sibling holds.
		for _, h := range byGroup[e.Group] {
			if need == 0 {
				break
			}
			if free := a.avail[h] - a.lowerPrev[h] - pending[h]; free > 0 {
				t := min(need, free)
				take(h, t)
				need -= t
			}
		}
		// Step 3: slots held before by lower-ranked siblings, lowest first.
		for i := len(lower) - 1; i >= 0 && need > 0; i-- {
			s := lower[i]
			var theirs []int32
			for _, x := range a.reserved[s] {
				if x.n > 0 && a.hosts[x.h].group == e.Group {
					theirs = append(theirs, x.h)
				}
			}
			slices.SortFunc(theirs, a.byWorkload)
			for _, h := range theirs {
				if need == 0 {
					break
				}
				r := findHost(a.reserved[s], h)
				if t := min(need, r.n, a.avail[h]-pending[h]); t > 0 {
					take(h, t)
					r.n -= t
					a.lowerPrev[h] -= t
					need -= t
				}
			}
		}
		out.short += need
	}
	slices.Sort(touched)
	got := make([]hostSlots, 0, len(touched))
	for _, h := range touched {
		got = append(got, hostSlots{h, a.mine[h]})
		out.owned += a.mine[h]
		a.mine[h] = 0
	}
	a.got[c] = got
	slices.Sort(out.missing)
}

// findHost returns the entry of host h in hs (sorted by host), or nil.
func findHost(hs []hostSlots, h int32) *hostSlots {
	i, ok := slices.BinarySearchFunc(hs, h, func(x hostSlots, h int32) int { return cmp.Compare(x.h, h) })
	if !ok {
		return nil
	}
	return &hs[i]
}

// result assembles the assignment, the outcomes and the decisions.
func (a *assigner) result(previous []ownSlot) ownResult {
	res := ownResult{plan: a.ownPlan, outcomes: a.outcomes}
	n := 0
	for c := range a.cons {
		n += len(a.got[c])
	}
	res.assignment = make([]ownSlot, 0, n)
	res.rowConsumer, res.rowHost = make([]int32, 0, n), make([]int32, 0, n)
	for c := range a.cons {
		res.assignment = a.rows(res.assignment, int32(c), a.got[c])
		for _, x := range a.got[c] {
			res.rowConsumer = append(res.rowConsumer, int32(c))
			res.rowHost = append(res.rowHost, a.inputIdx[x.h])
		}
	}
	var total, topOwned Slots
	for _, h := range a.hosts {
		if !h.down {
			total += h.slots
		}
	}
	for _, c := range a.kids[len(a.cons)] {
		topOwned += a.outcomes[c].owned
	}
	res.public = total - topOwned
	if a.prevAll == nil {
		res.decisions = a.ownDecisions(previous, res.assignment)
		return res
	}
	// The previous assignment is the keep's, by consumer: a consumer
	// whose rows are the same makes no decision, so the decisions are
	// those of the rows of the others (ownDecisions is pair by pair, and
	// what it carries from pair to pair is per consumer).
	res.partial = true
	for c := range a.cons {
		if !slices.Equal(a.prevAll[c], a.got[c]) {
			res.changedFrom = a.rows(res.changedFrom, int32(c), a.prevAll[c])
			res.changedTo = a.rows(res.changedTo, int32(c), a.got[c])
		}
	}
	res.decisions = a.ownDecisions(res.changedFrom, res.changedTo)
	return res
}

// rows appends consumer c's slots as rows of an assignment.
func (a *assigner) rows(out []ownSlot, c int32, hs []hostSlots) []ownSlot {
	for _, x := range hs {
		out = append(out, ownSlot{a.cons[c].path, a.hosts[x.h].name, x.n})
	}
	return out
}

// consumerOutcomes is every consumer's outcome, by path, with its
// private slots (what the tests read; the fold reads the assignment).
func (r ownResult) consumerOutcomes() []ownOutcome {
	out := make([]ownOutcome, len(r.plan.cons))
	for c := range r.plan.cons {
		o := r.outcomes[c]
		o.path = r.plan.cons[c].path
		o.private = o.owned
		for _, k := range r.plan.kids[c] {
			o.private -= r.outcomes[k].owned
		}
		out[c] = o
	}
	return out
}

// ownDecisions compares the previous assignment with the new one, pair by
// pair in (consumer path, host name) order, the order of the assignment
// itself (decisions.md #92): one decision per changed pair, or an own.drop
// then an own.trim when a loss has both causes.
func (a *assigner) ownDecisions(previous, next []ownSlot) []Decision {
	prev := mergeOwnSlots(previous)
	ds := make([]Decision, 0, len(next))
	budget := map[string]Slots{} // per consumer: what the plan stopped giving, not yet spent
	i, j := 0, 0
	for i < len(prev) || j < len(next) {
		var p, n ownSlot
		switch {
		case j == len(next) || (i < len(prev) && ownSlotLess(prev[i], next[j])):
			p = prev[i]
			n = ownSlot{consumer: p.consumer, host: p.host}
			i++
		case i == len(prev) || ownSlotLess(next[j], prev[i]):
			n = next[j]
			p = ownSlot{consumer: n.consumer, host: n.host}
			j++
		default:
			p, n = prev[i], next[j]
			i, j = i+1, j+1
		}
		d := Decision{Kind: KindOwn, Consumer: p.consumer, Host: p.host}
		switch {
		case n.slots > p.slots:
			d.Rule, d.Slots = RuleOwnAssign, int64(n.slots-p.slots)
			ds = append(ds, d)
		case n.slots < p.slots:
			ds = append(ds, a.classifyLoss(d, p.slots-n.slots, budget)...)
		}
	}
	return ds
}

// classifyLoss names the rule of k slots of ownership lost on one host
// (decisions.md #93): own.trim when the host is down; own.drop when the
// consumer left the plan or no entry of it can cover the host any more;
// otherwise own.drop up to what the plan stopped giving the consumer
// (its previous covered slots above what its entries name), own.trim for
// the rest (a shrunken parent, a higher-ranked sibling).
func (a *assigner) classifyLoss(d Decision, k Slots, budget map[string]Slots) []Decision {
	h, up := a.upHost(d.Host)
	c, present := a.conIdx[d.Consumer]
	one := func(rule Rule, n Slots) Decision {
		d.Rule, d.Slots = rule, int64(n)
		return d
	}
	switch {
	case !up:
		return []Decision{one(RuleOwnTrim, k)}
	case !present || !a.covers(c, h):
		return []Decision{one(RuleOwnDrop, k)}
	}
	r, ok := budget[d.Consumer]
	if !ok {
		r = a.planCut(c)
	}
	drop := min(r, k)
	budget[d.Consumer] = r - drop
	var ds []Decision
	if drop > 0 {
		ds = append(ds, one(RuleOwnDrop, drop))
	}
	if k > drop {
		ds = append(ds, one(RuleOwnTrim, k-drop))
	}
	return ds
}

// covers reports whether an entry of c can own slots of host h.
func (a *assigner) covers(c, h int32) bool {
	for _, e := range a.cons[c].own {
		if e.Host == a.hosts[h].name || (e.Host == "" && e.Group == a.hosts[h].group) {
			return true
		}
	}
	return false
}

// planCut is what the plan stopped giving c: its previous slots on up
// hosts its entries cover, above the slots its entries name (a whole
// host counts its slots).
func (a *assigner) planCut(c int32) Slots {
	var named, held Slots
	for _, e := range a.cons[c].own {
		switch h, up := a.upHost(e.Host); {
		case e.WholeHost() && up:
			named = satAdd(named, a.hosts[h].slots)
		case e.WholeHost():
		default:
			named = satAdd(named, Slots(*e.Slots))
		}
	}
	for _, x := range a.prev[c] {
		if a.covers(c, x.h) {
			held += x.n
		}
	}
	return max(0, held-named)
}

func ownSlotLess(x, y ownSlot) bool {
	if x.consumer != y.consumer {
		return x.consumer < y.consumer
	}
	return x.host < y.host
}

// mergedOwnSlots reports whether rows are what mergeOwnSlots makes:
// strictly by (consumer, host), every one positive.
func mergedOwnSlots(rows []ownSlot) bool {
	for i, r := range rows {
		if r.slots <= 0 || (i > 0 && !ownSlotLess(rows[i-1], r)) {
			return false
		}
	}
	return true
}

// mergeOwnSlots sorts rows by (consumer, host) and sums duplicates.
func mergeOwnSlots(rows []ownSlot) []ownSlot {
	if mergedOwnSlots(rows) {
		return rows // the fold's assignment already is (read only)
	}
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(x, y ownSlot) int {
		if c := cmp.Compare(x.consumer, y.consumer); c != 0 {
			return c
		}
		return cmp.Compare(x.host, y.host)
	})
	out := rows[:0]
	for _, r := range rows {
		if r.slots <= 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].consumer == r.consumer && out[n-1].host == r.host {
			out[n-1].slots += r.slots
			continue
		}
		out = append(out, r)
	}
	return out
}
