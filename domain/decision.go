package domain

import "time"

// Kind is what a decision did to an allocation.
type Kind string

// Decision kinds (allocation-rules.md section 7). lend, return and own
// belong to ownership (section 5) and are reserved.
const (
	KindGrant   Kind = "grant"
	KindReclaim Kind = "reclaim"
	KindRelease Kind = "release"
	KindTrim    Kind = "trim"
	KindLend    Kind = "lend"
	KindReturn  Kind = "return"
	KindOwn     Kind = "own"
)

// Rule identifiers: the rule of allocation-rules.md that caused a decision.
// They are stable strings; reports and audits depend on them.
const (
	RuleReleaseFinished   = "release.finished"
	RuleDemandDropped     = "release.demand_dropped"
	RuleMaxLowered        = "release.max_lowered"
	RuleParentMax         = "release.max"
	RuleConsumerRemoved   = "release.consumer_removed"
	RuleHostDown          = "trim.host_down"
	RulePriorityEntitled  = "priority.entitled"
	RulePriorityBorrow    = "priority.borrow"
	RulePriorityReclaim   = "priority.reclaim"
	RuleShareRatioGrant   = "share_ratio.grant"
	RuleShareRatioReclaim = "share_ratio.reclaim"
)

// Decision is one change of one allocation: Slots slots of Consumer on
// Host, granted, reclaimed (moved from From), released or trimmed.
// For a reclaim, Consumer gains and From loses; for release and trim,
// Consumer loses; for grant, Consumer gains.
type Decision struct {
	Seq      uint64     `json:"seq"`
	Ordinal  int        `json:"ordinal"`
	Kind     Kind       `json:"kind"`
	Consumer string     `json:"consumer"`
	From     string     `json:"from,omitempty"`
	Host     string     `json:"host"`
	Slots    int64      `json:"slots"`
	Rule     string     `json:"rule"`
	Deadline *time.Time `json:"deadline,omitempty"`
}

// Delta returns the change this decision makes to consumer's allocation.
func (d Decision) Delta(consumer string) int64 {
	var n int64
	switch d.Kind {
	case KindGrant, KindReclaim, KindReturn, KindOwn:
		if d.Consumer == consumer {
			n += d.Slots
		}
	case KindRelease, KindTrim, KindLend:
		if d.Consumer == consumer {
			n -= d.Slots
		}
	}
	if d.Kind == KindReclaim && d.From == consumer {
		n -= d.Slots
	}
	return n
}
