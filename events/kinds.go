package events

// Kind is everything the ledger knows of one event type, in one row of
// one table: its payload, the token scope that may append it, the
// envelope schema version and the rules version that introduced it, what
// bounds it, and an example. Every place that depends on the type reads
// this table instead of switching on type names of its own; the places
// that must switch (the engine's validation and fold, the limits below)
// have a test that folds every kind's example, so a new row fails them
// until they handle it.
//
// Adding an event type: a payload struct with EventType (payloads.go), a
// row here, its limits in CheckLimits, its validation and fold in
// domain/, and, since a reader of an older build must stop at it rather
// than record it as refused, a new envelope Version: a projector or an
// auditor that meets an envelope newer than it reads stops and names it
// (projections.ErrNeedsNewer), as for a rules version it lacks.
type Kind struct {
	Type Type
	// Scope is the token scope that may append it: "append" for what
	// changes holdings (demand, release), "plan" for what changes the
	// pool itself (README, "Tokens and scopes").
	Scope string
	// Schema is the envelope version ("v") that introduced it.
	Schema int
	// Rules is the rules version that introduced it.
	Rules int
	// Limits says what bounds it, in words (README, "Limits").
	Limits string
	// Example is a valid data field, for tests and documentation.
	Example string
	// payload returns an empty payload to decode into.
	payload func() Payload
}

// NewPayload returns an empty payload of the kind to decode into (the
// API checks a request's data against its fields before decoding it).
func (k Kind) NewPayload() Payload { return k.payload() }

// Scope names of the table (the token scopes of internal/auth).
const (
	ScopeAppend = "append"
	ScopePlan   = "plan"
)

var kinds = []Kind{
	{Type: TypeDemand, Scope: ScopeAppend, Schema: 1, Rules: 1,
		Limits:  "at most MaxPlanConsumers entries; each path MaxPathLen bytes and MaxPathDepth levels",
		Example: `{"demands":{"/a":3}}`, payload: func() Payload { return &Demand{} }},
	{Type: TypeRelease, Scope: ScopeAppend, Schema: 1, Rules: 1,
		Limits:  "a path of MaxPathLen bytes and MaxPathDepth levels",
		Example: `{"consumer":"/a","slots":1}`, payload: func() Payload { return &Release{} }},
	{Type: TypePlan, Scope: ScopePlan, Schema: 1, Rules: 1,
		Limits:  "at most MaxPlanConsumers consumers, implied parents included; paths as above; host and group names as host_up's",
		Example: `{"plan":{"consumers":[{"path":"/a"},{"path":"/b"}]}}`, payload: func() Payload { return &PlanChange{} }},
	{Type: TypeHostUp, Scope: ScopePlan, Schema: 1, Rules: 1,
		Limits:  "a host name of 1 to MaxHostNameLen bytes, a group of MaxGroupLen; at most MaxHostsPerPool hosts per pool",
		Example: `{"host":"h1","slots":4}`, payload: func() Payload { return &HostUp{} }},
	{Type: TypeHostDown, Scope: ScopePlan, Schema: 1, Rules: 1,
		Limits:  "a host name of 1 to MaxHostNameLen bytes",
		Example: `{"host":"h1"}`, payload: func() Payload { return &HostDown{} }},
}

// Types lists every event type, in the table's order.
var Types = func() []Type {
	ts := make([]Type, len(kinds))
	for i, k := range kinds {
		ts[i] = k.Type
	}
	return ts
}()

// Kinds returns the table, in a fixed order (a copy).
func Kinds() []Kind { return append([]Kind(nil), kinds...) }

// KindOf returns the row of t; ok is false for a type no version of this
// build knows.
func KindOf(t Type) (k Kind, ok bool) {
	for _, k := range kinds {
		if k.Type == t {
			return k, true
		}
	}
	return Kind{}, false
}
