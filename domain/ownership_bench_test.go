package domain

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cluster-ledger/ledger/events"
)

// benchOwnInput builds 1,000 hosts of 16 slots in 10 groups and a tree
// of 10 top-level consumers, 30 children each and 33 leaves under each
// child (10,210 consumers), where 3,310 own something: every top-level
// consumer 1,200 slots of its group, every child 40 of them, and 10 of
// each child's leaves 4 (a group entry) or 2 slots of one host (a host
// entry, left to assignment). Workloads are random.
func benchOwnInput() ownInput {
	r := rand.New(rand.NewPCG(1, 2))
	var in ownInput
	for i := range 1000 {
		in.hosts = append(in.hosts, ownHost{name: fmt.Sprintf("h%04d", i), group: fmt.Sprintf("g%d", i%10), slots: 16, workload: Slots(r.IntN(17))})
	}
	n := func(v int64) *int64 { return &v }
	for t := range 10 {
		g := fmt.Sprintf("g%d", t)
		top := fmt.Sprintf("/t%d", t)
		in.consumers = append(in.consumers, ownConsumer{path: top, priority: int64(t % 3), own: []events.OwnEntry{{Group: g, Slots: n(1200)}}})
		for m := range 30 {
			mid := fmt.Sprintf("%s/m%02d", top, m)
			in.consumers = append(in.consumers, ownConsumer{path: mid, priority: int64(m % 4), own: []events.OwnEntry{{Group: g, Slots: n(40)}}})
			for l := range 33 {
				c := ownConsumer{path: fmt.Sprintf("%s/l%02d", mid, l), priority: int64(l % 5)}
				switch {
				case l < 5:
					c.own = []events.OwnEntry{{Group: g, Slots: n(4)}}
				case l < 10:
					c.own = []events.OwnEntry{{Host: fmt.Sprintf("h%04d", t+10*r.IntN(100)), Slots: n(2)}}
				}
				in.consumers = append(in.consumers, c)
			}
		}
	}
	return in
}

// BenchmarkOwnershipAssign: the first assignment (a plan event on a pool
// without previous ownership).
func BenchmarkOwnershipAssign(b *testing.B) {
	in := benchOwnInput()
	b.ResetTimer()
	for b.Loop() {
		assignOwnership(in)
	}
}

// BenchmarkOwnershipHostDown: re-assignment after a host goes down, from
// the previous assignment (a host_down event).
func BenchmarkOwnershipHostDown(b *testing.B) {
	in := benchOwnInput()
	in.previous = assignOwnership(in).assignment
	in.hosts = append(in.hosts[:500:500], in.hosts[501:]...)
	b.ResetTimer()
	for b.Loop() {
		res := assignOwnership(in)
		if len(res.decisions) == 0 {
			b.Fatal("a host down changed no ownership")
		}
	}
}

// BenchmarkOwnershipUnchanged: re-assignment that changes nothing (a
// host_up of a host nobody's entries can use, or a plan that keeps the
// ownership).
func BenchmarkOwnershipUnchanged(b *testing.B) {
	in := benchOwnInput()
	in.previous = assignOwnership(in).assignment
	b.ResetTimer()
	for b.Loop() {
		if res := assignOwnership(in); len(res.decisions) != 0 {
			b.Fatal("the same input changed ownership")
		}
	}
}
