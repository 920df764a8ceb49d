package domain

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

// Event is one entry of a pool's log as the engine sees it: its sequence
// (the stream offset), the time the ledger stamped, and its payload.
type Event struct {
	Seq     uint64
	Time    time.Time
	Payload events.Payload
}

// Pool is the state of one pool: plan, hosts, demand and allocations. It
// is not safe for concurrent use; one goroutine owns a pool.
//
// Its fields are of three kinds, kept apart so that a reader knows what
// may change an answer: the state (poolState, with each leaf's demand,
// waiting-since and holdings in the tree's nodes), which Snapshot encodes
// and StateHash hashes; the memo (poolMemo), everything derived from the
// state and kept between events to save work, which Restore and Clone
// rebuild and which never changes an answer (TestKeptFoldMatchesFull
// folds every log with and without it); and one event's work (eventWork),
// reset by begin.
type Pool struct {
	poolState
	poolMemo
	eventWork

	// development: plans may name the rules version in development
	// (WithDevelopmentRules).
	development bool
	// fromScratch: the fold and the placement are computed from scratch at
	// every event, as when everything is dirty, never kept (the tests'
	// reference for the memo: TestKeptFoldMatchesFull folds each log both
	// ways and compares).
	fromScratch bool
}

// poolState is what the pool is: what Snapshot encodes, with the leaves'
// inputs (demand, waiting-since, holdings) in t's nodes.
type poolState struct {
	name       string
	seq        uint64
	now        time.Time
	hasPlan    bool
	plan       events.Plan
	rulesSince uint64 // sequence of the plan from which the pool's rules version holds
	hosts      []host
	// own is the ownership assignment (rules v3, ownership_fold.go), by
	// consumer path then host name.
	own []ownSlot
}

// poolMemo is derived from the state: the plan's tree, policy and digest,
// the figures of every node, and the fold's and the placement's caches.
type poolMemo struct {
	planDigest Hash // of plan, for StateHash
	policy     Policy
	mode       mode
	t          *tree
	hostByID   map[string]int32
	pub        layer // the public pool's figures (layer.go)

	ownIdx  ownIndex // the rows of own by consumer and by host
	layered layeredTargets
	// The host parts of the assignment (ownership_fold.go hostParts), kept until
	// the assignment or a host changes.
	parts      []hostPart
	partTot    ownTotals
	partsFresh bool
	partsGen   uint64      // counts the recomputations of parts
	sits       sitCache    // which part of each host the slots sit in (seating_cache.go)
	inc        incFold     // the layered fold kept between events (kept_fold.go)
	pk         placeKeep   // the placement kept beside it (kept_placement.go)
	partIdx    *partIndex  // the placement's index of parts
	figs       figureMoves // what a demand or release event moves of the ownership figures (ownership_figures.go)
	// ownPlanMemo: the assignment's view of the plan (ownPlanFor).
	ownPlanMemo ownPlanMemo
	// keptAssignment: the assignment's last run (kept_assignment.go).
	keptAssignment assignKeep
	// ownIDs: own by ids (ownRowIDs).
	ownIDs ownRowsByID
	// targetsDirty: share_ratio: some E changed since the last target pass.
	targetsDirty bool
	sp           splitter
}

// eventWork is one event's work and what it reports (Result).
type eventWork struct {
	decisions    []Decision
	assigned     []OwnedSlots // the rows of the assignment the event changed (Result.Assignment)
	touched      []int32
	allTouch     bool
	loweredE     []int32 // leaves whose E may have dropped below a
	dirtyTops    []int32 // top-level branches whose G or T must be recomputed
	dirtyAll     bool    // G or T of the whole tree must be recomputed
	keys         []qkey
	movedTargets []int32 // leaves whose target the share division moved (targets.go targetMoved)
	scratchIDs   []int32
	// seats: under rules 4's priority, the seating by rounds the event's
	// layered fold made (priority_seating.go); the placement reads who
	// sits where from it.
	seats *roundSeating
}

// PoolOption configures a pool made by NewPool or Restore.
type PoolOption func(*Pool)

// WithDevelopmentRules lets the pool's plans name the rules version in
// development (RulesDevelopment), which the ledger refuses at append and a
// projector without the option stops on: for simulations and tests of
// work in progress (ledger simulate --rules-development, ledger dev
// --rules-development).
func WithDevelopmentRules() PoolOption { return func(p *Pool) { p.development = true } }

// NewPool returns an empty pool: no plan, no hosts.
func NewPool(name string, opts ...PoolOption) *Pool {
	p := &Pool{poolState: poolState{name: name}, poolMemo: poolMemo{hostByID: map[string]int32{}}}
	p.t, _ = emptyTree()
	p.pub.q = newQueues()
	p.useShares(make([]shares, len(p.t.nodes)))
	for _, o := range opts {
		o(p)
	}
	return p
}

// options are the options the pool was made with, for its clones.
func (p *Pool) options() []PoolOption {
	if p.development {
		return []PoolOption{WithDevelopmentRules()}
	}
	return nil
}

func emptyTree() (*tree, error) {
	t := &tree{nodes: []node{{path: "/", parent: noNode, top: noNode, share: 1}}, byPath: map[string]int32{"/": 0}}
	return t, nil
}

// Name is the pool's name.
func (p *Pool) Name() string { return p.name }

// Seq is the sequence of the last event applied (refused events included).
func (p *Pool) Seq() uint64 { return p.seq }

// Time is the stamped time of the last event applied.
func (p *Pool) Time() time.Time { return p.now }

// Apply validates ev against the current state and folds it through the
// rules version the pool runs under, returning everything the event did as
// one Result. A refused event returns an error wrapping one of the Err*
// reasons and changes nothing, not even the sequence: the caller decides
// whether a refused event consumes its offset (the projector records it
// with Skip and chains Refusal(seq, err)).
func (p *Pool) Apply(ev Event) (Result, error) {
	if ev.Seq <= p.seq && p.seq != 0 {
		return Result{}, refuse(ErrSeqOrder, "event %d after %d", ev.Seq, p.seq)
	}
	newTree, err := p.validate(ev.Payload)
	if err != nil {
		return Result{}, err
	}
	p.begin(ev)
	ownedBefore := false // whether some consumer owned slots before a plan event (canonicalRows)
	if _, ok := ev.Payload.(*events.PlanChange); ok {
		ownedBefore = p.plan.OwnsAny()
	}
	switch e := ev.Payload.(type) {
	case *events.Demand:
		p.applyDemand(e)
	case *events.Release:
		p.applyRelease(e)
	case *events.PlanChange:
		p.applyPlan(e.Plan, newTree)
	case *events.HostUp:
		p.applyHostUp(e)
	case *events.HostDown:
		p.applyHostDown(e)
	}
	begin := len(p.decisions)
	p.settle()
	if p.mode.owned && p.mode.behaviour.foldToRest && len(p.decisions) > begin {
		p.settleToRest(begin)
	}
	// Under rules 4 mode.owned is "some consumer owns slots" (layerWhenOwning).
	if p.mode.behaviour.canonicalRows && (ownedBefore || p.mode.owned) {
		p.canonicalRows()
	}
	return p.result(), nil
}

// Skip records that the event at seq was refused, so the sequence moves on
// without any change of state.
func (p *Pool) Skip(seq uint64, at time.Time) {
	p.seq, p.now = seq, at
	p.decisions, p.touched, p.allTouch = p.decisions[:0], p.touched[:0], false
}

func (p *Pool) begin(ev Event) {
	p.seq, p.now = ev.Seq, ev.Time
	p.decisions = p.decisions[:0]
	p.touched = p.touched[:0]
	p.allTouch = false
	p.loweredE = p.loweredE[:0]
	p.dirtyTops = p.dirtyTops[:0]
	p.dirtyAll = false
	p.assigned = p.assigned[:0]
	switch ev.Payload.(type) {
	case *events.Demand, *events.Release: // neither hosts nor the assignment change
		p.beginFigures()
	case *events.HostUp, *events.HostDown: // the tree is the same: the kept fold and placement are brought to the new parts (reparts, placeKeep.carry)
		p.partsFresh = false
		p.figs.on = false
	default:
		p.partsFresh = false
		p.inc.ready, p.pk.ready = false, false
		p.figs.on = false
	}
}

// touch records that a consumer's reportable state changed in this event,
// with its ancestors.
func (p *Pool) touch(id int32) {
	for n := id; n != noNode; n = p.t.nodes[n].parent {
		nd := &p.t.nodes[n]
		if nd.touchedAt == p.seq {
			return
		}
		nd.touchedAt = p.seq
		p.touched = append(p.touched, n)
	}
}

// demandPaths lists a demand event's consumers in path order: map order
// must never reach an output.
func demandPaths(e *events.Demand) []string { return slices.Sorted(maps.Keys(e.Demands)) }

func (p *Pool) applyDemand(e *events.Demand) {
	for _, path := range demandPaths(e) {
		id, _ := p.t.lookup(path)
		p.setDemand(id, Slots(e.Demands[path]))
	}
}

func (p *Pool) applyRelease(e *events.Release) {
	id, _ := p.t.lookup(e.Consumer)
	k := Slots(e.Slots)
	p.releaseFrom(id, k, RuleReleaseFinished)
	p.setDemand(id, p.t.nodes[id].demand-k)
}

func (p *Pool) applyHostUp(e *events.HostUp) {
	group := e.Group
	if group == "" {
		group = "default"
	}
	if id, ok := p.hostByID[e.Host]; ok {
		h := &p.hosts[id]
		h.group, h.slots, h.up, h.used = group, Slots(e.Slots), true, 0
	} else {
		p.hostByID[e.Host] = int32(len(p.hosts))
		p.hosts = append(p.hosts, host{name: e.Host, group: group, slots: Slots(e.Slots), up: true})
	}
	p.pub.capacity += Slots(e.Slots)
	p.recomputeAll()
}

func (p *Pool) applyHostDown(e *events.HostDown) {
	h := &p.hosts[p.hostByID[e.Host]]
	h.up = false
	p.pub.capacity -= h.slots
	p.recomputeAll()
}

// setDemand sets a leaf's demand and carries the change of E up the tree.
func (p *Pool) setDemand(id int32, d Slots) {
	n := &p.t.nodes[id]
	delta := d - n.demand
	if delta == 0 {
		return
	}
	for a := id; a != noNode; a = p.t.nodes[a].parent {
		p.t.nodes[a].demand += delta
	}
	p.touch(id)
	p.setEff(id, minSlots(d, n.capChain))
}

// setEff sets a leaf's E and propagates the change of E to its ancestors
// (E(n) = min(max(n), sum of children's E)).
func (p *Pool) setEff(id int32, e Slots) {
	n := &p.t.nodes[id]
	if n.eff == e {
		return
	}
	unmet := n.eff - n.alloc
	if e < n.eff {
		p.loweredE = append(p.loweredE, id)
	}
	delta := e - n.eff
	n.eff = e
	p.noteUnmet(id, unmet)
	p.markDirty(id)
	p.inc.noteEff(id)
	for c := n.parent; c != noNode && delta != 0; c = p.t.nodes[c].parent {
		pn := &p.t.nodes[c]
		pn.childEff += delta
		newEff := minSlots(pn.maxCap, pn.childEff)
		delta = newEff - pn.eff
		pn.eff = newEff
	}
	p.refile(id)
}

// noteUnmet sets waiting-since when a leaf's unmet demand (E - a) rises
// from zero (decisions.md #10).
func (p *Pool) noteUnmet(id int32, before Slots) {
	n := &p.t.nodes[id]
	if before <= 0 && n.eff-n.alloc > 0 && n.waitingSince != p.seq {
		n.waitingSince = p.seq
		p.inc.noteEff(id) // priority's orders in the kept fold
	}
}

// markDirty notes that G or T of the leaf's branch must be recomputed.
func (p *Pool) markDirty(id int32) {
	if p.dirtyAll {
		return
	}
	if p.mode.shareRatio {
		p.markPath(id)
		p.dirtyAll = p.dirtyAll || (!p.mode.parent && p.t.hasMax)
		return
	}
	if p.mode.parent {
		top := p.t.nodes[id].top
		if !slices.Contains(p.dirtyTops, top) {
			p.dirtyTops = append(p.dirtyTops, top)
		}
	}
}

// addAlloc changes a leaf's allocation on one host by delta, keeping the
// sums of its ancestors, the host's use, the queues and waiting-since.
func (p *Pool) addAlloc(id, hostID int32, delta Slots) {
	n := &p.t.nodes[id]
	unmet := n.eff - n.alloc
	i, found := slices.BinarySearchFunc(n.holdings, hostID, func(h holding, id int32) int { return cmp.Compare(h.host, id) })
	if !found {
		n.holdings = slices.Insert(n.holdings, i, holding{host: hostID})
	}
	before := n.holdings[i].slots
	n.holdings[i].slots += delta
	p.sits.held(id, hostID, before, n.holdings[i].slots)
	p.pk.noteHeld(id)
	if n.holdings[i].slots == 0 {
		n.holdings = slices.Delete(n.holdings, i, i+1)
	}
	p.hosts[hostID].used += delta
	for a := id; a != noNode; a = p.t.nodes[a].parent {
		p.t.nodes[a].alloc += delta
	}
	p.noteUnmet(id, unmet)
	p.touch(id)
	if top := n.top; top != noNode {
		p.updateOverShare(top)
	}
	p.refile(id)
}

// updateOverShare keeps a top-level branch's "uses more than its planned
// share" flag, refiling its victims when it flips.
func (p *Pool) updateOverShare(top int32) {
	t, s := &p.t.nodes[top], p.sh(top)
	over := t.alloc > p.planned(top)
	if over == s.overShare {
		return
	}
	s.overShare = over
	if p.mode.shareRatio {
		return
	}
	for _, l := range p.t.leaves[t.lo:t.hi] {
		if p.sh(l).q.victim.in {
			p.refile(l)
		}
	}
}

func (p *Pool) emit(kind Kind, consumer, from int32, hostID int32, k Slots, rule Rule) {
	d := Decision{Seq: p.seq, Ordinal: len(p.decisions), Kind: kind, Consumer: p.t.nodes[consumer].path,
		Host: p.hosts[hostID].name, Slots: int64(k), Rule: rule}
	if from != noNode {
		d.From = p.t.nodes[from].path
		if kind == KindReclaim {
			dl := p.now.Add(p.t.nodes[from].reclaimGrace)
			d.Deadline = &dl
		}
	}
	p.decisions = append(p.decisions, d)
}

// sortIDs sorts node ids, which is path order.
func sortIDs(ids []int32) { slices.Sort(ids) }
