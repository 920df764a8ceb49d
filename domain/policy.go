package domain

import "github.com/cluster-ledger/ledger/events"

// mode is the pool's policy and rules version, resolved once when a plan
// is applied: the fold branches on these flags and never compares policy
// strings or version numbers.
type mode struct {
	shareRatio bool // reclaim: share_ratio; otherwise priority
	parent     bool // enforcement: parent; otherwise leaf
	preempt    bool // preemption: reclaim is allowed
	balance    bool // share_ratio: reclaim may lift a consumer above its planned share
	owned      bool // the plan names ownership: the fold is layered (ownership_fold.go)
	bands      bool // rules 4, share_ratio: priority bands order the splits (split.go)
	behaviour       // what the pool's rules version changes
}

func modeOf(plan events.Plan) mode {
	pol := plan.Policy
	return mode{
		shareRatio: pol.ReclaimOrDefault() == events.ReclaimShareRatio,
		parent:     pol.EnforcementOrDefault() == events.EnforcementParent,
		preempt:    pol.PreemptionOrDefault(),
		balance:    pol.BalanceOrDefault(),
		owned:      ownedOf(plan, behaviourOf(RulesOf(plan))),
		bands:      behaviourOf(RulesOf(plan)).yarn && pol.PriorityBandsOrDefault() && pol.ReclaimOrDefault() == events.ReclaimShareRatio,
		behaviour:  behaviourOf(RulesOf(plan)),
	}
}

// ownedOf reports whether a plan's fold is layered (ownership_fold.go):
// under rules 3 when it names any ownership field; from rules 4 when some
// consumer owns slots, since lend and reclaim_for_preference say what
// happens to owned slots and change nothing where nobody owns any
// (docs/decisions.md #322).
func ownedOf(plan events.Plan, b behaviour) bool {
	if b.layerWhenOwning {
		return plan.OwnsAny()
	}
	return b.ownership && plan.HasOwnership()
}

// guaranteesOnly reports whether share_ratio reclaim restores planned
// shares without balancing beyond them (balance: false with preemption).
func (m mode) guaranteesOnly() bool { return m.shareRatio && m.preempt && !m.balance }

// Policy is the pool's effective policy, as reported to the edges.
type Policy struct {
	Reclaim     string       `json:"reclaim"`
	Enforcement string       `json:"enforcement"`
	Preemption  bool         `json:"preemption"`
	Balance     bool         `json:"balance"`
	Rules       RulesVersion `json:"rules"`
	// PriorityBands (rules 4, share_ratio): the surplus goes to the
	// higher priorities first.
	PriorityBands bool `json:"priority_bands,omitempty"`
}

func policyOf(plan events.Plan) Policy {
	pol := plan.Policy
	return Policy{Reclaim: pol.ReclaimOrDefault(), Enforcement: pol.EnforcementOrDefault(),
		Preemption: pol.PreemptionOrDefault(), Balance: pol.BalanceOrDefault(), Rules: RulesOf(plan),
		PriorityBands: pol.PriorityBandsOrDefault()}
}

func validatePolicy(p events.Policy) error {
	switch p.ReclaimOrDefault() {
	case events.ReclaimPriority, events.ReclaimShareRatio:
	default:
		return refuse(ErrInvalidPlan, "policy.reclaim %q: want %q or %q", p.Reclaim, events.ReclaimPriority, events.ReclaimShareRatio)
	}
	switch p.EnforcementOrDefault() {
	case events.EnforcementLeaf, events.EnforcementParent:
	default:
		return refuse(ErrInvalidPlan, "policy.enforcement %q: want %q or %q", p.Enforcement, events.EnforcementLeaf, events.EnforcementParent)
	}
	if p.Balance != nil && p.ReclaimOrDefault() != events.ReclaimShareRatio {
		return refuse(ErrInvalidPlan, "policy.balance applies to reclaim %q only (this plan's reclaim is %q)", events.ReclaimShareRatio, p.ReclaimOrDefault())
	}
	if p.PriorityBands != nil && p.ReclaimOrDefault() != events.ReclaimShareRatio {
		return refuse(ErrInvalidPlan, "policy.priority_bands applies to reclaim %q only (this plan's reclaim is %q)", events.ReclaimShareRatio, p.ReclaimOrDefault())
	}
	return nil
}
