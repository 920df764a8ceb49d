package domain

import "slices"

// The ownership assignment kept between runs (docs/decisions.md #116): a
// host event re-runs the assignment (ownership_assignment.go) on the same
// plan, and most sibling sets get exactly the input they had the run
// before. A sibling set's assignment (assignSiblings) is a function of:
//
//   - the plan (the consumers, their entries and ranks);
//   - the parent's slots (got[parent]);
//   - each sibling's previous slots (prev[s]);
//   - of the hosts it reads: the parent's hosts and those the siblings'
//     host entries name, whether each is up, its slots and its group, and,
//     when a sibling has a group entry, its workload (the group steps'
//     order).
//
// The keep remembers that input beside each set's output and, when the
// input is the same, takes the output instead of computing it: memoization
// of assignSiblings itself, so the run is the same program with some of its
// steps remembered (assignOwnership without a keep computes every set, and
// TestKeptAssignmentMatchesFull compares the two on random histories). The
// top-level set, which reads every host, is always computed. A new plan or
// a new host empties the keep.

// assignKeep is what the fold keeps of its last assignment run.
type assignKeep struct {
	plan    *ownPlan
	names   []string         // the input hosts' names, in input order
	order   []int32          // the input hosts' indexes by name
	hostIdx map[string]int32 // name -> position in name order
	// produced is the assignment the last run returned; got and outcomes
	// are its rows and outcomes by consumer.
	produced []ownSlot
	got      [][]hostSlots
	outcomes []ownOutcome
	sets     []setInput // by parent, what its siblings were assigned from
	reused   int        // sibling sets taken from the run before, in all
	// The arrays a run works in, lent to the next (lend): every
	// consumer's got and outcome is written in every run, so the next
	// run writes over the got of the run before last, and over the last
	// run's outcomes in place (a set taken from the run before keeps
	// them); the scratch is zero between sets.
	spareGot               [][]hostSlots
	reserved               [][]hostSlots
	served                 []bool
	avail, lowerPrev, mine []Slots
}

// setInput is what a sibling set was last assigned from.
type setInput struct {
	valid     bool
	parentGot []hostSlots
	prev      [][]hostSlots // by sibling, in rank order
	hosts     []hostMark    // the hosts the set reads
	groups    bool          // a sibling has a group entry: workloads count
}

// hostMark is what a set reads of a host.
type hostMark struct {
	h        int32
	down     bool
	slots    Slots
	group    string
	workload Slots
}

// begin readies the keep for a run on plan op over hosts; nil without a
// keep. A plan or a host list other than the last run's empties it.
func (k *assignKeep) begin(op *ownPlan, hosts []ownHost) *assignKeep {
	if k == nil {
		return nil
	}
	same := k.plan == op && len(k.names) == len(hosts)
	for i := 0; same && i < len(hosts); i++ {
		same = k.names[i] == hosts[i].name
	}
	if same {
		return k
	}
	*k = assignKeep{plan: op, names: make([]string, len(hosts)), order: hostsByName(hosts), hostIdx: make(map[string]int32, len(hosts))}
	for i, h := range hosts {
		k.names[i] = h.name
	}
	for i, j := range k.order {
		k.hostIdx[hosts[j].name] = int32(i)
	}
	return k
}

// holds reports whether previous is the assignment the last run made.
func (k *assignKeep) holds(previous []ownSlot) bool {
	if k.got == nil || len(previous) != len(k.produced) {
		return false
	}
	return len(previous) == 0 || &previous[0] == &k.produced[0]
}

// upRows is the last run's rows by consumer on the hosts still up.
func (k *assignKeep) upRows(hosts []ownHost) [][]hostSlots {
	prev := make([][]hostSlots, len(k.got))
	for c, rows := range k.got {
		prev[c] = rows
		for i, x := range rows {
			if hosts[x.h].down { // a copy without the hosts gone down
				up := slices.Clone(rows[:i])
				for _, y := range rows[i+1:] {
					if !hosts[y.h].down {
						up = append(up, y)
					}
				}
				prev[c] = up
				break
			}
		}
	}
	return prev
}

// reuse takes the set of parent's children from the last run when its
// input is the same, and reports whether it did.
func (k *assignKeep) reuse(a *assigner, parent int32) bool {
	if k == nil || k.sets == nil || !k.sets[parent].valid {
		return false
	}
	in := &k.sets[parent]
	sibs := a.kids[parent]
	if !slices.Equal(in.parentGot, a.got[parent]) {
		return false
	}
	for i, s := range sibs {
		if !slices.Equal(in.prev[i], a.prev[s]) {
			return false
		}
	}
	for _, m := range in.hosts {
		h := &a.hosts[m.h]
		if h.down != m.down || h.slots != m.slots || h.group != m.group || (in.groups && h.workload != m.workload) {
			return false
		}
	}
	for _, s := range sibs { // the outcomes are the last run's, in place
		a.got[s], a.served[s] = k.got[s], true
	}
	k.reused++
	return true
}

// record remembers the input the set of parent's children was just
// assigned from.
func (k *assignKeep) record(a *assigner, parent int32) {
	if k == nil || parent == int32(len(a.cons)) {
		return
	}
	if k.sets == nil {
		k.sets = make([]setInput, len(a.cons)+1)
	}
	sibs := a.kids[parent]
	in := setInput{valid: true, parentGot: a.got[parent], prev: make([][]hostSlots, len(sibs))}
	mark := func(h int32) {
		x := &a.hosts[h]
		in.hosts = append(in.hosts, hostMark{h: h, down: x.down, slots: x.slots, group: x.group, workload: x.workload})
	}
	for _, x := range a.got[parent] {
		mark(x.h)
	}
	for i, s := range sibs {
		in.prev[i] = a.prev[s]
		for _, e := range a.cons[s].own {
			if e.Host == "" {
				in.groups = true
			} else if h, ok := a.hostIdx[e.Host]; ok {
				mark(h)
			}
		}
	}
	k.sets[parent] = in
}

// lend gives a run on the kept plan and hosts the keep's arrays.
func (k *assignKeep) lend(a *assigner) {
	n, h := len(a.cons), len(a.hosts)
	if len(k.spareGot) != n || len(k.avail) != h {
		k.spareGot, k.reserved, k.served = make([][]hostSlots, n), make([][]hostSlots, n), make([]bool, n)
		k.avail, k.lowerPrev, k.mine = make([]Slots, h), make([]Slots, h), make([]Slots, h)
	}
	clear(k.served)
	a.got, a.outcomes, a.reserved, a.served = k.spareGot, k.outcomes, k.reserved, k.served
	a.avail, a.lowerPrev, a.mine = k.avail, k.lowerPrev, k.mine
}

// end keeps the run's output for the next.
func (k *assignKeep) end(a *assigner, assignment []ownSlot) {
	if k == nil {
		return
	}
	k.spareGot = k.got
	k.produced, k.got, k.outcomes = assignment, a.got, a.outcomes
	k.reserved = a.reserved
}
