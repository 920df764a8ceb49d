package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

// WhatIfRequest asks what hypothetical events would do to a pool (POST
// /v1/pools/{pool}/what-if). The pool's state is forked just after its
// event at AtSeq, or after its last event at or before AtTime (at most
// one of them), or now when neither is set.
type WhatIfRequest struct {
	AtSeq  uint64        `json:"at_seq,omitempty"`
	AtTime *time.Time    `json:"at_time,omitempty"`
	Events []WhatIfEvent `json:"events"`
}

// WhatIfEvent is a hypothetical event: an event as Append sends it, with
// an optional time (default: one second after the event before, the
// first at the fork point's time).
type WhatIfEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
	Time *time.Time      `json:"time,omitempty"`
}

// NewWhatIfEvent returns the hypothetical event of a payload.
func NewWhatIfEvent(p events.Payload) (WhatIfEvent, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return WhatIfEvent{}, err
	}
	return WhatIfEvent{Type: string(p.EventType()), Data: data}, nil
}

// WhatIf is the answer of a what-if: the pool's figures before and after
// the hypothetical events, what became of each, and the decisions they
// would take. Nothing was appended.
type WhatIf struct {
	Pool string `json:"pool"`
	// Appended is always false: a what-if never appends (said in the
	// answer so that nobody reads it as a write).
	Appended bool `json:"appended"`
	// At is the fork point: the pool's last event at or before the point
	// asked for (Seq 0 when the pool had none).
	At WhatIfPoint `json:"at"`
	// Plan is the plan in force at the fork point, as the pool was given
	// it (absent before the first plan): a caller edits it to ask about
	// a plan change.
	Plan *events.Plan `json:"plan,omitempty"`
	// Events is the outcome of each hypothetical event, in order.
	Events []WhatIfOutcome `json:"events"`
	// Consumers are every consumer of the pool before or after, in tree
	// order (a parent before its children).
	Consumers []ConsumerChange `json:"consumers"`
	// Decisions are the hypothetical events' decisions, in the order the
	// engine would take them.
	Decisions []WhatIfDecision `json:"decisions"`
}

// WhatIfPoint is a point of a pool's history.
type WhatIfPoint struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
}

// WhatIfOutcome is what became of one hypothetical event: the sequence and
// time it would have (hypothetical: the log does not hold them), or the
// refusal the ledger would answer it with (then it changed nothing).
type WhatIfOutcome struct {
	Index int       `json:"index"`
	Type  string    `json:"type"`
	Seq   uint64    `json:"seq,omitempty"`
	Time  time.Time `json:"time"`
	// Refused is the refusal's code ("" when the event was applied), and
	// Refusal its words.
	Refused Code   `json:"refused,omitempty"`
	Refusal string `json:"refusal,omitempty"`
}

// ConsumerChange is a consumer's figures before and after; Before is nil
// for a consumer the hypothetical events add, After for one they remove.
type ConsumerChange struct {
	Path    string           `json:"path"`
	Changed bool             `json:"changed"`
	Before  *ConsumerFigures `json:"before"`
	After   *ConsumerFigures `json:"after"`
}

// ConsumerFigures are a consumer's plan entry and state at one point.
// Unmet is the demand its leaves do not hold (demand − allocation, when
// positive, summed over the leaves under a parent).
type ConsumerFigures struct {
	Parent    string `json:"parent"`
	Leaf      bool   `json:"leaf"`
	Share     int64  `json:"share"`
	Priority  int64  `json:"priority"`
	Max       string `json:"max,omitempty"`
	Demand    int64  `json:"demand"`
	Effective int64  `json:"effective"`
	Planned   int64  `json:"planned"`
	Target    int64  `json:"target"`
	Allocated int64  `json:"allocated"`
	Borrowed  int64  `json:"borrowed"`
	Unmet     int64  `json:"unmet"`
}

// WhatIfDecision is a decision a hypothetical event would take, with its
// explanation in words (as `ledger explain` tells it).
type WhatIfDecision struct {
	// Event is the index of the hypothetical event that takes it.
	Event int `json:"event"`
	Decision
	Text string `json:"text"`
}

// WhatIf asks what events would do to pool, forked at the request's
// point (now by default), and answers with the difference. It needs a
// token with the read scope on the pool, and appends nothing.
func (c *Client) WhatIf(ctx context.Context, pool string, req WhatIfRequest) (*WhatIf, error) {
	if req.Events == nil {
		req.Events = []WhatIfEvent{}
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var w WhatIf
	if err := c.call(ctx, http.MethodPost, poolPath(pool, "what-if"), b, &w); err != nil {
		return nil, err
	}
	return &w, nil
}
