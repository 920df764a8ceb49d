package refmodel

// Ownership in the plan (docs/rules.md#ownership): the input types, their
// validation, and the assignment of ownership to concrete host slots.
// events.Plan does not carry these fields yet, so the model has its own plan
// payload, OwnedPlan, whose field names follow the spec; the lead maps events
// to it.

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

// ErrNotModelled: the plan combines ownership with a policy this model does
// not implement under rules versions 1 and 2 (reclaim: priority, or
// share_ratio with balance: false and preemption; version 3, NewRules3,
// implements both). The model is unchanged; a differential test skips the
// log.
var ErrNotModelled = errors.New("not modelled by the reference model")

// OwnedPlan is a plan event with the ownership fields of
// docs/rules.md#ownership: the
// policy's reclaim_for_preference, and per consumer `own` and `lend`
// (lend_grace and reclaim_grace are already in events.Consumer).
type OwnedPlan struct {
	Plan                 events.Plan
	ReclaimForPreference *bool
	Owners               []Owner
	// Part D of rules-v4.md, which events.Plan does not carry yet: the
	// policy's priority_bands, each consumer's preemptable by path, and
	// the fields a strict decoder saw with a value that is not a boolean
	// (any one refuses the plan, malformed).
	PriorityBands *bool
	Preemptable   map[string]*bool
	Malformed     []string
}

// EventType makes OwnedPlan a plan payload.
func (*OwnedPlan) EventType() events.Type { return events.TypePlan }

// Owner is the ownership part of one consumer of the plan, by path.
type Owner struct {
	Path string
	Own  []OwnEntry
	Lend *bool // default true
}

// OwnEntry is one `own` entry: exactly one of Host and Group; Slots is
// required with Group, optional with Host (absent: the whole host).
type OwnEntry struct {
	Host, Group string
	Slots       *int64
	Preference  *int64 // 1..10, default 5
	// Unknown lists keys the entry named that the spec does not know
	// (what a strict decoder would see); any one refuses the plan.
	Unknown []string
}

// ownEntry is a validated entry; slots 0 means "the whole host".
type ownEntry struct {
	host, group string
	slots       int64
	pref        int64
}

// ownedPlanOf reads a plan event: the ownership fields events.Plan now
// carries (a consumer's own and lend, the policy's
// reclaim_for_preference) become an OwnedPlan's. A plan naming none of
// them is an OwnedPlan without owners, as before.
func ownedPlanOf(pl events.Plan) *OwnedPlan {
	op := &OwnedPlan{Plan: pl, ReclaimForPreference: pl.Policy.ReclaimForPreference}
	for _, c := range pl.Consumers {
		if c.Own == nil && c.Lend == nil {
			continue
		}
		o := Owner{Path: c.Path, Lend: c.Lend}
		for _, e := range c.Own {
			o.Own = append(o.Own, OwnEntry{Host: e.Host, Group: e.Group, Slots: e.Slots, Preference: e.Preference})
		}
		op.Owners = append(op.Owners, o)
	}
	return op
}

// applyOwnership validates the ownership fields against the tree built by
// buildPlan and stores them in its nodes and policy.
func applyOwnership(nodes map[string]*node, pol *policy, op *OwnedPlan) error {
	pol.reclaimForPreference = op.ReclaimForPreference != nil && *op.ReclaimForPreference
	listed := map[string]bool{}
	for _, c := range op.Plan.Consumers {
		listed[c.Path] = true
	}
	seen := map[string]bool{}
	for _, o := range op.Owners {
		if !listed[o.Path] {
			return fmt.Errorf("%w: ownership for %q, which the plan does not list", ErrMalformedPlan, o.Path)
		}
		if seen[o.Path] {
			return fmt.Errorf("%w: ownership for %s given twice", ErrMalformedPlan, o.Path)
		}
		seen[o.Path] = true
		n := nodes[o.Path]
		if o.Lend != nil {
			n.lend = *o.Lend
		}
		hosts := map[string]bool{}
		for i, e := range o.Own {
			where := fmt.Sprintf("%s: own[%d]", o.Path, i)
			if len(e.Unknown) > 0 {
				return fmt.Errorf("%w: %s: unknown keys %v", ErrMalformedPlan, where, e.Unknown)
			}
			if (e.Host == "") == (e.Group == "") {
				return fmt.Errorf("%w: %s: exactly one of host and group", ErrMalformedPlan, where)
			}
			if e.Group != "" && e.Slots == nil {
				return fmt.Errorf("%w: %s: a group entry needs slots", ErrMalformedPlan, where)
			}
			var slots int64
			if e.Slots != nil {
				slots = *e.Slots
				if slots < 1 {
					return fmt.Errorf("%w: %s: slots %d not positive", ErrMalformedPlan, where, slots)
				}
				if slots > limitSlots {
					return fmt.Errorf("%w: %s: slots %d", ErrOverflow, where, slots)
				}
			}
			pref := int64(5)
			if e.Preference != nil {
				pref = *e.Preference
			}
			if pref < 1 || pref > 10 {
				return fmt.Errorf("%w: %s: preference %d outside 1..10", ErrMalformedPlan, where, pref)
			}
			if e.Host != "" {
				if hosts[e.Host] {
					return fmt.Errorf("%w: %s: host %s named twice", ErrMalformedPlan, where, e.Host)
				}
				hosts[e.Host] = true
			}
			n.own = append(n.own, ownEntry{host: e.Host, group: e.Group, slots: slots, pref: pref})
		}
	}
	return checkOwnTree(nodes)
}

// checkOwnTree refuses a child owning anything under a parent that owns
// nothing, and children that statically own more than their parent, per
// host and per group the parent names (docs/rules.md#ownership).
func checkOwnTree(nodes map[string]*node) error {
	var paths []string
	for p := range nodes {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		n := nodes[p]
		if p == root || len(n.own) == 0 {
			continue
		}
		if par := parentOf(p); par != root && len(nodes[par].own) == 0 {
			return fmt.Errorf("%w: %s owns resources, its parent %s owns none", ErrMalformedPlan, p, par)
		}
		// per host the parent names: a whole host is more than any count
		for _, pe := range n.own {
			if pe.host == "" {
				continue
			}
			var sum int64
			wholes, named := 0, 0
			for _, ch := range n.children {
				for _, ce := range nodes[ch].own {
					if ce.host != pe.host {
						continue
					}
					named++
					if ce.slots == 0 {
						wholes++
					}
					sum += ce.slots
				}
			}
			switch {
			case pe.slots == 0 && wholes > 0 && named > 1:
				return fmt.Errorf("%w: children of %s own more of host %s than all of it", ErrMalformedPlan, p, pe.host)
			case pe.slots > 0 && wholes > 0:
				return fmt.Errorf("%w: a child of %s owns all of host %s, %s owns %d slots of it", ErrMalformedPlan, p, pe.host, p, pe.slots)
			case pe.slots > 0 && sum > pe.slots:
				return fmt.Errorf("%w: children of %s own %d slots of host %s, %s owns %d", ErrMalformedPlan, p, sum, pe.host, p, pe.slots)
			}
		}
		// per group the parent names
		groups := map[string]int64{}
		for _, pe := range n.own {
			if pe.group != "" {
				groups[pe.group] += pe.slots
			}
		}
		for g, have := range groups {
			var sum int64
			for _, ch := range n.children {
				for _, ce := range nodes[ch].own {
					if ce.group == g {
						sum += ce.slots
					}
				}
			}
			if sum > have {
				return fmt.Errorf("%w: children of %s own %d slots of group %s, %s owns %d", ErrMalformedPlan, p, sum, g, p, have)
			}
		}
	}
	return nil
}

// hasOwnership reports whether the plan gives anyone ownership; a plan
// without it folds exactly as a pool without ownership.
func (m *Model) hasOwnership() bool {
	for _, n := range m.nodes {
		if len(n.own) > 0 {
			return true
		}
	}
	return false
}

// rankOrder sorts paths by rank: priority desc, then path.
func (m *Model) rankOrder(ps []string) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := m.nodes[ps[i]], m.nodes[ps[j]]
		if a.priority != b.priority {
			return a.priority > b.priority
		}
		return a.path < b.path
	})
}

// workload is the number of allocated slots on host h.
func (m *Model) workload(h string) int64 {
	var s int64
	for _, hs := range m.alloc {
		s += hs[h]
	}
	return s
}

// assign re-runs the assignment of ownership to host slots
// (docs/rules.md#assignment) and emits one `own` decision per changed
// (consumer, host).
func (f *fold) assign() {
	m := f.m
	prev := m.own
	next := map[string]map[string]int64{}
	pref := map[string]map[string]int64{}
	avail := map[string]int64{}
	for name, h := range m.hosts {
		if h.up {
			avail[name] = h.slots
		}
	}
	m.assignChildren(root, avail, prev, next, pref)
	var cs []string
	for c := range prev {
		cs = append(cs, c)
	}
	for c := range next {
		if _, ok := prev[c]; !ok {
			cs = append(cs, c)
		}
	}
	sort.Strings(cs)
	for _, c := range cs {
		cut := m.planCut(c, prev[c])
		var hs []string
		for h := range prev[c] {
			hs = append(hs, h)
		}
		for h := range next[c] {
			if _, ok := prev[c][h]; !ok {
				hs = append(hs, h)
			}
		}
		sort.Strings(hs)
		for _, h := range hs {
			delta := next[c][h] - prev[c][h]
			switch {
			case delta > 0:
				f.emit(Decision{Kind: "own", Consumer: c, Host: h, Slots: delta, Rule: "own.assign"})
			case delta < 0:
				// docs/decisions.md #93: on a host that is not up a loss
				// is own.trim; a consumer gone from the plan, or a host
				// none of its entries covers any more, own.drop;
				// otherwise the plan's cut is spent first (own.drop, hosts
				// by name), the rest own.trim (a parent or a
				// higher-ranked sibling took the slots)
				k := -delta
				switch {
				case !m.hosts[h].up:
					f.emit(Decision{Kind: "own", Consumer: c, Host: h, Slots: k, Rule: "own.trim"})
				case m.nodes[c] == nil || !m.covers(c, h):
					f.emit(Decision{Kind: "own", Consumer: c, Host: h, Slots: k, Rule: "own.drop"})
				default:
					if d := min(k, cut); d > 0 {
						f.emit(Decision{Kind: "own", Consumer: c, Host: h, Slots: d, Rule: "own.drop"})
						cut -= d
						k -= d
					}
					if k > 0 {
						f.emit(Decision{Kind: "own", Consumer: c, Host: h, Slots: k, Rule: "own.trim"})
					}
				}
			}
		}
	}
	m.own, m.ownPref = next, pref
}

// covers reports whether one of c's entries can cover host h: a host
// entry naming it, or a group entry naming its group (#93).
func (m *Model) covers(c, h string) bool {
	for _, e := range m.nodes[c].own {
		if e.host == h || (e.host == "" && e.group == m.hosts[h].group) {
			return true
		}
	}
	return false
}

// planCut is #93's plan's cut of consumer c: its previous owned slots on
// up hosts its entries cover, above what its entries now name (a whole
// host counting its slots when it is up, nothing when it is not; any other
// entry its N).
func (m *Model) planCut(c string, prev map[string]int64) int64 {
	n := m.nodes[c]
	if n == nil {
		return 0
	}
	var had, named int64
	for h, v := range prev {
		if m.hosts[h].up && m.covers(c, h) {
			had += v
		}
	}
	for _, e := range n.own {
		switch {
		case e.host != "" && e.slots == 0:
			if hh := m.hosts[e.host]; hh != nil && hh.up {
				named += hh.slots
			}
		default:
			named += e.slots
		}
	}
	return max(had-named, 0)
}

// assignChildren assigns ownership to the children of parent from avail
// (host -> slots): the up hosts for the root, the parent's own slots
// otherwise. Siblings are served by rank.
func (m *Model) assignChildren(parent string, avail map[string]int64, prev, next, pref map[string]map[string]int64) {
	kids := append([]string(nil), m.nodes[parent].children...)
	m.rankOrder(kids)
	rem := map[string]int64{}
	for h, v := range avail {
		rem[h] = v
	}
	for i, k := range kids {
		n := m.nodes[k]
		if len(n.own) == 0 {
			continue
		}
		lower := kids[i+1:]
		got := map[string]int64{}
		entries := append([]ownEntry(nil), n.own...)
		sort.SliceStable(entries, func(a, b int) bool { return entries[a].pref > entries[b].pref })
		take := func(h string, amt int64, p int64) {
			if amt <= 0 {
				return
			}
			got[h] += amt
			rem[h] -= amt
			if pref[k] == nil {
				pref[k] = map[string]int64{}
			}
			pref[k][h] = max(pref[k][h], p)
		}
		// Rules 4 (rules-v4.md ruling 6, a clarification the model's rules
		// 3 does not follow): a group entry never takes the slots a host
		// entry of the same consumer claims (the whole host, or N slots).
		claimed := map[string]int64{}
		if m.pol.rules >= rulesV4 {
			for _, e := range n.own {
				if e.host != "" {
					if e.slots == 0 {
						claimed[e.host] = inf
					} else {
						claimed[e.host] = addSat(claimed[e.host], e.slots)
					}
				}
			}
		}
		byHost := map[string]int64{} // what host entries took
		for _, e := range entries {
			if e.host != "" {
				amt := rem[e.host]
				if e.slots > 0 {
					amt = min(amt, e.slots)
				}
				take(e.host, amt, e.pref)
				byHost[e.host] += max(amt, 0)
				continue
			}
			// what a group entry may take of host h
			groupRem := func(h string) int64 {
				if c, ok := claimed[h]; ok {
					return max(0, rem[h]-max(0, c-byHost[h]))
				}
				return rem[h]
			}
			need := e.slots
			inGroup := func() []string {
				var hs []string
				for h := range rem {
					if groupRem(h) > 0 && m.hosts[h].group == e.group {
						hs = append(hs, h)
					}
				}
				sort.Strings(hs)
				return hs
			}
			byWorkload := func(hs []string) {
				sort.SliceStable(hs, func(a, b int) bool { return m.workload(hs[a]) < m.workload(hs[b]) })
			}
			// 1. what it was assigned before, most held first, then name
			hs := inGroup()
			// what k held before on h beyond what its host entries claim
			// there: under rules 4 the slots a host entry claims are that
			// entry's in every step (ruling 6), so they are not the group
			// entry's to come back to; counting them "hands the group
			// entry back the slots its host entry held, and ownership can
			// drift by one slot per event" (ruling 6's reason, #91;
			// decision #388). What the group entry took here so far is
			// got less what the host entries took.
			prevG := func(h string) int64 {
				if c, ok := claimed[h]; ok {
					return max(0, prev[k][h]-c)
				}
				return prev[k][h]
			}
			gotG := func(h string) int64 { return got[h] - byHost[h] }
			held := func(h string) int64 {
				if m.pol.rules >= rulesV4 { // only what the group entry may take
					return min(prevG(h), groupRem(h))
				}
				return prev[k][h]
			}
			sort.SliceStable(hs, func(a, b int) bool { return held(hs[a]) > held(hs[b]) })
			for _, h := range hs {
				amt := min(need, groupRem(h), max(0, prev[k][h]-got[h]))
				if m.pol.rules >= rulesV4 {
					amt = min(need, groupRem(h), max(0, prevG(h)-gotG(h)))
				}
				take(h, amt, e.pref)
				need -= max(amt, 0)
			}
			// 2. slots no sibling holds: least workload first, then name
			hs = inGroup()
			byWorkload(hs)
			for _, h := range hs {
				free := groupRem(h)
				for _, s := range lower {
					free -= prev[s][h]
				}
				amt := min(need, free)
				take(h, amt, e.pref)
				need -= max(amt, 0)
			}
			// 3. slots lower-ranked siblings held, lowest rank first
			for j := len(lower) - 1; j >= 0 && need > 0; j-- {
				hs = inGroup()
				byWorkload(hs)
				for _, h := range hs {
					amt := min(need, groupRem(h), prev[lower[j]][h])
					take(h, amt, e.pref)
					need -= max(amt, 0)
				}
			}
		}
		if m.asEngine[58] {
			// engine dispute 58: the engine's preference for a host is the
			// highest preference of the consumer's entries naming the host
			// or its group (docs/rules.md section 17, step 0), whichever
			// entry the assignment gave the host's slots
			for h := range got {
				for _, e := range n.own {
					if e.host == h || (e.group != "" && e.group == m.hosts[h].group) {
						pref[k][h] = max(pref[k][h], e.pref)
					}
				}
			}
		}
		if len(got) > 0 {
			next[k] = got
		}
		m.assignChildren(k, got, prev, next, pref)
	}
}

// graceOf returns a consumer's lend_grace and reclaim_grace.
func graceOf(c events.Consumer) (lend, reclaim time.Duration) {
	if c.LendGrace != nil {
		lend = c.LendGrace.Duration
	}
	if c.ReclaimGrace != nil {
		reclaim = c.ReclaimGrace.Duration
	}
	return lend, reclaim
}
