package domain

import "time"

// Kind is what a decision did to an allocation.
type Kind string

// Decision kinds (docs/rules.md#decisions). lend, return and own belong
// to ownership (rules v3, docs/rules.md#ownership).
const (
	KindGrant   Kind = "grant"
	KindReclaim Kind = "reclaim"
	KindRelease Kind = "release"
	KindTrim    Kind = "trim"
	KindLend    Kind = "lend"
	KindReturn  Kind = "return"
	KindOwn     Kind = "own"
)

// Rule identifies the rule of docs/rules.md (#decisions lists them) that
// caused a decision. The identifiers are stable strings; reports and
// audits depend on them.
type Rule string

// The rules that cause decisions.
const (
	RuleReleaseFinished   Rule = "release.finished"
	RuleDemandDropped     Rule = "release.demand_dropped"
	RuleMaxLowered        Rule = "release.max_lowered"
	RuleParentMax         Rule = "release.max"
	RuleConsumerRemoved   Rule = "release.consumer_removed"
	RuleHostDown          Rule = "trim.host_down"
	RulePriorityEntitled  Rule = "priority.entitled"
	RulePriorityBorrow    Rule = "priority.borrow"
	RulePriorityReclaim   Rule = "priority.reclaim"
	RuleShareRatioGrant   Rule = "share_ratio.grant"
	RuleShareRatioReclaim Rule = "share_ratio.reclaim"

	// Ownership assignment (docs/rules.md#assignment, ownership_assignment.go): slots
	// assigned to an owner, ownership the plan no longer gives, ownership
	// lost to a host down, a shrunken group or a higher-ranked sibling.
	RuleOwnAssign Rule = "own.assign"
	RuleOwnDrop   Rule = "own.drop"
	RuleOwnTrim   Rule = "own.trim"
)

// Decision is one change of one allocation: Slots slots of Consumer on
// Host, granted, reclaimed (moved from From), released or trimmed; with
// ownership, lent (granted on slots From owns), returned (moved from the
// borrower From back to the owner Consumer) or owned (Consumer's
// ownership on Host changed, not its allocation).
type Decision struct {
	Seq      uint64     `json:"seq"`
	Ordinal  int        `json:"ordinal"`
	Kind     Kind       `json:"kind"`
	Consumer string     `json:"consumer"`
	From     string     `json:"from,omitempty"`
	Host     string     `json:"host"`
	Slots    int64      `json:"slots"`
	Rule     Rule       `json:"rule"`
	Deadline *time.Time `json:"deadline,omitempty"`
}

// Delta returns the change this decision makes to consumer's allocation.
// An own decision changes ownership only; a lend's From (the owner) lends
// slots it does not hold.
func (d Decision) Delta(consumer string) int64 {
	var n int64
	switch d.Kind {
	case KindGrant, KindReclaim, KindReturn, KindLend:
		if d.Consumer == consumer {
			n += d.Slots
		}
	case KindRelease, KindTrim:
		if d.Consumer == consumer {
			n -= d.Slots
		}
	}
	if (d.Kind == KindReclaim || d.Kind == KindReturn) && d.From == consumer {
		n -= d.Slots
	}
	return n
}
