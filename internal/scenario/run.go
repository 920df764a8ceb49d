package scenario

import (
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
)

// StepResult is the outcome of one step folded in memory.
type StepResult struct {
	Step      int                   `json:"step"`
	Policy    domain.Policy         `json:"policy"`
	Name      string                `json:"name,omitempty"`
	Consumers []domain.ConsumerView `json:"consumers"`
	// Ownership is the ownership assignment after the step (which slots
	// of which host each consumer owns); absent in a pool without
	// ownership. The consumers' owned, own_used, lent_out and sources
	// say how it is used.
	Ownership []domain.OwnedSlots `json:"ownership,omitempty"`
	Decisions []domain.Decision   `json:"decisions"`
	Refusals  []string            `json:"refusals,omitempty"`
	Diffs     []string            `json:"diffs,omitempty"`
}

// Result is a whole scenario folded in memory.
type Result struct {
	File   string        `json:"file"`
	Name   string        `json:"name"`
	Setup  []string      `json:"setup_refusals,omitempty"`
	Steps  []StepResult  `json:"steps"`
	Policy domain.Policy `json:"policy"`
}

// Failed reports whether any expectation failed or the setup was refused.
func (r *Result) Failed() bool {
	if len(r.Setup) > 0 {
		return true
	}
	for _, s := range r.Steps {
		if len(s.Diffs) > 0 {
			return true
		}
	}
	return false
}

// Timeline assigns times and sequences to a scenario's events: the plan,
// then the hosts, then every step's events; one second apart unless an
// event gives its own time. Refused events do not take a sequence.
type Timeline struct {
	next time.Time
	seq  uint64
}

// NewTimeline starts at Epoch.
func NewTimeline() *Timeline { return &Timeline{next: Epoch} }

// At returns the time of the next event.
func (t *Timeline) At(given *time.Time) time.Time {
	at := t.next
	if given != nil {
		at = given.UTC()
	}
	t.next = at.Add(time.Second)
	return at
}

// Setup returns the plan and host events that precede step 1.
func (s *Scenario) Setup() []Event {
	evs := []Event{{Payload: &events.PlanChange{Plan: s.Plan}}}
	for i := range s.Hosts {
		evs = append(evs, Event{Payload: &s.Hosts[i]})
	}
	return evs
}

// Events is every event of the scenario in the order it is folded: the
// setup, then each step's events.
func (s *Scenario) Events() []Event {
	evs := s.Setup()
	for _, st := range s.Steps {
		evs = append(evs, st.Events...)
	}
	return evs
}

// RunOption changes how Run folds a scenario.
type RunOption func(*runConfig)

type runConfig struct {
	pool  []domain.PoolOption
	rules domain.RulesVersion // stamped on a plan that names none
}

// WithDevelopmentRules folds under the rules version in development
// (domain.RulesDevelopment), which the service does not accept without
// its own development switch: plans may name it, and a plan that names no
// version runs under it.
func WithDevelopmentRules() RunOption {
	return func(c *runConfig) {
		c.pool = append(c.pool, domain.WithDevelopmentRules())
		c.rules = domain.RulesDevelopment
	}
}

// Run folds the scenario in memory with the engine, as the service would:
// a plan that names no rules version runs under the newest (with
// WithDevelopmentRules, the version in development).
func Run(s *Scenario, opts ...RunOption) *Result {
	cfg := runConfig{rules: domain.RulesNewest}
	for _, o := range opts {
		o(&cfg)
	}
	pool := domain.NewPool(s.Pool, cfg.pool...)
	tl := NewTimeline()
	res := &Result{File: s.File, Name: s.Name}
	times := map[uint64]time.Time{}
	apply := func(ev Event) ([]domain.Decision, error) {
		at := tl.At(ev.Time)
		if u, ok := ev.Payload.(*Undecodable); ok {
			return nil, u.Err
		}
		r, err := pool.Apply(domain.Event{Seq: tl.seq + 1, Time: at, Payload: domain.StampRulesAs(ev.Payload, cfg.rules)})
		if err == nil {
			tl.seq++
			times[tl.seq] = at
		}
		return r.Decisions, err
	}
	for _, ev := range s.Setup() {
		if _, err := apply(ev); err != nil {
			res.Setup = append(res.Setup, err.Error())
		}
	}
	for i, st := range s.Steps {
		sr := StepResult{Step: i + 1, Name: st.Name, Decisions: []domain.Decision{}}
		for _, ev := range st.Events {
			ds, err := apply(ev)
			if err != nil {
				sr.Refusals = append(sr.Refusals, err.Error())
				continue
			}
			sr.Decisions = append(sr.Decisions, ds...)
		}
		sr.Consumers = pool.Consumers()
		sr.Ownership = pool.Ownership()
		sr.Policy = pool.Policy()
		obs := Observe(sr.Consumers, sr.Decisions, len(sr.Refusals))
		obs.Times = times
		sr.Diffs = st.Expect.Check(obs)
		res.Steps = append(res.Steps, sr)
	}
	return res
}

// HasOwnership reports whether the step's pool folds with ownership: its
// leaves' views say where their slots come from.
func (sr *StepResult) HasOwnership() bool {
	for i := range sr.Consumers {
		if sr.Consumers[i].Leaf && sr.Consumers[i].Sources != nil {
			return true
		}
	}
	return len(sr.Ownership) > 0
}

// Observe turns consumer views and decisions into what Check compares.
func Observe(cs []domain.ConsumerView, ds []domain.Decision, rejected int) Observed {
	o := Observed{Allocated: map[string]int64{}, Decisions: ds, Rejected: rejected}
	for _, c := range cs {
		o.Allocated[c.Path] = c.Allocated
		if c.Leaf {
			o.Leaves = append(o.Leaves, c.Path)
		}
	}
	return o
}
