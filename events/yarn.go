package events

// Rules version 4's plan fields: three behaviours of the YARN Capacity
// Scheduler (docs/rules.md#version-4). They are decoded
// as strictly as the rest of the plan (a value that is not a boolean is a
// malformed event); whether a plan may name them (rules version, reclaim
// policy, ownership) is the engine's check.
//
//   - policy priority_bands: the surplus above the guarantees goes to the
//     higher priorities among siblings first (YARN's queue priority);
//   - consumer preemptable: false pins a leaf's slots, never reclaimed;
//     inherited from the parent unless set (YARN's disable_preemption);
//   - consumer share 0: no guaranteed capacity, may still borrow (a YARN
//     queue of capacity 0).

// PriorityBandsOrDefault reports whether the surplus goes to higher
// priorities first (default false).
func (p Policy) PriorityBandsOrDefault() bool {
	return p.PriorityBands != nil && *p.PriorityBands
}

// NamesYARNFields reports whether the plan names priority_bands or any
// consumer's preemptable, whatever their values: fields rules 1 to 3 do not
// know.
func (p Plan) NamesYARNFields() bool {
	if p.Policy.PriorityBands != nil {
		return true
	}
	for _, c := range p.Consumers {
		if c.Preemptable != nil {
			return true
		}
	}
	return false
}

// HasZeroShare reports whether a consumer of the plan has share 0.
func (p Plan) HasZeroShare() bool {
	for _, c := range p.Consumers {
		if c.Share != nil && *c.Share == 0 {
			return true
		}
	}
	return false
}
