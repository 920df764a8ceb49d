package refmodel

// A small reader of the scenario format (docs/scenarios.md) with the
// ownership fields of docs/rules.md#ownership, written for these tests
// from the specification: the refmodel does not use the project's
// parser.
// Expectations it adds for the ownership tests (the spec's format has
// allocations, decisions and rejected): a decision may name host, rule
// and deadline; `owned: {path: {host: slots}}` and `placed: {leaf: {host:
// slots}}` list every host of each consumer named.

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cluster-ledger/ledger/events"
)

type yScenario struct {
	Name  string         `yaml:"name"`
	Pool  string         `yaml:"pool"`
	Plan  yPlan          `yaml:"plan"`
	Hosts []yHost        `yaml:"hosts"`
	Steps []yStep        `yaml:"steps"`
	Extra map[string]any `yaml:",inline"`
}

type yPlan struct {
	Rules     int            `yaml:"rules"`
	Policy    yPolicy        `yaml:"policy"`
	Consumers []yConsumer    `yaml:"consumers"`
	Extra     map[string]any `yaml:",inline"`
}

type yPolicy struct {
	Reclaim              string         `yaml:"reclaim"`
	Enforcement          string         `yaml:"enforcement"`
	Preemption           *bool          `yaml:"preemption"`
	Balance              *bool          `yaml:"balance"`
	ReclaimForPreference *bool          `yaml:"reclaim_for_preference"`
	PriorityBands        any            `yaml:"priority_bands"` // rules 4; any: a non-boolean is refused, not a test error
	Extra                map[string]any `yaml:",inline"`
}

type yConsumer struct {
	Path         string         `yaml:"path"`
	Share        *int64         `yaml:"share"`
	Priority     int64          `yaml:"priority"`
	Max          any            `yaml:"max"`
	BorrowLimit  *int64         `yaml:"borrow_limit"`
	ReclaimGrace string         `yaml:"reclaim_grace"`
	LendGrace    string         `yaml:"lend_grace"`
	Own          []yaml.Node    `yaml:"own"`
	Lend         *bool          `yaml:"lend"`
	Preemptable  any            `yaml:"preemptable"` // rules 4
	Extra        map[string]any `yaml:",inline"`
}

type yHost struct {
	Name  string `yaml:"name"`
	Host  string `yaml:"host"`
	Group string `yaml:"group"`
	Slots int64  `yaml:"slots"`
}

type yStep struct {
	Name   string   `yaml:"name"`
	Events []yEvent `yaml:"events"`
	Expect struct {
		Allocations map[string]int64            `yaml:"allocations"`
		Decisions   []yDecision                 `yaml:"decisions"`
		Rejected    int                         `yaml:"rejected"`
		Owned       map[string]map[string]int64 `yaml:"owned"`
		Placed      map[string]map[string]int64 `yaml:"placed"`
	} `yaml:"expect"`
}

type yEvent struct {
	Type     string           `yaml:"type"`
	Demands  map[string]int64 `yaml:"demands"`
	Consumer string           `yaml:"consumer"`
	Slots    int64            `yaml:"slots"`
	Plan     *yPlan           `yaml:"plan"`
	Host     string           `yaml:"host"`
	Group    string           `yaml:"group"`
	Time     string           `yaml:"time"`
}

// yDecision is a decision expectation. Rule and Deadline are optional
// (rules-v4.md part C): a deadline is an offset from the time of the
// event that made the decision ("+30s"), null for none, or (the
// ownership files' comments, see ownscenarios_test.go) an RFC 3339 time.
type yDecision struct {
	Kind, Consumer, From, Host, Rule string
	Deadline                         yaml.Node
	Slots                            int64
}

func grace(s string) (*events.Duration, error) {
	if s == "" {
		return nil, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return nil, err
	}
	return &events.Duration{Duration: d}, nil
}

// toPlan converts a plan to the model's OwnedPlan. Errors here are the
// test's own (bad YAML in a test), not refusals.
func (p yPlan) toPlan() (*OwnedPlan, error) {
	if len(p.Extra) > 0 || len(p.Policy.Extra) > 0 {
		return nil, fmt.Errorf("unknown plan keys %v %v", p.Extra, p.Policy.Extra)
	}
	op := &OwnedPlan{Plan: events.Plan{Rules: p.Rules, Policy: events.Policy{Reclaim: p.Policy.Reclaim,
		Enforcement: p.Policy.Enforcement, Preemption: p.Policy.Preemption, Balance: p.Policy.Balance}},
		ReclaimForPreference: p.Policy.ReclaimForPreference}
	// rules 4's booleans: a value that is not one is what a strict
	// decoder refuses (malformed); the model is told so
	boolField := func(name string, v any) *bool {
		switch b := v.(type) {
		case nil:
			return nil
		case bool:
			return &b
		default:
			op.Malformed = append(op.Malformed, name)
			return nil
		}
	}
	op.PriorityBands = boolField("priority_bands", p.Policy.PriorityBands)
	for _, c := range p.Consumers {
		if len(c.Extra) > 0 {
			return nil, fmt.Errorf("%s: unknown keys %v", c.Path, c.Extra)
		}
		ec := events.Consumer{Path: c.Path, Share: c.Share, Priority: c.Priority, BorrowLimit: c.BorrowLimit}
		switch v := c.Max.(type) {
		case nil:
		case int:
			ec.Max = &events.Max{Slots: int64(v)}
		case string:
			var n int64
			if _, err := fmt.Sscanf(v, "%d%%", &n); err != nil {
				return nil, fmt.Errorf("max %q", v)
			}
			ec.Max = &events.Max{Percent: n, IsPercent: true}
		default:
			return nil, fmt.Errorf("max %v", v)
		}
		var err error
		if ec.ReclaimGrace, err = grace(c.ReclaimGrace); err != nil {
			return nil, err
		}
		if ec.LendGrace, err = grace(c.LendGrace); err != nil {
			return nil, err
		}
		op.Plan.Consumers = append(op.Plan.Consumers, ec)
		if c.Preemptable != nil {
			if op.Preemptable == nil {
				op.Preemptable = map[string]*bool{}
			}
			op.Preemptable[c.Path] = boolField(c.Path+": preemptable", c.Preemptable)
		}
		if c.Own == nil && c.Lend == nil {
			continue
		}
		o := Owner{Path: c.Path, Lend: c.Lend}
		for _, n := range c.Own {
			var raw map[string]any
			if err := n.Decode(&raw); err != nil {
				return nil, err
			}
			var e OwnEntry
			for k, v := range raw {
				switch k {
				case "host":
					e.Host = fmt.Sprint(v)
				case "group":
					e.Group = fmt.Sprint(v)
				case "slots":
					s := int64(v.(int))
					e.Slots = &s
				case "preference":
					s := int64(v.(int))
					e.Preference = &s
				default:
					e.Unknown = append(e.Unknown, k)
				}
			}
			o.Own = append(o.Own, e)
		}
		op.Owners = append(op.Owners, o)
	}
	return op, nil
}

type timed struct {
	p  events.Payload
	at time.Time // zero: one second after the previous event
}

func (e yEvent) toPayload() (timed, error) {
	var out timed
	if e.Time != "" {
		at, err := time.Parse(time.RFC3339, e.Time)
		if err != nil {
			return out, err
		}
		out.at = at
	}
	switch e.Type {
	case "demand":
		out.p = &events.Demand{Demands: e.Demands}
	case "release":
		out.p = &events.Release{Consumer: e.Consumer, Slots: e.Slots}
	case "plan":
		p, err := e.Plan.toPlan()
		if err != nil {
			return out, err
		}
		out.p = p
	case "host_down":
		out.p = &events.HostDown{Host: e.Host}
	case "host_up":
		out.p = &events.HostUp{Host: e.Host, Group: e.Group, Slots: e.Slots}
	default:
		return out, fmt.Errorf("event type %q", e.Type)
	}
	return out, nil
}

// matches reports whether decision x, made by an event at time at, is
// one d sums: kind, consumer and from, and host, rule and deadline where
// d names them (part C: the sum then runs per rule and deadline too).
func (d yDecision) matches(x Decision, at time.Time) bool {
	return d.Kind == x.Kind && d.Consumer == x.Consumer && d.From == x.From &&
		(d.Host == "" || d.Host == x.Host) && (d.Rule == "" || d.Rule == x.Rule) && d.deadlineMatches(x, at)
}

func (d yDecision) deadlineMatches(x Decision, at time.Time) bool {
	switch {
	case d.Deadline.Kind == 0: // not named
		return true
	case d.Deadline.Tag == "!!null":
		return x.Deadline.IsZero()
	case strings.HasPrefix(d.Deadline.Value, "+"):
		off, err := time.ParseDuration(d.Deadline.Value[1:])
		return err == nil && !x.Deadline.IsZero() && x.Deadline.Equal(at.Add(off))
	default:
		return d.Deadline.Value == x.Deadline.UTC().Format(time.RFC3339)
	}
}

// checkDeadlineSyntax fails the test on a deadline expectation that is
// neither null, an offset nor an RFC 3339 time (a typo must not match
// nothing silently).
func checkDeadlineSyntax(t *testing.T, d yDecision) {
	t.Helper()
	if d.Deadline.Kind == 0 || d.Deadline.Tag == "!!null" {
		return
	}
	if v := d.Deadline.Value; strings.HasPrefix(v, "+") {
		if _, err := time.ParseDuration(v[1:]); err != nil {
			t.Fatalf("deadline %q: %v", v, err)
		}
	} else if _, err := time.Parse(time.RFC3339, v); err != nil {
		t.Fatalf("deadline %q: neither +offset, null nor RFC 3339", v)
	}
}

// timedDecision is a decision and the time of the event that made it.
type timedDecision struct {
	Decision
	at time.Time
}

// runYAML folds a scenario like `ledger simulate` and checks every expect.
// It returns the model for further checks.
func runYAML(t *testing.T, src string) *Model {
	t.Helper()
	var sc yScenario
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&sc); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	if len(sc.Extra) > 0 {
		t.Fatalf("unknown scenario keys %v", sc.Extra)
	}
	m := New()
	switch sc.Plan.Rules {
	case rulesV3: // the project's ownership version: NewRules3
		m = NewRules3()
	case rulesV4:
		m = NewRules4()
	}
	var seq uint64
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Second)
	apply := func(e timed) ([]Decision, error) {
		next := at.Add(time.Second)
		if !e.at.IsZero() {
			next = e.at
		}
		ds, err := m.Apply(seq+1, next, e.p)
		if err == nil {
			seq++
			at = next
		}
		return ds, err
	}
	plan, err := sc.Plan.toPlan()
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if _, err := apply(timed{p: plan}); err != nil {
		t.Fatalf("plan refused: %v", err)
	}
	for _, h := range sc.Hosts {
		name := h.Name
		if name == "" {
			name = h.Host
		}
		if _, err := apply(timed{p: &events.HostUp{Host: name, Group: h.Group, Slots: h.Slots}}); err != nil {
			t.Fatalf("host %s: %v", name, err)
		}
	}
	for i, st := range sc.Steps {
		name := st.Name
		if name == "" {
			name = fmt.Sprintf("step %d", i+1)
		}
		var all []Decision
		var timedAll []timedDecision
		rejected := 0
		for _, ye := range st.Events {
			e, err := ye.toPayload()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if pc, ok := e.p.(*OwnedPlan); ok && pc.Plan.Rules == 0 && sc.Plan.Rules >= rulesV3 {
				// As the ledger stamps a plan naming no version: with
				// the version the scenario runs under (3 or 4).
				pc.Plan.Rules = sc.Plan.Rules
			}
			ds, err := apply(e)
			if err != nil {
				if errorsIsNotModelled(err) {
					t.Fatalf("%s: %v", name, err)
				}
				t.Logf("%s: refused: %v", name, err)
				rejected++
				continue
			}
			all = append(all, ds...)
			for _, d := range ds {
				timedAll = append(timedAll, timedDecision{d, at})
			}
		}
		t.Logf("%s: %s", name, fmtDecisions(all))
		if rejected != st.Expect.Rejected {
			t.Errorf("%s: rejected %d, want %d", name, rejected, st.Expect.Rejected)
		}
		got := m.Allocations()
		for path, want := range st.Expect.Allocations {
			var a int64
			for l, v := range got {
				if under(l, path) {
					a += v
				}
			}
			if a != want {
				t.Errorf("%s: A(%s) = %d, want %d (all: %v)", name, path, a, want, got)
			}
		}
		if st.Expect.Allocations != nil {
			for l, v := range got {
				if _, listed := st.Expect.Allocations[l]; !listed && v != 0 && !parentListed(l, st.Expect.Allocations) {
					t.Errorf("%s: unlisted leaf %s holds %d", name, l, v)
				}
			}
		}
		for _, want := range st.Expect.Decisions {
			checkDeadlineSyntax(t, want)
			var sum int64
			for _, d := range timedAll {
				if want.matches(d.Decision, d.at) {
					sum += d.Slots
				}
			}
			if sum != want.Slots {
				t.Errorf("%s: decisions %+v sum %d, want %d (all: %s)", name, want, sum, want.Slots, fmtDecisions(all))
			}
		}
		for c, hs := range st.Expect.Owned {
			if !equalHosts(m.own[c], hs) {
				t.Errorf("%s: %s owns %v, want %v", name, c, m.own[c], hs)
			}
		}
		for l, hs := range st.Expect.Placed {
			if !equalHosts(m.alloc[l], hs) {
				t.Errorf("%s: %s placed %v, want %v", name, l, m.alloc[l], hs)
			}
		}
		checkInvariants(t, name, m)
		checkOwnership(t, name, m, true)
	}
	return m
}

// balanced: share_ratio with balance, where the end state is the layered
// targets (priority and balance: false are checked by their own tests).
func balanced(m *Model) bool {
	return m.pol.reclaim == events.ReclaimShareRatio && m.pol.balance
}

func equalHosts(got, want map[string]int64) bool {
	for h, v := range got {
		if v != want[h] {
			return false
		}
	}
	for h, v := range want {
		if v != got[h] {
			return false
		}
	}
	return true
}

func fmtDecisions(ds []Decision) string {
	var s []string
	for _, d := range ds {
		x := fmt.Sprintf("%s %s", d.Kind, d.Consumer)
		if d.From != "" {
			x += " from " + d.From
		}
		x += fmt.Sprintf(" %s:%d %s", d.Host, d.Slots, d.Rule)
		if !d.Deadline.IsZero() {
			x += " until " + d.Deadline.UTC().Format(time.RFC3339)
		}
		s = append(s, x)
	}
	return strings.Join(s, "; ")
}

func loadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func errorsIsNotModelled(err error) bool { return errors.Is(err, ErrNotModelled) }

// checkOwnership checks the properties of
// docs/rules.md#ownership-properties that the state shows. Those
// about counts (every leaf at its layered target in share_ratio with
// preemption, owners at least at their own layer, a parent's private slots
// used outside only while its leaves are at their targets) fail the test
// with exact; without, it returns how many do not hold (the model's greedy
// placement can leave a leaf short: AMBIGUITIES.md, ownership 20). The
// others (ownership within hosts and parents, nobody on slots it may not
// borrow) always fail the test.
func checkOwnership(t *testing.T, name string, m *Model, exact bool) int {
	t.Helper()
	if !m.planned {
		return 0
	}
	for _, h := range m.hostNames() {
		var top int64
		for c, hs := range m.own {
			if hs[h] == 0 {
				continue
			}
			if !m.hosts[h].up {
				t.Errorf("%s: %s owns %d on down host %s", name, c, hs[h], h)
			}
			if parentOf(c) == root {
				top += hs[h]
			} else if hs[h] > m.own[parentOf(c)][h] {
				t.Errorf("%s: %s owns %d on %s, its parent %d", name, c, hs[h], h, m.own[parentOf(c)][h])
			}
		}
		if top > m.hosts[h].slots {
			t.Errorf("%s: %d owned on %s of %d slots", name, top, h, m.hosts[h].slots)
		}
		for p, v := range m.parts(h) {
			if v < 0 {
				t.Errorf("%s: children of %s own more than it on %s", name, p, h)
			}
		}
		at, _ := m.attribute(h)
		if m.pol.rules >= rulesV4 { // rules 4 seats (ruling 8), with its augmenting paths
			at = map[string]map[string]int64{}
			for l, ks := range m.seatKeeper() {
				for k, v := range ks {
					if k.host == h {
						if at[l] == nil {
							at[l] = map[string]int64{}
						}
						at[l][k.part] += v
					}
				}
			}
		}
		for l, ps := range at {
			for n, v := range ps {
				if v > 0 && m.tierOf(l, n) < 0 {
					t.Errorf("%s: %s holds %d slots of %s on %s, which it may not borrow", name, l, v, n, h)
				}
			}
		}
	}
	if !m.hasOwnership() {
		return 0
	}
	off := 0
	d := m.derive()
	ly := m.layered(d)
	// a slot privately owned by X is used outside X's subtree only while
	// no descendant of X with unmet demand could use it: in share_ratio,
	// while every leaf under X holds its layered target (the fold gives
	// X's pool to them first; below the target a leaf could use it)
	for _, h := range m.hostNames() {
		at, _ := m.attribute(h)
		for l, ps := range at {
			for x, v := range ps {
				if v == 0 || x == root || m.isLeaf(x) || under(l, x) {
					continue
				}
				for _, k := range m.leaves() {
					if under(k, x) && m.held(k) < ly.T[k] && m.pol.preemption && balanced(m) {
						off++
						if exact {
							t.Errorf("%s: %s holds %d of %s's slots on %s while %s (under it) is %d below target",
								name, l, v, x, h, k, ly.T[k]-m.held(k))
						}
					}
				}
			}
		}
	}
	for _, l := range m.leaves() {
		// Without preemption an owner whose room under a shared max is
		// held by others' share slots waits (AMBIGUITIES.md, ownership 22).
		if m.held(l) < ly.own[l] && (m.pol.preemption || (&fold{m: m, d: d}).headroom(l, "") > 0) {
			off++
			if exact {
				t.Errorf("%s: owner %s holds %d < its own layer %d", name, l, m.held(l), ly.own[l])
			}
		}
		if balanced(m) && m.pol.preemption && m.held(l) != ly.T[l] {
			off++
			if exact {
				t.Errorf("%s: %s holds %d, layered target %d", name, l, m.held(l), ly.T[l])
			}
		}
	}
	return off
}
