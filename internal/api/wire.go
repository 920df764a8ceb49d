package api

import (
	"encoding/json"
	"time"
)

// EventRequest is one event as a producer sends it. The ledger adds the
// pool (from the URL), the schema version and the time.
type EventRequest struct {
	// ID is the producer-chosen event id (the NATS message id): a retry
	// with the same id is stored once. Generated when empty.
	ID   string `json:"id,omitempty"`
	Type string `json:"type"`
	V    int    `json:"v,omitempty"`
	// Producer is the token's name, recorded by the ledger; a request may
	// repeat it, and one that names another is refused.
	Producer string          `json:"producer,omitempty"`
	Data     json.RawMessage `json:"data"`
}

// Appended is where one event of a request is in the log.
type Appended struct {
	ID        string `json:"id"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"`
}

// EventsResponse answers a successful POST of events, one entry per event
// in request order.
type EventsResponse struct {
	Pool   string     `json:"pool"`
	Events []Appended `json:"events"`
}

// ErrorResponse is the body of every error answer.
type ErrorResponse struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
	// Index is the position of the offending event in the request (0 for
	// a single event); absent when the request as a whole is at fault.
	Index *int `json:"index,omitempty"`
}

// ConsumerState is a row of consumer_state.
type ConsumerState struct {
	Path         string `json:"path"`
	Leaf         bool   `json:"leaf"`
	Demand       int64  `json:"demand"`
	Effective    int64  `json:"effective"`
	Planned      int64  `json:"planned"`
	Target       int64  `json:"target"`
	Allocated    int64  `json:"allocated"`
	Borrowed     int64  `json:"borrowed"`
	WaitingSince *int64 `json:"waiting_since,omitempty"`
}

// HostAllocation is a row of allocations: slots of a leaf on a host.
type HostAllocation struct {
	Consumer string `json:"consumer"`
	Host     string `json:"host"`
	Slots    int64  `json:"slots"`
}

// AllocationsResponse is a pool's projected state; Seq is the last event
// the projector applied (0 when it has applied none).
type AllocationsResponse struct {
	Pool             string           `json:"pool"`
	Seq              uint64           `json:"seq"`
	Consumers        []ConsumerState  `json:"consumers"`
	HostsAllocations []HostAllocation `json:"hosts_allocations"`
}

// DecisionRow is a row of decisions.
type DecisionRow struct {
	EventSeq     uint64     `json:"event_seq"`
	Ordinal      int        `json:"ordinal"`
	Kind         string     `json:"kind"`
	Consumer     string     `json:"consumer"`
	FromConsumer string     `json:"from_consumer,omitempty"`
	Host         string     `json:"host"`
	Slots        int64      `json:"slots"`
	Rule         string     `json:"rule"`
	Deadline     *time.Time `json:"deadline,omitempty"`
}

// DecisionsResponse is a page of decisions in (event_seq, ordinal) order.
// A page never ends inside an event's decisions; NextFromSeq, when
// present, is the from_seq of the next page.
type DecisionsResponse struct {
	Pool        string        `json:"pool"`
	Decisions   []DecisionRow `json:"decisions"`
	NextFromSeq *uint64       `json:"next_from_seq,omitempty"`
}

// HealthResponse is the body of /healthz: "ok" or one short word per
// part (down, missing, full, not writable), never an address or error.
type HealthResponse struct {
	Status   string `json:"status"`
	NATS     string `json:"nats"`
	Stream   string `json:"stream"`
	Postgres string `json:"postgres"`
	// HaltedPools are the pools the projector stopped projecting (their
	// fold failed); status is "degraded" while there are any.
	HaltedPools []HaltedPool `json:"halted_pools,omitempty"`
}

// HaltedPool is a row of halted_pools.
type HaltedPool struct {
	Pool   string `json:"pool"`
	Seq    uint64 `json:"seq"`
	Reason string `json:"reason"`
}
