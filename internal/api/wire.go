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
	// RequestID is the request's X-Request-Id: the server's log holds
	// the details of a failure (5xx) under it; the body never carries a
	// driver's or server's error text.
	RequestID string `json:"request_id,omitempty"`
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

// StatusResponse is the body of GET /v1/status: the operator's view of
// the deployment as this ledger instance sees it. It is answered 200
// whenever the ledger itself runs, even with NATS or PostgreSQL down:
// Status says "ok" or "degraded", Problems why, and the part that could
// not be asked holds its error.
type StatusResponse struct {
	Status   string    `json:"status"` // ok | degraded
	Problems []string  `json:"problems,omitempty"`
	Time     time.Time `json:"time"` // when this instance answered
	// Stream is nil when NATS could not be asked.
	Stream     *StreamStatus     `json:"stream"`
	Projectors []ProjectorStatus `json:"projectors"`
	Halted     []HaltedStatus    `json:"halted"`
	Postgres   PostgresStatus    `json:"postgres"`
	NATS       NATSStatus        `json:"nats"`
}

// StreamStatus is the LEDGER stream as JetStream reports it.
type StreamStatus struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"` // configured copies (1 on a single node)
	Leader   string `json:"leader"`   // server that orders and acknowledges appends
	Cluster  string `json:"cluster,omitempty"`
	Messages uint64 `json:"messages"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// LastTime is when the last message was stored (zero when none).
	LastTime time.Time `json:"last_time"`
	// ReplicasDetail lists every copy, the leader first.
	ReplicasDetail []ReplicaStatus `json:"replicas_detail"`
}

// ReplicaStatus is one copy of the stream.
type ReplicaStatus struct {
	Name   string `json:"name"`
	Leader bool   `json:"leader"`
	// Current: the copy has every operation the leader has committed.
	Current bool `json:"current"`
	Offline bool `json:"offline"`
	// ActiveMS is how long ago the leader last heard from the copy
	// (milliseconds; 0 for the leader itself).
	ActiveMS int64 `json:"active_ms"`
	// Lag is how many operations the copy is behind the leader.
	Lag uint64 `json:"lag"`
}

// ProjectorStatus is a row of projector_offsets with its lag behind the
// stream. Partition and Partitions are null for an unpartitioned
// projector.
type ProjectorStatus struct {
	Name       string    `json:"name"`
	Partition  *int      `json:"partition"`
	Partitions *int      `json:"partitions"`
	Owner      string    `json:"owner"`
	Seq        uint64    `json:"seq"`
	UpdatedAt  time.Time `json:"updated_at"`
	// LagEvents is the stream's last sequence minus Seq: the events the
	// projector (a partition reads every event, skipping other
	// partitions') has still to read. Negative when the projection is
	// ahead of the stream (the stream lost its tail; the projector heals
	// it). Null when the stream could not be asked.
	LagEvents *int64 `json:"lag_events"`
	// LagSeconds is the age of the first message after Seq, 0 when
	// LagEvents <= 0; null when unknown.
	LagSeconds *float64 `json:"lag_seconds"`
}

// HaltedStatus is a halted pool, with when it halted.
type HaltedStatus struct {
	Pool     string    `json:"pool"`
	Seq      uint64    `json:"seq"`
	Reason   string    `json:"reason"`
	HaltedAt time.Time `json:"halted_at"`
}

// PostgresStatus says whether the projection's database answered.
type PostgresStatus struct {
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
}

// NATSStatus is this instance's connection to NATS.
type NATSStatus struct {
	Connected bool   `json:"connected"`
	Server    string `json:"server,omitempty"` // the server's name
	URL       string `json:"url,omitempty"`    // its address, without credentials
	Cluster   string `json:"cluster,omitempty"`
	Error     string `json:"error,omitempty"`
}
