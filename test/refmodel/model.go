// Package refmodel is an independent reference implementation of the
// allocation rules, docs/rules.md, written from the specification the project
// was given rather than from domain/ (the model, apportion, shares, the fold,
// both modes, placement, time, decisions, rules versions 1 and 2,
// share_ratio's `balance: false`; ownership, private pools, lending, grace
// classes and returns under share_ratio: ownership.go, layers.go,
// placement.go; and, under the project's rules version 3 (NewRules3),
// ownership under reclaim: priority, priority.go, and share_ratio's balance:
// false, balance.go) plus docs/decisions.md, used to cross-check the engine
// in domain/ by differential testing. Its readings of what the spec leaves
// open are in AMBIGUITIES.md. It is written for obviousness, not speed: every
// derived quantity is recomputed from scratch. Everything it needs comes from
// the events: the rules version and the policy are read from each plan (Rules
// reports the version in force).
package refmodel

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

const root = "/"

// Decision is one change of an allocation (docs/rules.md#decisions).
type Decision struct {
	Kind, Consumer, From, Host string
	Slots                      int64
	Rule                       string
	// Deadline (section 6): a `return` carries time + the lender's
	// lend_grace; a `reclaim` time + the victim's reclaim_grace (so the
	// event's own time when that grace is 0: "+0s", not none); under
	// rules 4 a `release.lend_revoked` time + the lender's lend_grace
	// (ruling 10) and a `release.moved` of a move time + the mover's
	// reclaim_grace (ruling 13). The zero time means none.
	Deadline time.Time
}

type node struct {
	path        string
	children    []string // sorted by path
	share       int64
	priority    int64
	max         *events.Max
	borrowLimit *int64
	depth       int
	// ownership (docs/rules.md#ownership); lend defaults to true
	own                     []ownEntry
	lend                    bool
	lendGrace, reclaimGrace time.Duration
	// preemptable (rules 4, D.1.1): false pins the leaf's allocation;
	// inherited, so this is the effective value.
	preemptable bool
}

type host struct {
	group string
	slots int64
	up    bool
}

// Model is the reference fold of one pool.
type Model struct {
	planned bool
	pol     policy
	nodes   map[string]*node // root included; never mutated once built
	hosts   map[string]*host
	demand  map[string]int64            // leaf -> d
	alloc   map[string]map[string]int64 // leaf -> host -> slots
	waiting map[string]bool             // leaf -> unmet demand > 0 at the last check
	since   map[string]uint64           // leaf -> waiting since
	own     map[string]map[string]int64 // consumer -> host -> owned slots assigned
	ownPref map[string]map[string]int64 // consumer -> host -> preference of its slots there
	// newest is the newest rules version the model accepts: 2 (New),
	// 3 (NewRules3) or 4 (NewRules4).
	newest int
	// asEngine holds the engine disputes (testdata/engine-disputes, by
	// number) on which the model folds as the engine does instead of as
	// the spec says (AsEngineOn): the differential test uses it to count
	// the logs that differ only by written-up disputes.
	asEngine map[int]bool
}

// New returns an empty model: no plan, no hosts.
func New() *Model {
	return &Model{hosts: map[string]*host{}, demand: map[string]int64{}, alloc: map[string]map[string]int64{},
		waiting: map[string]bool{}, since: map[string]uint64{}, own: map[string]map[string]int64{},
		ownPref: map[string]map[string]int64{}, newest: rulesV2}
}

// NewRules3 returns an empty model that also implements rules version 3,
// the project's version for ownership (docs/decisions.md #88; the spec
// itself has versions 1 and 2 only). Under version 3 the fold is version
// 2's, and ownership is folded under every policy: reclaim: priority
// (priority.go) and share_ratio's balance: false as well (AMBIGUITIES.md,
// ownership 23-33). New() stays a model of versions 1 and 2.
func NewRules3() *Model {
	m := New()
	m.newest = rulesV3
	return m
}

// NewRules4 returns an empty model that implements rules versions 1 to 4:
// version 4 is shared/spec/rules-v4.md (v4.go: ownership settled,
// seating.go: the seating, split.go: part D's fields). Versions 1 to 3
// fold as under NewRules3.
func NewRules4() *Model {
	m := New()
	m.newest = rulesV4
	return m
}

// AsEngineOn makes m fold as the engine does where engine dispute n
// (testdata/engine-disputes/NN-*.yaml) says the engine departs from the
// spec, so that a differential test can tell the logs that differ only by
// written-up disputes from the rest. It returns m. Disputes it folds the
// engine's way: 58 (an owner's preference for a host is the highest of its
// entries naming the host or its group, ownership.go assignChildren);
// dispute 1 was settled on the spec's side, docs/decisions.md #323.
func (m *Model) AsEngineOn(n ...int) *Model {
	if m.asEngine == nil {
		m.asEngine = map[int]bool{}
	}
	for _, d := range n {
		m.asEngine[d] = true
	}
	return m
}

func (m *Model) clone() *Model {
	c := New()
	c.planned, c.pol, c.nodes, c.newest, c.asEngine = m.planned, m.pol, m.nodes, m.newest, m.asEngine
	for k, h := range m.hosts {
		hh := *h
		c.hosts[k] = &hh
	}
	for k, v := range m.demand {
		c.demand[k] = v
	}
	for l, hs := range m.alloc {
		c.alloc[l] = map[string]int64{}
		for h, v := range hs {
			c.alloc[l][h] = v
		}
	}
	for k, v := range m.waiting {
		c.waiting[k] = v
	}
	for k, v := range m.since {
		c.since[k] = v
	}
	for _, pair := range [][2]map[string]map[string]int64{{m.own, c.own}, {m.ownPref, c.ownPref}} {
		for k, hs := range pair[0] {
			pair[1][k] = map[string]int64{}
			for h, v := range hs {
				pair[1][k][h] = v
			}
		}
	}
	return c
}

// ---------- tree helpers ----------

func (m *Model) isLeaf(p string) bool {
	n, ok := m.nodes[p]
	return ok && p != root && len(n.children) == 0
}

// leaves returns every leaf path in byte order.
func (m *Model) leaves() []string {
	var out []string
	for p := range m.nodes {
		if m.isLeaf(p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// under reports whether p is n or inside n's subtree.
func under(p, n string) bool {
	return n == root || p == n || strings.HasPrefix(p, n+"/")
}

// chain returns p and its ancestors, root excluded, nearest first.
func chain(p string) []string {
	var out []string
	for q := p; q != root; q = parentOf(q) {
		out = append(out, q)
	}
	return out
}

func topBranch(p string) string {
	c := chain(p)
	return c[len(c)-1]
}

// preorder lists every node, root first, children in path order.
func (m *Model) preorder() []string {
	var out []string
	var walk func(string)
	walk = func(p string) {
		out = append(out, p)
		for _, ch := range m.nodes[p].children {
			walk(ch)
		}
	}
	walk(root)
	return out
}

func (m *Model) held(l string) int64 {
	var s int64
	for _, v := range m.alloc[l] {
		s += v
	}
	return s
}

// allocOf is A(n): the sum of the allocations of the leaves of n's subtree.
func (m *Model) allocOf(n string) int64 {
	var s int64
	for _, l := range m.leaves() {
		if under(l, n) {
			s += m.held(l)
		}
	}
	return s
}

func (m *Model) capacity() int64 {
	var c int64
	for _, h := range m.hosts {
		if h.up {
			c += h.slots
		}
	}
	return c
}

func (m *Model) hostFree(name string) int64 {
	h := m.hosts[name]
	if !h.up {
		return 0
	}
	f := h.slots
	for _, hs := range m.alloc {
		f -= hs[name]
	}
	return f
}

func (m *Model) freeTotal() int64 {
	var f int64
	for name := range m.hosts {
		f += max(0, m.hostFree(name))
	}
	return f
}

// ---------- derived quantities (docs/rules.md#model, #shares) ----------

type derived struct {
	C    int64
	P    map[string]int64 // planned share
	maxS map[string]int64 // max in slots (inf when none)
	E    map[string]int64 // effective demand
	G    map[string]int64 // guarantee, priority mode (leaves)
	T    map[string]int64 // target, share_ratio mode (leaves; parents = sum of leaves)
}

func (m *Model) items(paths []string, caps func(string) int64) []item {
	var out []item
	for _, p := range paths {
		n := m.nodes[p]
		out = append(out, item{path: p, w: n.share, cap: caps(p), priority: n.priority})
	}
	return out
}

func noCap(string) int64 { return inf }

// split apportions q over paths and stores the results in dst.
func (m *Model) split(dst map[string]int64, q int64, paths []string, caps func(string) int64) {
	res := apportion(q, m.items(paths, caps))
	for i, p := range paths {
		dst[p] = res[i]
	}
}

func (m *Model) derive() *derived {
	d := &derived{C: m.capacity(), P: map[string]int64{}, maxS: map[string]int64{}, E: map[string]int64{},
		G: map[string]int64{}, T: map[string]int64{}}
	order := m.preorder()
	d.P[root] = d.C
	d.maxS[root] = inf
	for _, p := range order {
		for _, ch := range m.nodes[p].children {
			mx := m.nodes[ch].max
			switch {
			case mx == nil:
				d.maxS[ch] = inf
			case mx.IsPercent:
				d.maxS[ch] = d.P[p] * mx.Percent / 100
			default:
				d.maxS[ch] = mx.Slots
			}
		}
		if m.pol.rules >= rulesV4 {
			m.split4(d.P, d.P[p], m.nodes[p].children, nil, nil, nil, false)
		} else {
			m.split(d.P, d.P[p], m.nodes[p].children, noCap)
		}
	}
	// E: leaves min(d, own max, every ancestor's max); parents min(max, sum E children)
	for i := len(order) - 1; i >= 0; i-- {
		p := order[i]
		if m.isLeaf(p) {
			e := m.demand[p]
			for _, a := range chain(p) {
				e = min(e, d.maxS[a])
			}
			d.E[p] = e
			continue
		}
		var s int64
		for _, ch := range m.nodes[p].children {
			s += d.E[ch]
		}
		d.E[p] = min(d.maxS[p], s)
	}
	if m.pol.reclaim == events.ReclaimPriority {
		m.guarantees(d, order)
		return d
	}
	d.T = m.targets(d, d.E)
	return d
}

// rules4Split reports whether the pool's targets are rules 4's split
// (split.go): a rules-4 plan without ownership.
func (m *Model) rules4Split() bool {
	return m.pol.rules >= rulesV4 && !m.hasOwnership()
}

// childrenWith lists n's children with e > 0, in path order.
func (m *Model) childrenWith(e map[string]int64, n string) []string {
	var out []string
	for _, ch := range m.nodes[n].children {
		if e[ch] > 0 {
			out = append(out, ch)
		}
	}
	return out
}

// guarantees fills d.G, priority mode (docs/rules.md#shares).
func (m *Model) guarantees(d *derived, order []string) {
	if m.pol.enforcement == events.EnforcementLeaf {
		for _, l := range m.leaves() {
			d.G[l] = d.P[l]
		}
		return
	}
	// G(top-level) = P(top-level); inside a branch split like T over children with E > 0
	capE := func(p string) int64 { return d.E[p] }
	g := map[string]int64{}
	for _, p := range order {
		if p == root {
			continue
		}
		if parentOf(p) == root {
			g[p] = d.P[p]
		}
		m.split(g, g[p], m.childrenWith(d.E, p), capE) // children without demand keep 0
	}
	for _, l := range m.leaves() {
		d.G[l] = g[l]
	}
}

// targets is the target (docs/rules.md#shares) for the effective demands e
// (every node: leaves, and parents as min(max, sum of children)): d.E gives
// T, the balance:false reclaim demands give T0. It returns every node's
// target; a parent's is the sum of its leaves' (decisions.md #14).
func (m *Model) targets(d *derived, e map[string]int64) map[string]int64 {
	if m.rules4Split() {
		return m.targets4(d.C, e, d.P, m.floors4(d.P))
	}
	return m.targetsC(d.C, e)
}

// targetsC is targets for a capacity c: the layered fold divides each
// pool (of c slots) with it.
func (m *Model) targetsC(c int64, e map[string]int64) map[string]int64 {
	order := m.preorder()
	withE := func(p string) []string { return m.childrenWith(e, p) }
	capE := func(p string) int64 { return e[p] }
	t := map[string]int64{}
	if m.pol.enforcement == events.EnforcementParent {
		t[root] = c
		for _, p := range order {
			m.split(t, t[p], withE(p), capE)
		}
	} else {
		pdyn := map[string]int64{root: c}
		for _, p := range order {
			m.split(pdyn, pdyn[p], withE(p), noCap)
		}
		b := map[string]int64{}
		var resplit func(p string, q int64)
		resplit = func(p string, q int64) {
			kids := withE(p)
			res := apportion(q, m.items(kids, func(c string) int64 { return b[c] }))
			for i, ch := range kids {
				if res[i] < b[ch] && !m.isLeaf(ch) {
					resplit(ch, res[i])
				}
				b[ch] = res[i]
			}
		}
		for i := len(order) - 1; i >= 0; i-- { // bottom-up
			p := order[i]
			if m.isLeaf(p) {
				b[p] = min(e[p], pdyn[p])
				continue
			}
			var s int64
			for _, ch := range withE(p) {
				s += b[ch]
			}
			if s > e[p] {
				resplit(p, e[p])
				s = e[p]
			}
			b[p] = s
		}
		// surplus over branches with residual need E - B > 0
		u := map[string]int64{root: min(c, e[root]) - b[root]}
		for _, p := range order {
			var kids []string
			for _, ch := range m.nodes[p].children {
				if e[ch]-b[ch] > 0 {
					kids = append(kids, ch)
				}
			}
			m.split(u, u[p], kids, func(c string) int64 { return e[c] - b[c] })
		}
		for _, l := range m.leaves() {
			t[l] = b[l] + u[l]
		}
	}
	out := map[string]int64{}
	for _, p := range order { // leaf targets; a parent's T is the sum of its leaves'
		for _, l := range m.leaves() {
			if under(l, p) {
				out[p] += t[l]
			}
		}
	}
	return out
}

// ---------- public API ----------

// Apply validates and folds one event. A refused event returns a non-nil
// error and leaves the model unchanged.
func (m *Model) Apply(seq uint64, at time.Time, p events.Payload) ([]Decision, error) {
	c := m.clone()
	f, err := c.applyAt(seq, at, p)
	if err != nil {
		return nil, err
	}
	ownedBefore := m.hasOwnership()
	*m = *c
	if m.planned && m.pol.rules >= rulesV4 && (ownedBefore || m.hasOwnership()) {
		return canonicalOrder(f.out), nil
	}
	return f.out, nil
}

// Allocations returns every current leaf path and the slots it holds.
func (m *Model) Allocations() map[string]int64 {
	out := map[string]int64{}
	if !m.planned {
		return out
	}
	for _, l := range m.leaves() {
		out[l] = m.held(l)
	}
	return out
}

// HostAllocations returns leaf -> host -> slots, non-zero entries only.
func (m *Model) HostAllocations() map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	for l, hs := range m.alloc {
		for h, v := range hs {
			if v != 0 {
				if out[l] == nil {
					out[l] = map[string]int64{}
				}
				out[l][h] = v
			}
		}
	}
	return out
}

// Rules returns the rules version the pool runs under: the one of its last
// accepted plan (1 for a plan that names none), 0 before any plan.
func (m *Model) Rules() int {
	if !m.planned {
		return 0
	}
	return m.pol.rules
}

// Targets returns leaf -> G (priority mode) or T (share_ratio mode). Under
// `balance: false` it is still the full T, not the reclaim target T0.
func (m *Model) Targets() map[string]int64 {
	out := map[string]int64{}
	if !m.planned {
		return out
	}
	d := m.derive()
	for _, l := range m.leaves() {
		if m.pol.reclaim == events.ReclaimPriority {
			out[l] = d.G[l]
		} else {
			out[l] = d.T[l]
		}
	}
	return out
}

// ---------- the fold (docs/rules.md#fold, decisions.md #8) ----------

type fold struct {
	m   *Model
	d   *derived
	seq uint64
	at  time.Time // the event's time: decisions' deadlines use it
	ly  *layers   // the layered fold of this rebalance (ownership plans)
	out []Decision
	// Under balance:false, kept for the tests: the allocations when the
	// rebalance starts (a0), the reclaim targets T0 computed from them,
	// and the allocations after the reclaim phase, before leftover grants.
	a0, t0, afterReclaim map[string]int64
	// leftover: the second phase of balance: false with ownership
	// (balance.go): the pairing grants only, each leaf up to its T.
	leftover bool
	// players: the pools' layers of a priority fold with ownership.
	players []player
	// seat: the seating of a version 4 rebalance with ownership
	// (seating.go), kept as slots move; nil outside one.
	seat seats
	// reseat: the release works the seating out again after each host
	// (releaseV4, outside a rebalance)
	reseat bool
	// dry: under priority, pool4 seats a pool by its rounds and does not
	// divide it (ownExcessByRounds)
	dry bool
	// sat: under priority, the keeper seating after the own layer, whom
	// a pool's return takes its private part back from (v4priority.go)
	sat seats
	// free0: each host's free slots as a priority rebalance of version 4
	// starts (#320: the hosts a victim gives up first)
	free0 map[string]int64
	// revoked: the release.lend_revoked decisions (their index in out) of
	// holdings on a parent's private part, per (host, part), that a
	// descendant taking the part in the same rebalance turns into its
	// return (ruling 10; v4.go grantOn)
	revoked map[hp][]revokedAt
	// given: the parts a grant (kind grant) of this fold placed each
	// leaf's slots on, per (host, part): which part a compensation slot
	// is in for ruling 9's swap and #385's netting (grantPartFor)
	given map[string]map[hp]int64
	// kept: under share_ratio with balance, the sources holders at their
	// target keep beyond their dues, and the dues they leave (takeDues)
	kept keptDues
}

// revokedAt is one release of an ineligible holding: the holder and the
// index of its decision in the fold's out.
type revokedAt struct {
	from string
	idx  int
}

// applyAt folds one event of time at into m (a clone: Apply discards it
// on error) and returns the fold, whose out holds the decisions.
func (m *Model) applyAt(seq uint64, at time.Time, p events.Payload) (*fold, error) {
	f := &fold{m: m, seq: seq, at: at}
	reassign := false
	if e, ok := p.(*events.PlanChange); ok && e != nil { // a plan without ownership
		p = ownedPlanOf(e.Plan)
	}
	switch e := p.(type) {
	case *events.Demand:
		if e == nil {
			return nil, ErrBadPayload
		}
		if !m.planned {
			return nil, ErrNoPlan
		}
		if len(e.Demands) == 0 {
			return nil, ErrEmptyDemand
		}
		for path, v := range e.Demands {
			if err := m.checkLeaf(path); err != nil {
				return nil, err
			}
			if v < 0 {
				return nil, fmt.Errorf("%w: demand %s %d", ErrNegativeSlots, path, v)
			}
			if v > limitSlots {
				return nil, fmt.Errorf("%w: demand %s %d", ErrOverflow, path, v)
			}
		}
		for path, v := range e.Demands {
			m.demand[path] = v
		}
	case *events.Release:
		if e == nil {
			return nil, ErrBadPayload
		}
		if !m.planned {
			return nil, ErrNoPlan
		}
		if err := m.checkLeaf(e.Consumer); err != nil {
			return nil, err
		}
		if e.Slots < 0 {
			return nil, fmt.Errorf("%w: release %d", ErrNegativeSlots, e.Slots)
		}
		if e.Slots == 0 {
			return nil, fmt.Errorf("%w: release 0", ErrNonPositive)
		}
		if e.Slots > m.held(e.Consumer) {
			return nil, fmt.Errorf("%w: %s holds %d, releases %d", ErrReleaseTooMuch, e.Consumer, m.held(e.Consumer), e.Slots)
		}
		f.release(e.Consumer, e.Slots, "release.finished")
		m.demand[e.Consumer] -= e.Slots // demand >= held >= slots, so it stays >= 0
	case *OwnedPlan:
		if e == nil {
			return nil, ErrBadPayload
		}
		nodes, pol, err := buildPlanUpTo(e.Plan, m.newest)
		if err != nil {
			return nil, err
		}
		if err := applyOwnership(nodes, &pol, e); err != nil {
			return nil, err
		}
		if err := applyRules4(nodes, &pol, e); err != nil {
			return nil, err
		}
		if len(e.Owners) > 0 && pol.rules < rulesV3 && (pol.reclaim == events.ReclaimPriority || (!pol.balance && pol.preemption)) {
			for _, n := range nodes {
				if len(n.own) > 0 {
					return nil, fmt.Errorf("%w: ownership under reclaim %s, balance %v", ErrNotModelled, pol.reclaim, pol.balance)
				}
			}
		}
		reassign = true
		if m.planned {
			for _, l := range m.leaves() { // gone, or now a parent (decisions.md #16)
				if n, ok := nodes[l]; ok && len(n.children) == 0 {
					continue
				}
				if a := m.held(l); a > 0 {
					f.release(l, a, "release.consumer_removed")
				}
				delete(m.demand, l)
				delete(m.alloc, l)
				delete(m.waiting, l)
				delete(m.since, l)
			}
		}
		m.planned, m.nodes, m.pol = true, nodes, pol
	case *events.HostUp:
		if e == nil {
			return nil, ErrBadPayload
		}
		if e.Host == "" {
			return nil, fmt.Errorf("%w: empty host name", ErrBadHost)
		}
		if h, ok := m.hosts[e.Host]; ok && h.up {
			return nil, fmt.Errorf("%w: %s", ErrHostUp, e.Host)
		}
		if e.Slots < 0 {
			return nil, fmt.Errorf("%w: host %s slots %d", ErrNegativeSlots, e.Host, e.Slots)
		}
		if e.Slots == 0 {
			return nil, fmt.Errorf("%w: host %s slots 0", ErrNonPositive, e.Host)
		}
		if e.Slots > limitSlots || m.capacity()+e.Slots > limitSlots {
			return nil, fmt.Errorf("%w: host %s slots %d", ErrOverflow, e.Host, e.Slots)
		}
		g := e.Group
		if g == "" {
			g = "default"
		}
		m.hosts[e.Host] = &host{group: g, slots: e.Slots, up: true}
		reassign = true
	case *events.HostDown:
		if e == nil {
			return nil, ErrBadPayload
		}
		h, ok := m.hosts[e.Host]
		if !ok {
			return nil, fmt.Errorf("%w: %s", ErrUnknownHost, e.Host)
		}
		if !h.up {
			return nil, fmt.Errorf("%w: %s", ErrHostDown, e.Host)
		}
		h.up = false
		reassign = true
	default:
		return nil, fmt.Errorf("%w: %T", ErrBadPayload, p)
	}
	if !m.planned {
		return f, nil // host events before the first plan: nothing to fold
	}
	f.d = m.derive()
	f.track()
	if m.pol.rules == rulesV1 {
		// Version 1 (decisions.md #8), kept as released: excess is released
		// before the loss, so a host loss that shrank a percentage max can
		// cost a leaf twice.
		f.releaseExcess()
		f.trim()
		if reassign {
			f.assign()
		}
	} else if m.v4Owned() {
		// Version 4 with ownership settles until the pool is at rest
		// (#236); each settle is version 2's steps and the rebalance.
		f.settleToRest(reassign)
		// a move whose freed slots stay free is no move (#347, #364)
		f.cancelIdleMoves(0)
		if m.pol.preemption {
			f.reclaimsAsMoves(0) // ruling 7's move (decision 413)
		}
		f.dropEmpty(0)
		return f, nil
	} else {
		// Version 2 (docs/rules.md#fold): slots on down hosts are lost first;
		// the excess is measured after that loss. Ownership is re-assigned
		// after the loss (docs/rules.md#ownership-events), before the
		// release.
		f.trim()
		if reassign {
			f.assign()
		}
		f.releaseExcess()
	}
	if m.v4Owned() {
		f.rebalance4()
		return f, nil
	}
	if m.hasOwnership() {
		switch {
		case m.pol.reclaim == events.ReclaimPriority: // version 3 only
			f.priorityOwned()
		case !m.pol.balance && m.pol.preemption: // version 3 only
			f.layeredBalanceFalse()
		default:
			f.layeredRebalance()
		}
		return f, nil
	}
	if m.pol.reclaim == events.ReclaimShareRatio {
		f.shareRatio()
	} else {
		f.priority()
	}
	return f, nil
}

func (m *Model) checkLeaf(p string) error {
	if _, ok := m.nodes[p]; !ok || p == root {
		return fmt.Errorf("%w: %q", ErrUnknownConsumer, p)
	}
	if !m.isLeaf(p) {
		return fmt.Errorf("%w: %s", ErrNotLeaf, p)
	}
	return nil
}

// track updates waiting-since after every change (decisions.md #10).
func (f *fold) track() {
	m := f.m
	for _, l := range m.leaves() {
		if f.d.E[l]-m.held(l) > 0 {
			if !m.waiting[l] {
				m.waiting[l] = true
				m.since[l] = f.seq
			}
		} else {
			delete(m.waiting, l)
			delete(m.since, l)
		}
	}
}

// emit records d. A reclaim gets its deadline here, whoever made it:
// section 6, "A reclaim decision carries deadline = time + grace: the
// lender's lend_grace for a return of lent owned slots, otherwise the
// victim's reclaim_grace". A grace of 0 is a deadline at the event's
// time, not none (rules-v4.md part C writes it "+0s").
func (f *fold) emit(d Decision) {
	if d.Kind == "reclaim" && d.Deadline.IsZero() {
		d.Deadline = f.at.Add(f.m.nodes[d.From].reclaimGrace)
	}
	f.out = append(f.out, d)
}

// release takes slots from the host where l holds most, then name (decisions.md #15).
func (f *fold) release(l string, amt int64, rule string) {
	m := f.m
	if m.planned && m.v4Owned() {
		f.releaseV4(l, amt, rule)
		return
	}
	if m.hasOwnership() {
		f.releaseTiered(l, amt, rule)
		return
	}
	for amt > 0 {
		best := ""
		for h, v := range m.alloc[l] {
			if v > 0 && (best == "" || v > m.alloc[l][best] || (v == m.alloc[l][best] && h < best)) {
				best = h
			}
		}
		take := min(amt, m.alloc[l][best])
		m.alloc[l][best] -= take
		if m.alloc[l][best] == 0 {
			delete(m.alloc[l], best)
		}
		amt -= take
		f.emit(Decision{Kind: "release", Consumer: l, Host: best, Slots: take, Rule: rule})
	}
	if f.d != nil {
		f.track()
	}
}

// hostsByFree lists up hosts by most free slots, then name.
func (m *Model) hostsByFree() []string {
	var hs []string
	for name, h := range m.hosts {
		if h.up {
			hs = append(hs, name)
		}
	}
	sort.SliceStable(hs, func(i, j int) bool {
		fi, fj := m.hostFree(hs[i]), m.hostFree(hs[j])
		if fi != fj {
			return fi > fj
		}
		return hs[i] < hs[j]
	})
	return hs
}

// headroom is min(max(n) - A(n)) over the claimant and its ancestors; with a
// victim, only over those that are not also the victim's (decisions.md #13).
func (f *fold) headroom(c, victim string) int64 {
	h := inf
	for _, n := range chain(c) {
		if victim != "" && under(victim, n) {
			continue
		}
		h = min(h, f.d.maxS[n]-f.m.allocOf(n))
	}
	return h
}

// grant gives l up to want free slots; it returns what was granted.
func (f *fold) grant(l string, want int64, rule string) int64 {
	m := f.m
	if m.hasOwnership() {
		return f.grantTiered(l, want, rule, 0)
	}
	amt := min(want, m.freeTotal(), f.headroom(l, ""))
	if amt <= 0 {
		return 0
	}
	left := amt
	for _, h := range m.hostsByFree() {
		take := min(left, m.hostFree(h))
		if take <= 0 {
			continue
		}
		if m.alloc[l] == nil {
			m.alloc[l] = map[string]int64{}
		}
		m.alloc[l][h] += take
		left -= take
		f.emit(Decision{Kind: "grant", Consumer: l, Host: h, Slots: take, Rule: rule})
	}
	f.track()
	return amt
}

// move reclaims amt slots of victim v for claimant c, host by host in the
// claimant's preference order (decisions.md #15).
func (f *fold) move(c, v string, amt int64, rule string) {
	m := f.m
	if m.hasOwnership() {
		f.moveTiered(c, v, amt, rule)
		return
	}
	for _, h := range m.hostsByFree() {
		take := min(amt, m.alloc[v][h])
		if take <= 0 {
			continue
		}
		m.alloc[v][h] -= take
		if m.alloc[v][h] == 0 {
			delete(m.alloc[v], h)
		}
		if m.alloc[c] == nil {
			m.alloc[c] = map[string]int64{}
		}
		m.alloc[c][h] += take
		amt -= take
		f.emit(Decision{Kind: "reclaim", Consumer: c, From: v, Host: h, Slots: take, Rule: rule})
	}
	f.track()
}

// releaseExcess: leaves above E, then parents above max, deepest first
// (docs/rules.md#fold, #8, #9).
func (f *fold) releaseExcess() {
	m, d := f.m, f.d
	for _, l := range m.leaves() {
		if a := m.held(l); a > d.E[l] {
			rule := "release.max_lowered"
			if d.E[l] == m.demand[l] {
				rule = "release.demand_dropped"
			}
			f.release(l, a-d.E[l], rule)
		}
	}
	var parents []string
	for p, n := range m.nodes {
		if p != root && len(n.children) > 0 {
			parents = append(parents, p)
		}
	}
	sort.SliceStable(parents, func(i, j int) bool {
		a, b := m.nodes[parents[i]], m.nodes[parents[j]]
		if a.depth != b.depth {
			return a.depth > b.depth
		}
		return a.path < b.path
	})
	for _, p := range parents {
		excess := m.allocOf(p) - d.maxS[p]
		if excess <= 0 {
			continue
		}
		var ls []string
		for _, l := range m.leaves() {
			if under(l, p) {
				ls = append(ls, l)
			}
		}
		sort.SliceStable(ls, func(i, j int) bool {
			a, b := m.nodes[ls[i]], m.nodes[ls[j]]
			if a.priority != b.priority {
				return a.priority < b.priority // lowest priority first
			}
			if ha, hb := m.held(ls[i]), m.held(ls[j]); ha != hb {
				return ha > hb // then largest allocation
			}
			return ls[i] < ls[j]
		})
		for _, l := range ls {
			if give := min(excess, m.held(l)); give > 0 {
				f.release(l, give, "release.max")
				excess -= give
			}
		}
	}
}

// trim drops every slot still on a down host: hosts by name, leaves by path.
func (f *fold) trim() {
	m := f.m
	var down []string
	for name, h := range m.hosts {
		if !h.up {
			down = append(down, name)
		}
	}
	sort.Strings(down)
	for _, h := range down {
		for _, l := range m.leaves() {
			if v := m.alloc[l][h]; v > 0 {
				delete(m.alloc[l], h)
				f.emit(Decision{Kind: "trim", Consumer: l, Host: h, Slots: v, Rule: "trim.host_down"})
				f.track()
			}
		}
	}
}

// ---------- reclaim: priority ----------

func (f *fold) priority() {
	m, d := f.m, f.d
	entitledCap := func(l string) int64 { return min(d.E[l], d.G[l]) }
	entitledOrder := func() []string {
		var out []string
		for _, l := range m.leaves() {
			if m.held(l) < entitledCap(l) {
				out = append(out, l)
			}
		}
		sort.SliceStable(out, func(i, j int) bool {
			a, b := out[i], out[j]
			if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
				return pa > pb
			}
			if m.since[a] != m.since[b] {
				return m.since[a] < m.since[b]
			}
			return a < b
		})
		return out
	}
	// 1. free slots to entitled leaves
	for _, l := range entitledOrder() {
		f.grant(l, entitledCap(l)-m.held(l), "priority.entitled")
	}
	// 2. free slots to borrowers, first-come first-served, up to G + borrow_limit
	borrowCap := func(l string) int64 {
		bl := d.G[l]
		if b := m.nodes[l].borrowLimit; b != nil {
			bl = *b
		}
		return min(d.E[l], d.G[l]+bl)
	}
	var bor []string
	for _, l := range m.leaves() {
		if m.held(l) < borrowCap(l) {
			bor = append(bor, l)
		}
	}
	sort.SliceStable(bor, func(i, j int) bool {
		a, b := bor[i], bor[j]
		if m.since[a] != m.since[b] {
			return m.since[a] < m.since[b]
		}
		if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
			return pa > pb
		}
		return a < b
	})
	for _, l := range bor {
		f.grant(l, borrowCap(l)-m.held(l), "priority.borrow")
	}
	if !m.pol.preemption {
		return
	}
	// 3. entitled leaves still short reclaim from borrowers (decisions.md #12)
	for _, c := range entitledOrder() {
		need := entitledCap(c) - m.held(c)
		// The victim order is evaluated again before every take (decisions.md #12).
		for need > 0 {
			v, give := f.firstVictim(c, need)
			if give <= 0 {
				break
			}
			f.move(c, v, give, "priority.reclaim")
			need -= give
		}
	}
}

// firstVictim returns the first leaf in the victim order, on the current
// state, that can give claimant c something, and how much.
func (f *fold) firstVictim(c string, need int64) (string, int64) {
	m, d := f.m, f.d
	var victims []string
	for _, l := range m.leaves() {
		// a non-preemptable leaf (rules 4) is never a victim
		if l != c && m.held(l) > d.G[l] && m.nodes[l].preemptable {
			victims = append(victims, l)
		}
	}
	over := func(l string) bool { x := topBranch(l); return m.allocOf(x) > d.P[x] }
	sort.SliceStable(victims, func(i, j int) bool {
		a, b := victims[i], victims[j]
		if oa, ob := over(a), over(b); oa != ob {
			return oa // branch over its planned share first
		}
		if pa, pb := m.nodes[a].priority, m.nodes[b].priority; pa != pb {
			return pa < pb // lowest priority
		}
		if ba, bb := m.held(a)-d.G[a], m.held(b)-d.G[b]; ba != bb {
			return ba > bb // most borrowed
		}
		return a < b
	})
	for _, v := range victims {
		give := min(m.held(v)-d.G[v], need, f.headroom(c, v))
		if x := topBranch(v); m.pol.enforcement == events.EnforcementParent && x != topBranch(c) {
			give = min(give, m.allocOf(x)-min(d.P[x], d.E[x]))
		}
		if give > 0 {
			return v, give
		}
	}
	return "", 0
}

// ---------- reclaim: share_ratio ----------

func (f *fold) shareRatio() {
	m, d := f.m, f.d
	if m.rules4Split() && m.pol.pins {
		// the floors are taken from the allocations after the event's
		// releases and trims (rules-v4.md D.1.3), so T is computed now
		d.T = m.targets(d, d.E)
	}
	if m.pol.balance || !m.pol.preemption { // without reclaim, balance changes nothing
		f.pairing(d.T, m.pol.preemption)
		return
	}
	// balance:false (docs/rules.md#balance-false): reclaim
	// only up to T0, the targets of the demands capped at max(P, a), then
	// the free slots left go to leaves below T as with preemption:false.
	f.a0 = m.Allocations()
	f.t0 = m.targets(d, f.reclaimDemands())
	f.pairing(f.t0, true)
	f.afterReclaim = m.Allocations()
	f.pairing(d.T, false)
}

// reclaimDemands is the effective demand T0 is computed from: every leaf's
// E replaced by min(E, max(P, a)), with a its allocation now (when the
// rebalance starts) and P its static planned share; parents' E recomputed
// from those, capped by their max.
func (f *fold) reclaimDemands() map[string]int64 {
	m, d := f.m, f.d
	e := map[string]int64{}
	order := m.preorder()
	for i := len(order) - 1; i >= 0; i-- { // bottom-up
		p := order[i]
		if m.isLeaf(p) {
			e[p] = min(d.E[p], max(d.P[p], m.held(p)))
			continue
		}
		var s int64
		for _, ch := range m.nodes[p].children {
			s += e[ch]
		}
		e[p] = min(d.maxS[p], s)
	}
	return e
}

// pairing brings leaves below their target t up to it (the share_ratio
// pairing, docs/rules.md#share-ratio): claimants in order, each from free
// slots first, then, when reclaim is on, from the victims of the walk
// (leaves above t).
// t holds every node's target (a parent's is the sum of its leaves').
func (f *fold) pairing(t map[string]int64, reclaim bool) {
	m := f.m
	// claimants and victim walk computed once, from the state at this point (decisions.md #14)
	var claimants []string
	for _, l := range m.leaves() {
		if m.held(l) < t[l] {
			claimants = append(claimants, l)
		}
	}
	sort.SliceStable(claimants, func(i, j int) bool {
		a, b := claimants[i], claimants[j]
		na, nb := m.nodes[a], m.nodes[b]
		// (T-a)/share, largest first, compared by cross-multiplication
		// (a zero share, rules 4, after every positive one)
		if less, tie := claimRatio(t[a]-m.held(a), na.share).before(claimRatio(t[b]-m.held(b), nb.share)); !tie {
			return less
		}
		if na.priority != nb.priority {
			return na.priority > nb.priority
		}
		return a < b
	})
	var walk []string
	var visit func(p string)
	visit = func(p string) {
		kids := append([]string(nil), m.nodes[p].children...)
		sort.SliceStable(kids, func(i, j int) bool {
			a, b := m.nodes[kids[i]], m.nodes[kids[j]]
			// (A-T)/share, largest first (a zero share, rules 4: D.1.4)
			ra, rb := walkRatio(m.allocOf(a.path)-t[a.path], a.share), walkRatio(m.allocOf(b.path)-t[b.path], b.share)
			if less, tie := ra.before(rb); !tie {
				return less
			}
			if a.priority != b.priority {
				return a.priority < b.priority // lowest priority
			}
			return a.path < b.path
		})
		for _, ch := range kids {
			if m.isLeaf(ch) {
				if m.held(ch) > t[ch] {
					walk = append(walk, ch)
				}
			} else {
				visit(ch)
			}
		}
	}
	visit(root)
	for _, c := range claimants {
		need := t[c] - m.held(c)
		need -= f.grant(c, need, "share_ratio.grant")
		if !reclaim {
			continue
		}
		for _, v := range walk {
			if need <= 0 {
				break
			}
			if give := min(m.held(v)-t[v], need, f.headroom(c, v)); give > 0 {
				f.move(c, v, give, "share_ratio.reclaim")
				need -= give
			}
		}
	}
}
