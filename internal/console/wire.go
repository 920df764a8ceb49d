package console

import (
	"encoding/json"
	"time"
)

// PoolSummary is one row of the pools list.
type PoolSummary struct {
	Pool      string     `json:"pool"`
	Seq       uint64     `json:"seq"`                 // last event the projection applied
	FirstSeq  uint64     `json:"first_seq"`           // the pool's first event
	Time      *time.Time `json:"time,omitempty"`      // its time
	LastType  string     `json:"last_type,omitempty"` // its type
	Capacity  int64      `json:"capacity"`            // slots of the hosts that are up
	HostsUp   int        `json:"hosts_up"`
	HostsDown int        `json:"hosts_down"`
	Consumers int        `json:"consumers"`
	Leaves    int        `json:"leaves"`
	Allocated int64      `json:"allocated"`
	Demand    int64      `json:"demand"`
	// Lag is how far the log is ahead of the projection for this pool, in
	// stream sequence numbers (0: caught up); absent without NATS.
	Lag *uint64 `json:"lag,omitempty"`
	// RulesVersion is the rules version the pool runs under (absent
	// while it has no plan), since the plan at RulesSince.
	RulesVersion *int   `json:"rules_version,omitempty"`
	RulesSince   uint64 `json:"rules_since,omitempty"`
	// Halted, when known, tells whether the projection of this pool
	// stopped, and why.
	Halted       *bool  `json:"halted,omitempty"`
	HaltedReason string `json:"halted_reason,omitempty"`
}

// PoolsResponse is a page of GET /v1/pools, in pool name order. After,
// when present, is the cursor of the next page (?after=...): more pools
// may follow.
type PoolsResponse struct {
	Pools []PoolSummary `json:"pools"`
	After string        `json:"after,omitempty"`
}

// Consumer is a consumer of the tree with its state (now, from the
// projection; as of a point, from the engine's state forked from the
// log).
type Consumer struct {
	Path         string  `json:"path"`
	Parent       string  `json:"parent"`
	Leaf         bool    `json:"leaf"`
	Share        *int64  `json:"share,omitempty"`
	Priority     *int64  `json:"priority,omitempty"`
	Max          *string `json:"max,omitempty"`
	Demand       int64   `json:"demand"`
	Allocated    int64   `json:"allocated"`
	Effective    *int64  `json:"effective,omitempty"`
	Planned      *int64  `json:"planned,omitempty"`
	Target       *int64  `json:"target,omitempty"`
	Borrowed     *int64  `json:"borrowed,omitempty"`
	WaitingSince *int64  `json:"waiting_since,omitempty"`
}

// Holder is a consumer holding slots on a host.
type Holder struct {
	Consumer string `json:"consumer"`
	Slots    int64  `json:"slots"`
}

// Host is a host with the consumers that hold its slots and, in a pool
// with ownership, those that own them.
type Host struct {
	Name      string   `json:"name"`
	Group     string   `json:"group"`
	Slots     int64    `json:"slots"`
	Up        bool     `json:"up"`
	Allocated int64    `json:"allocated"`
	Holders   []Holder `json:"holders"`
	// Owners are the consumers owning slots of the host, most first (a
	// parent's count includes what it passed on to its children); absent
	// when nobody owns any.
	Owners []Holder `json:"owners,omitempty"`
}

// Policy is the policy of the pool's plan as written (empty: defaults).
type Policy struct {
	Reclaim     string `json:"reclaim,omitempty"`
	Enforcement string `json:"enforcement,omitempty"`
	Preemption  *bool  `json:"preemption,omitempty"`
}

// PoolResponse is GET /v1/pools/{pool}: the pool now.
type PoolResponse struct {
	PoolSummary
	Policy    Policy     `json:"policy"`
	Consumers []Consumer `json:"consumers"`
	Hosts     []Host     `json:"hosts"`
}

// Event is one event of the log as the projection copied it.
type Event struct {
	Seq      uint64          `json:"seq"`
	Type     string          `json:"type"`
	Time     time.Time       `json:"time"`
	Producer string          `json:"producer"`
	Refused  string          `json:"refused,omitempty"`
	Data     json.RawMessage `json:"data"`
}

// AsOfResponse is GET /v1/pools/{pool}/as-of: the pool just after the
// event Seq (the pool's last event at or before the sequence or time
// asked for). Prev and Next are the neighbouring events of the pool, for
// stepping; First and Last bound the pool's history.
type AsOfResponse struct {
	Pool   string  `json:"pool"`
	Seq    uint64  `json:"seq"`
	Event  *Event  `json:"event,omitempty"`
	Prev   *uint64 `json:"prev,omitempty"`
	Next   *uint64 `json:"next,omitempty"`
	First  uint64  `json:"first"`
	Last   uint64  `json:"last"`
	Policy Policy  `json:"policy"`
	// RulesVersion is the version the pool ran under at Seq.
	RulesVersion *int       `json:"rules_version,omitempty"`
	Capacity     int64      `json:"capacity"`
	Consumers    []Consumer `json:"consumers"`
	Hosts        []Host     `json:"hosts"`
}

// TimelineEntry is one decision with its event's time.
type TimelineEntry struct {
	EventSeq     uint64     `json:"event_seq"`
	Ordinal      int        `json:"ordinal"`
	Time         time.Time  `json:"time"`
	EventType    string     `json:"event_type"`
	Kind         string     `json:"kind"`
	Consumer     string     `json:"consumer"`
	FromConsumer string     `json:"from_consumer,omitempty"`
	Host         string     `json:"host"`
	Slots        int64      `json:"slots"`
	Rule         string     `json:"rule"`
	Deadline     *time.Time `json:"deadline,omitempty"`
}

// TimelineResponse is GET /v1/pools/{pool}/timeline: decisions newest
// first. Before, when present, is the cursor of the next (older) page.
type TimelineResponse struct {
	Pool      string          `json:"pool"`
	Decisions []TimelineEntry `json:"decisions"`
	Before    string          `json:"before,omitempty"`
}

// ExplainResponse is GET /v1/pools/{pool}/decisions/{seq}/{ordinal}/explain.
type ExplainResponse struct {
	Pool     string `json:"pool"`
	EventSeq uint64 `json:"event_seq"`
	Ordinal  int    `json:"ordinal"`
	// Decision is the decision in words: which rule, from whom, why.
	Decision string `json:"decision"`
	// Story is `ledger explain` for the decision's consumer right after
	// the event: its state and the decisions that led there.
	Story string `json:"story"`
}

// LiveEvent is the data of a server-sent "checkpoint" event: a pool's
// projection moved to Seq.
type LiveEvent struct {
	Pool string `json:"pool"`
	Seq  uint64 `json:"seq"`
}

// ErrorResponse is the body of every error answer, as in the API.
type ErrorResponse struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
	// RequestID is the answer's X-Request-Id (set by the API): the
	// server's log holds a failure's details under it.
	RequestID string `json:"request_id,omitempty"`
}
