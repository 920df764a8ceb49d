package domain

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

var keptAssignRuns = flag.Int("keptassign.runs", 1500, "TestKeptAssignmentMatchesFull: random histories")

// TestKeptAssignmentMatchesFull: on random trees, hosts and histories of
// the events that re-run the assignment (hosts going down and up, in
// another group or with other slots, new hosts, workloads moving, plans
// changing priorities, and the same input again), the assignment run
// with the keep gives the same bytes, decisions and outcomes included, as
// the run without it over the up hosts alone, and as the run without it
// over every host with the down ones marked; and the keep does take sets
// from the run before.
func TestKeptAssignmentMatchesFull(t *testing.T) {
	runs := *keptAssignRuns
	if testing.Short() {
		runs = min(runs, 500)
	}
	steps, reused := 0, 0
	for seed := range uint64(runs) {
		r := rand.New(rand.NewPCG(seed, 4242))
		in := randOwnInput(r)
		hosts := slices.Clone(in.hosts) // the pool's: every host seen, in order of arrival
		consumers := in.consumers
		op := newOwnPlan(consumers)
		var keep assignKeep
		var prevKept, prevFull, prevMarked []ownSlot
		for step := range 16 {
			if step > 0 {
				hosts, consumers, op = mutateHistory(r, hosts, consumers, op)
			}
			var up []ownHost
			for _, h := range hosts {
				if !h.down {
					up = append(up, h)
				}
			}
			r.Shuffle(len(up), func(i, j int) { up[i], up[j] = up[j], up[i] })
			full := assignOwnership(ownInput{plan: op, hosts: up, previous: prevFull})
			marked := assignOwnership(ownInput{plan: op, hosts: hosts, previous: prevMarked})
			before := keep.reused
			kept := assignOwnership(ownInput{plan: op, hosts: hosts, previous: prevKept, keep: &keep})
			reused += keep.reused - before
			want := encodeOwn(full)
			for name, got := range map[string]string{"kept": encodeOwn(kept), "marked": encodeOwn(marked)} {
				if got != want {
					t.Fatalf("seed %d step %d: %s:\n%s\nwithout the keep over the up hosts:\n%s", seed, step, name, got, want)
				}
			}
			if kept.partial {
				if d := fmtRows(assignmentDiff(prevKept, kept.assignment)); d != fmtRows(assignmentDiff(kept.changedFrom, kept.changedTo)) {
					t.Fatalf("seed %d step %d: changed rows %s, the assignments differ in %s", seed, step, fmtRows(assignmentDiff(kept.changedFrom, kept.changedTo)), d)
				}
			}
			prevFull, prevMarked, prevKept = full.assignment, marked.assignment, kept.assignment
			steps++
		}
	}
	if reused*8 < steps { // a quarter of the runs take one (the small trees have few sets below the top)
		t.Fatalf("the keep took %d sibling sets from the run before in %d runs", reused, steps)
	}
	t.Logf("%d runs compared, %d sibling sets taken from the run before", steps, reused)
}

// mutateHistory changes the pool the way the events that re-run the
// assignment do.
func mutateHistory(r *rand.Rand, hosts []ownHost, consumers []ownConsumer, op *ownPlan) ([]ownHost, []ownConsumer, *ownPlan) {
	hosts = slices.Clone(hosts)
	switch r.IntN(6) {
	case 0: // a host goes down
		i := r.IntN(len(hosts))
		hosts[i].down = true
	case 1: // a host comes (back) up, maybe in another group, with other slots
		i := r.IntN(len(hosts))
		hosts[i].down = false
		if r.IntN(2) == 0 {
			hosts[i].group = fmt.Sprintf("g%d", r.IntN(3))
		}
		if r.IntN(2) == 0 {
			hosts[i].slots = Slots(1 + r.IntN(8))
		}
	case 2: // a new host
		name := fmt.Sprintf("h%02d", 20+r.IntN(10))
		if !slices.ContainsFunc(hosts, func(h ownHost) bool { return h.name == name }) {
			hosts = append(hosts, ownHost{name: name, group: fmt.Sprintf("g%d", r.IntN(3)), slots: Slots(1 + r.IntN(8))})
		}
	case 3: // workloads move
		for i := range hosts {
			if r.IntN(3) == 0 {
				hosts[i].workload = Slots(r.IntN(10))
			}
		}
	case 4: // a plan changes a priority
		if len(consumers) > 0 {
			consumers = slices.Clone(consumers)
			consumers[r.IntN(len(consumers))].priority = int64(r.IntN(3))
			op = newOwnPlan(consumers)
		}
	default: // the same input again
	}
	return hosts, consumers, op
}

// assignmentDiff is the rows of after that differ from before, and those
// of before that after no longer has (with 0 slots).
func assignmentDiff(before, after []ownSlot) []ownSlot {
	var out []ownSlot
	for _, c := range assignmentChanges(nil, before, after) {
		out = append(out, ownSlot{c.Consumer, c.Host, Slots(c.Slots)})
	}
	return out
}
