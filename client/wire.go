package client

import (
	"encoding/json"
	"time"
)

// Event is one event as a producer sends it (POST /v1/pools/{pool}/events).
// The ledger adds the pool (from the URL), the schema version and the time.
type Event struct {
	// ID is the producer-chosen event id (the NATS message id): a retry
	// with the same id and content is stored once. NewEvent chooses a
	// random one; the ledger chooses one when it is empty, but then a
	// retry cannot be recognised.
	ID   string `json:"id,omitempty"`
	Type string `json:"type"`
	V    int    `json:"v,omitempty"`
	// Producer is the token's name, recorded by the ledger; a request may
	// repeat it, and one that names another is refused
	// (CodeProducerMismatch). Leave it empty.
	Producer string          `json:"producer,omitempty"`
	Data     json.RawMessage `json:"data"`
}

// Appended is where one event of a request is in the log.
type Appended struct {
	ID  string `json:"id"`
	Seq uint64 `json:"seq"`
	// Duplicate: the ledger had stored this id with this content before
	// (a retry); Seq is where.
	Duplicate bool `json:"duplicate"`
}

// AppendResponse answers a successful POST of events, one entry per
// event in request order.
type AppendResponse struct {
	Pool   string     `json:"pool"`
	Events []Appended `json:"events"`
}

// ErrorBody is the body of every error answer.
type ErrorBody struct {
	Error string `json:"error"`
	// Reason is the refusal's Code.
	Reason string `json:"reason"`
	// Index is the position of the offending event in the request (0 for
	// a single event); absent when the request as a whole is at fault.
	Index *int `json:"index,omitempty"`
	// RequestID is the request's X-Request-Id: the ledger's log holds
	// the details of a failure (5xx) under it; the body never carries a
	// driver's or server's error text.
	RequestID string `json:"request_id,omitempty"`
}

// ConsumerState is a consumer's projected state (a row of consumer_state).
type ConsumerState struct {
	Path      string `json:"path"`
	Leaf      bool   `json:"leaf"`
	Demand    int64  `json:"demand"`
	Effective int64  `json:"effective"`
	Planned   int64  `json:"planned"`
	Target    int64  `json:"target"`
	Allocated int64  `json:"allocated"`
	Borrowed  int64  `json:"borrowed"`
	// WaitingSince is the sequence since which the leaf has waited for
	// slots it is due; absent when it does not wait.
	WaitingSince *int64 `json:"waiting_since,omitempty"`
}

// HostAllocation is the slots a leaf holds on a host.
type HostAllocation struct {
	Consumer string `json:"consumer"`
	Host     string `json:"host"`
	Slots    int64  `json:"slots"`
}

// Allocations is a pool's projected state (GET
// /v1/pools/{pool}/allocations); Seq is the last event the projector
// applied (0 when it has applied none).
type Allocations struct {
	Pool             string           `json:"pool"`
	Seq              uint64           `json:"seq"`
	Consumers        []ConsumerState  `json:"consumers"`
	HostsAllocations []HostAllocation `json:"hosts_allocations"`
}

// Decision is a change of an allocation the engine decided (a row of
// decisions). Kinds and rules are listed in docs/rules.md.
type Decision struct {
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

// DecisionsPage is a page of decisions in (event_seq, ordinal) order (GET
// /v1/pools/{pool}/decisions). A page never ends inside an event's
// decisions; NextFromSeq, when present, is the from_seq of the next page.
type DecisionsPage struct {
	Pool        string     `json:"pool"`
	Decisions   []Decision `json:"decisions"`
	NextFromSeq *uint64    `json:"next_from_seq,omitempty"`
}
