package domain

import "github.com/cluster-ledger/ledger/events"

// Result is everything one event did to its pool, as one value (in the
// spirit of etcd-io/raft's Ready): the edges learn from it what changed,
// never by comparing the pool's state before and after. Its first fields
// are in the order the effects happened and the order the hash chain
// digests them (Chain); Assignment and OwnershipMoved follow from them
// and are not digested, so they could be added without changing any
// link of a released history.
type Result struct {
	// Seq is the event's sequence.
	Seq uint64
	// Refused is the stable code of the refusal when the event was
	// refused (it then changed nothing and every other field is empty).
	Refused events.Code
	// Decisions are the allocation changes, in the order they were made.
	Decisions []Decision
	// All is set by plan and host events: every consumer and every host
	// may have changed, and Changed and Hosts list them all.
	All bool
	// Changed is the state after the event of every consumer it touched
	// (ancestors included; all of them when All), in path order.
	Changed []ConsumerState
	// Hosts is every host after the event, in registration order, when
	// All; nil otherwise.
	Hosts []HostState

	// Assignment is the rows of the ownership assignment the event
	// changed (plan and host events; their own decisions say why), by
	// consumer then host, with the slots owned after it (0: no longer
	// owned).
	Assignment []OwnedSlots
	// OwnershipMoved lists, in path order, every consumer whose
	// ownership figures (own used, lent out, a leaf's sources) the event
	// moved, those it did not touch included: slots re-seated on the
	// hosts the decisions name (ownership_figures.go). Nil with All (every figure
	// may have moved), and in a pool without ownership.
	OwnershipMoved []string
}

// ConsumerState is a consumer's state after an event: the hash chain
// covers every field but Leaf.
type ConsumerState struct {
	Path         string
	Leaf         bool
	Demand       int64
	Effective    int64
	Target       int64
	Allocated    int64
	WaitingSince uint64
	Holdings     []Holding
}

// Holding is a number of slots a leaf holds on one host.
type Holding struct {
	Host  string
	Slots int64
}

// HostState is the part of a host's state the hash chain covers.
type HostState struct {
	Name  string
	Slots int64
	Used  int64
}

// Refusal is the Result of an event refused with err: its code, nothing
// else.
func Refusal(seq uint64, err error) Result {
	return Result{Seq: seq, Refused: events.CodeOf(err)}
}

// Touched lists the consumers whose reportable state may have changed, in
// path order (the root excluded); nil with All.
func (r *Result) Touched() []string {
	if r.All {
		return nil
	}
	paths := make([]string, 0, len(r.Changed))
	for i := range r.Changed {
		if r.Changed[i].Path != "/" {
			paths = append(paths, r.Changed[i].Path)
		}
	}
	return paths
}

// result builds the Result of the event just folded.
func (p *Pool) result() Result {
	r := Result{Seq: p.seq, Decisions: append([]Decision(nil), p.decisions...), All: p.allTouch,
		Assignment: append([]OwnedSlots(nil), p.assigned...), OwnershipMoved: p.endFigures()}
	var ids []int32
	if p.allTouch {
		ids = make([]int32, 0, len(p.t.nodes)-1)
		for id := 1; id < len(p.t.nodes); id++ {
			ids = append(ids, int32(id))
		}
		r.Hosts = make([]HostState, len(p.hosts))
		for i, h := range p.hosts {
			r.Hosts[i] = HostState{Name: h.name, Slots: int64(h.slots), Used: int64(h.used)}
		}
	} else {
		ids = append(p.scratchIDs[:0], p.touched...)
		sortIDs(ids)
		p.scratchIDs = ids
	}
	r.Changed = make([]ConsumerState, len(ids))
	nh := 0
	for _, id := range ids {
		nh += len(p.t.nodes[id].holdings)
	}
	holdings := make([]Holding, 0, nh)
	for i, id := range ids {
		n := &p.t.nodes[id]
		start := len(holdings)
		for _, h := range n.holdings {
			holdings = append(holdings, Holding{Host: p.hosts[h.host].name, Slots: int64(h.slots)})
		}
		r.Changed[i] = ConsumerState{Path: n.path, Leaf: n.leaf, Demand: int64(n.demand), Effective: int64(n.eff),
			Target: int64(p.sh(id).target), Allocated: int64(n.alloc), WaitingSince: n.waitingSince,
			Holdings: holdings[start:len(holdings):len(holdings)]}
	}
	return r
}
