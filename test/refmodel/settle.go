package refmodel

// Rules version 4 with ownership settles an event until its pool is at
// rest (docs/decisions.md #236, docs/rules.md "No input, no decision"):
// ruling 12 asks for a seating that makes its property hold should the
// rounds not, and the project settles by the fold. Read from that text
// alone; where it is open, decisions.md #237 says what the model reads.

import (
	"maps"
)

// maxSettles bounds the settles of one event (#236: "at most 16 settles
// in all"): a settle costs a fold of the pool.
const maxSettles = 16

// settleAt is a point of an event the settles may come back to: the
// decisions made before it and the pool as it was there.
type settleAt struct {
	decided  int    // len of the event's decisions there
	deciding int    // settles that decided before it
	pool     *Model // the pool there
}

// settle4 is what every event does after its input (#236's "settle"):
// trim the slots of down hosts, re-assign ownership (plan and host events
// only, docs/rules.md section 13: a further settle is a no-op event's),
// release what exceeds E, rebalance.
func (f *fold) settle4(reassign bool) {
	f.trim()
	if reassign {
		f.assign()
	}
	f.releaseExcess()
	f.rebalance4()
}

// settleToRest folds an event's settles under version 4 with ownership:
// the first one with f (its input applied, f.d derived and tracked), then,
// while a settle decides anything, again as a no-op event would, at most
// maxSettles in all. A settle that leaves every leaf's holding on every
// host as it was at an earlier point (the end of an earlier settle, or
// the event's start, read as the start of its first settle: after its
// input, #237), with no own decision since, ends the event at that point
// (its later decisions dropped); when more than one settle decided, the
// decisions are netted.
func (f *fold) settleToRest(reassign bool) {
	m := f.m
	points := []settleAt{{len(f.out), 0, m.clone()}}
	deciding := 0
	for n := 1; n <= maxSettles; n++ {
		before := len(f.out)
		if n == 1 {
			f.settle4(reassign)
		} else {
			g := &fold{m: m, seq: f.seq, at: f.at}
			g.d = m.derive()
			g.track()
			g.settle4(false)
			f.out = append(f.out, g.out...)
		}
		if len(f.out) == before {
			break // at rest
		}
		deciding++
		if p, ok := cameBack(points, f.out, m); ok {
			*m = *p.pool.clone()
			f.out = f.out[:p.decided]
			deciding = p.deciding
			break
		}
		points = append(points, settleAt{len(f.out), deciding, m.clone()})
	}
	if deciding > 1 {
		f.out = netted(f.out)
	}
}

// cameBack finds the earliest point whose holdings (leaf, host) the pool
// has again, with no own decision since.
func cameBack(points []settleAt, out []Decision, m *Model) (settleAt, bool) {
	now := m.HostAllocations()
	for _, p := range points {
		if !maps.EqualFunc(p.pool.HostAllocations(), now, maps.Equal) {
			continue
		}
		own := false
		for _, d := range out[p.decided:] {
			if d.Kind == "own" {
				own = true
				break
			}
		}
		if !own {
			return p, true
		}
	}
	return settleAt{}, false
}

// netted nets an event's decisions (#236) so they say where slots end:
// a leaf's release (no from) on a host cancels, slot for slot, its
// earlier grants and lends on that host (latest first); what remains
// cancels its later grants and lends on that host up to the first
// decision by which anyone else gains a slot there. Decisions left with
// no slots are removed.
func netted(ds []Decision) []Decision {
	out := make([]Decision, len(ds))
	copy(out, ds)
	isGain := func(d Decision) bool {
		switch d.Kind {
		case "grant", "lend", "reclaim", "return":
			return true
		}
		return false
	}
	for i := range out {
		r := &out[i]
		if r.Kind != "release" || r.From != "" || r.Slots <= 0 {
			continue
		}
		cancel := func(g *Decision) {
			if (g.Kind == "grant" || g.Kind == "lend") && g.Consumer == r.Consumer && g.Host == r.Host && g.Slots > 0 {
				n := min(g.Slots, r.Slots)
				g.Slots -= n
				r.Slots -= n
			}
		}
		for j := i - 1; j >= 0 && r.Slots > 0; j-- {
			cancel(&out[j])
		}
		for j := i + 1; j < len(out) && r.Slots > 0; j++ {
			g := &out[j]
			if g.Host == r.Host && g.Consumer != r.Consumer && isGain(*g) && g.Slots > 0 {
				break
			}
			cancel(g)
		}
	}
	kept := out[:0]
	for _, d := range out {
		if d.Slots != 0 {
			kept = append(kept, d)
		}
	}
	return kept
}
