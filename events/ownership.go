package events

// Ownership fields of a plan (docs/rules.md#ownership). They are
// decoded as strictly as the rest of the plan: an unknown key in an own
// entry is a malformed event. Whether an entry is well formed (exactly one
// of host and group, positive slots, preference 1..10) and whether the
// tree's ownership is consistent are the engine's checks (domain), which
// refuse with a code per case.

// Preference bounds and default of an own entry.
const (
	MinPreference     = 1
	MaxPreference     = 10
	DefaultPreference = 5
)

// OwnEntry is one entry of a consumer's own list, exactly one of:
//   - {host: H}: all slots of host H;
//   - {host: H, slots: N}: N slots of host H;
//   - {group: G, slots: N}: N slots anywhere in resource group G;
//
// each with an optional preference 1..10 (default 5): slots of a more
// preferred entry are used first.
type OwnEntry struct {
	Host       string `json:"host,omitempty"`
	Group      string `json:"group,omitempty"`
	Slots      *int64 `json:"slots,omitempty"`
	Preference *int64 `json:"preference,omitempty"`
}

// PreferenceOrDefault returns the entry's preference, 5 when unset.
func (o OwnEntry) PreferenceOrDefault() int64 {
	if o.Preference == nil {
		return DefaultPreference
	}
	return *o.Preference
}

// WholeHost reports whether the entry owns all slots of its host.
func (o OwnEntry) WholeHost() bool { return o.Host != "" && o.Slots == nil }

// LendOrDefault reports whether the consumer lends its unused owned slots
// (default true).
func (c Consumer) LendOrDefault() bool { return c.Lend == nil || *c.Lend }

// HasOwnership reports whether the consumer names any ownership field
// (own, even empty, or lend). lend_grace is not one: plans carried it
// before ownership existed.
func (c Consumer) HasOwnership() bool { return c.Own != nil || c.Lend != nil }

// OwnsAny reports whether some consumer of the plan owns slots: an own
// list with at least one entry.
func (p Plan) OwnsAny() bool {
	for _, c := range p.Consumers {
		if len(c.Own) > 0 {
			return true
		}
	}
	return false
}

// HasOwnership reports whether the plan names any ownership field: a
// consumer's own or lend, or the policy's reclaim_for_preference.
func (p Plan) HasOwnership() bool {
	if p.Policy.ReclaimForPreference != nil {
		return true
	}
	for _, c := range p.Consumers {
		if c.HasOwnership() {
			return true
		}
	}
	return false
}
