package gen

import (
	"fmt"
	"slices"

	"github.com/cluster-ledger/ledger/events"
)

// OwnedBench is the shape of the ownership benchmarks (issue 10): a
// 3-level tree of n leaves, n/10 hosts of 20 slots, a third of the leaves
// owning 2 slots of their mid-level parent's host, the parents and
// top-level consumers owning those hosts whole. It returns the hosts'
// events, the plan's consumers (under rules v3 with the given policy)
// and the leaves in plan order.
func OwnedBench(n int) (hosts []events.Payload, consumers []events.Consumer, leaves []string) {
	f := 1
	for f*f*f < n {
		f++
	}
	idx := 0
	two := int64(2)
	for i := 0; i < f && len(leaves) < n; i++ {
		topAt := len(consumers)
		consumers = append(consumers, events.Consumer{Path: fmt.Sprintf("/t%02d", i)})
		for j := 0; j < f && len(leaves) < n; j++ {
			midAt := len(consumers)
			consumers = append(consumers, events.Consumer{Path: fmt.Sprintf("/t%02d/m%02d", i, j)})
			for k := 0; k < f && len(leaves) < n; k++ {
				share := int64(1 + (i+j+k)%4)
				c := events.Consumer{Path: fmt.Sprintf("/t%02d/m%02d/l%02d", i, j, k), Share: &share, Priority: int64(k % 3)}
				if idx%3 == 0 {
					h := fmt.Sprintf("h%05d", i*f+j) // one host per mid-level consumer
					c.Own = []events.OwnEntry{{Host: h, Slots: &two}}
					for _, at := range []int{midAt, topAt} {
						if !slices.ContainsFunc(consumers[at].Own, func(e events.OwnEntry) bool { return e.Host == h }) {
							consumers[at].Own = append(consumers[at].Own, events.OwnEntry{Host: h})
						}
					}
				}
				consumers = append(consumers, c)
				leaves = append(leaves, c.Path)
				idx++
			}
		}
	}
	for h := 0; h < max(1, n/10); h++ {
		hosts = append(hosts, &events.HostUp{Host: fmt.Sprintf("h%05d", h), Slots: 20})
	}
	return hosts, consumers, leaves
}

// OwnedGroups is the shape of ownership of group slots spread over every
// host (issue 25: the projector on a group-ownership stream): a 3-level
// tree of n leaves, every third leaf owning 3 slots of group default,
// their parents 12 (more when they have more than 12 leaves, room for
// their leaves' entries) and the top-level consumers 200 (or 80 more than
// their children), on max(50, n/20) hosts of 64 slots. Every owner's
// slots lie on many hosts, so the leaves' keeps compete for the owners'
// parts. It returns the hosts' events, the plan's consumers and the
// leaves in plan order.
func OwnedGroups(n int) (hosts []events.Payload, consumers []events.Consumer, leaves []string) {
	f := 1
	for f*f*f < n {
		f++
	}
	slots := func(v int64) *int64 { return &v }
	mid := max(12, 3*int64((f+2)/3))
	top := max(200, int64(f)*mid+80)
	for i := 0; i < f && len(leaves) < n; i++ {
		consumers = append(consumers, events.Consumer{Path: fmt.Sprintf("/t%02d", i), Own: []events.OwnEntry{{Group: "default", Slots: slots(top)}}})
		for j := 0; j < f && len(leaves) < n; j++ {
			consumers = append(consumers, events.Consumer{Path: fmt.Sprintf("/t%02d/m%02d", i, j), Own: []events.OwnEntry{{Group: "default", Slots: slots(mid)}}})
			for k := 0; k < f && len(leaves) < n; k++ {
				share := int64(1 + (i+j+k)%4)
				c := events.Consumer{Path: fmt.Sprintf("/t%02d/m%02d/l%02d", i, j, k), Share: &share, Priority: int64(k % 3)}
				if len(leaves)%3 == 0 {
					c.Own = []events.OwnEntry{{Group: "default", Slots: slots(3)}}
				}
				consumers = append(consumers, c)
				leaves = append(leaves, c.Path)
			}
		}
	}
	for h := range max(50, n/20) {
		hosts = append(hosts, &events.HostUp{Host: fmt.Sprintf("h%05d", h), Slots: 64})
	}
	return hosts, consumers, leaves
}
