package domain

import (
	"cmp"
	"slices"
)

// Rules 4 folds an event until its pool is at rest (ruling 12's property,
// docs/rules.md#no-input-no-decision, docs/decisions.md #236): an event
// that changes no input of the fold must decide nothing, so the state an
// event leaves must be one a further settle leaves alone. A settle
// (releases, trims, re-assignment, rebalance) is a function of the inputs
// and the holdings; repeating it within the event until it decides nothing
// gives such a state, and the decisions are then netted so they say where
// slots end, not how the settles got there.

// settle is what every event does after its input is applied: lose the
// slots of down hosts, re-assign ownership, release what exceeds E, and
// rebalance.
func (p *Pool) settle() {
	if p.mode.trimFirst {
		p.trimDownHosts()
		p.reassignOwnership()
		p.releaseExcess()
	} else {
		p.releaseExcess()
		p.trimDownHosts()
	}
	p.rebalance()
}

// restPasses bounds the settles of one event (foldToRest).
const restPasses = 16

// settleToRest settles again, as a no-op event would, until a settle
// decides nothing (rules 4, docs/decisions.md #236). begin is where the
// event's first settle started in p.decisions, after the event's input.
// After each settle that decides, should the decisions since some earlier
// point (a deciding settle's start, the first's included) change no
// holding and no ownership, the settles have come back to a state they
// reached: the event ends there and the decisions after it are dropped (a
// no-op event from that state comes back to it too, and decides nothing).
// When the event keeps the decisions of more than one settle, they are
// netted.
func (p *Pool) settleToRest(begin int) {
	marks := []int{begin, len(p.decisions)} // where each deciding settle's decisions start, and where the last ended
	kept := 1                               // deciding settles whose decisions the event keeps
	for pass := 2; pass <= restPasses; pass++ {
		n := len(p.decisions)
		p.settle()
		if len(p.decisions) == n {
			break
		}
		marks = append(marks, len(p.decisions))
		kept++
		if j := p.returnsTo(marks); j >= 0 {
			p.decisions = p.decisions[:marks[j]]
			kept = j
			break
		}
	}
	if kept > 1 {
		p.netDecisions()
	}
}

// returnsTo is the earliest mark j whose state the decisions since reached
// again: the decisions from marks[j] to the last mark change no holding
// and no ownership. -1 if none.
func (p *Pool) returnsTo(marks []int) int {
	end := marks[len(marks)-1]
	for j := 0; j < len(marks)-1; j++ {
		if p.changesNothing(p.decisions[marks[j]:end]) {
			return j
		}
	}
	return -1
}

// changesNothing reports whether ds, applied in turn, leave every leaf's
// holding on every host as it was and change no ownership.
func (p *Pool) changesNothing(ds []Decision) bool {
	type change struct {
		consumer, host string
		slots          int64
	}
	var cs []change
	for _, d := range ds {
		switch d.Kind {
		case KindOwn:
			return false
		case KindGrant, KindLend:
			cs = append(cs, change{d.Consumer, d.Host, d.Slots})
		case KindReclaim, KindReturn:
			cs = append(cs, change{d.Consumer, d.Host, d.Slots}, change{d.From, d.Host, -d.Slots})
		case KindRelease, KindTrim:
			cs = append(cs, change{d.Consumer, d.Host, -d.Slots})
		}
	}
	slices.SortFunc(cs, func(a, b change) int {
		return cmp.Or(cmp.Compare(a.consumer, b.consumer), cmp.Compare(a.host, b.host))
	})
	for i := 0; i < len(cs); {
		j, sum := i, int64(0)
		for ; j < len(cs) && cs[j].consumer == cs[i].consumer && cs[j].host == cs[i].host; j++ {
			sum += cs[j].slots
		}
		if sum != 0 {
			return false
		}
		i = j
	}
	return true
}

// netDecisions cancels, within the event, what a leaf lost on a host
// against what it gained there, so the decisions say where slots end, not
// how the passes got there:
//   - a release against an earlier grant or lend of the same leaf on the
//     same host (placed by one pass, moved by the next): cancelling a gain
//     before its release only lowers the leaf's holding between the two,
//     so no prefix of the decisions overfills the host;
//   - a release against a later grant or lend of the same leaf on the same
//     host when nobody gains on that host in between (a slot that changes
//     only the part of the host it sits in changes no holding).
func (p *Pool) netDecisions() {
	ds := p.decisions
	gains := func(d *Decision) bool {
		return d.Kind == KindGrant || d.Kind == KindLend || d.Kind == KindReclaim || d.Kind == KindReturn
	}
	for j := range ds {
		if ds[j].Kind != KindRelease || ds[j].From != "" {
			continue
		}
		for i := j - 1; i >= 0 && ds[j].Slots > 0; i-- {
			if (ds[i].Kind == KindGrant || ds[i].Kind == KindLend) && ds[i].Consumer == ds[j].Consumer && ds[i].Host == ds[j].Host && ds[i].Slots > 0 {
				m := min(ds[i].Slots, ds[j].Slots)
				ds[i].Slots -= m
				ds[j].Slots -= m
			}
		}
		for k := j + 1; k < len(ds) && ds[j].Slots > 0; k++ {
			if ds[k].Host != ds[j].Host || ds[k].Slots == 0 || !gains(&ds[k]) {
				continue
			}
			if ds[k].Consumer != ds[j].Consumer || (ds[k].Kind != KindGrant && ds[k].Kind != KindLend) {
				break // someone else gains on the host: the released slot may be theirs
			}
			m := min(ds[k].Slots, ds[j].Slots)
			ds[k].Slots -= m
			ds[j].Slots -= m
		}
	}
	out := ds[:0]
	for _, d := range ds {
		if d.Slots > 0 || d.Kind == KindOwn {
			d.Ordinal = len(out)
			out = append(out, d)
		}
	}
	p.decisions = out
}
