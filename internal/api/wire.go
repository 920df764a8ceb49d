package api

// The JSON of the operator's endpoints (/healthz, /readyz, /v1/status). The shapes
// of producers and readers (events, allocations, decisions, errors,
// what-if) are the public package client's.

import (
	"time"

	"github.com/cluster-ledger/ledger/internal/health"
)

// HealthResponse is the body of GET /healthz (liveness: NATS and the
// stream; internal/health): "ok" or one short word per part, never an
// address or error.
type HealthResponse = health.Liveness

// ReadyResponse is the body of GET /readyz (readiness: PostgreSQL and the
// projection's lag; internal/health).
type ReadyResponse = health.Readiness

// ReadyHaltedPool is a halted pool of ReadyResponse (pool and sequence).
type ReadyHaltedPool = health.HaltedPool

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
	// View is "full" (ViewFull) for a token that reads every pool, and
	// "pools" (ViewPools) for a token limited to some: it is given
	// whether appends and reads work, its halted pools and the problems
	// bearing on them in words without figures; Stream is null,
	// Projectors empty and NATS only says whether it is connected
	// (docs/decisions.md 252).
	View string `json:"view"`
	// Status is ok, degraded (everything works, something needs a
	// look: halted pools, a lagging copy, a stale projector) or down
	// (appends or reads do not work: Appends, Reads say which).
	Status string `json:"status"`
	// Appends is "down" when this instance cannot append (NATS or the
	// stream does not answer), else "ok"; Reads is "down" when the
	// projection cannot be read (PostgreSQL), else "ok".
	Appends  string    `json:"appends"`
	Reads    string    `json:"reads"`
	Problems []string  `json:"problems,omitempty"`
	Time     time.Time `json:"time"` // when this instance answered
	// Stream is nil when NATS could not be asked, and in the pools view.
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
	// Current: the copy has every operation the leader has committed,
	// or, while appends flow, is at most ReplicaSlack operations behind
	// and was heard from within ReplicaSeen (replication at work, not
	// a copy catching up; decision 496). Lag is as NATS reports it.
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
	// it). Null when the stream could not be asked. Events set aside
	// for a busy pool (pending_events), below Seq but not folded, are
	// added (decision 465).
	LagEvents *int64 `json:"lag_events"`
	// LagSeconds is the age of the first message after Seq or of the
	// oldest set aside, whichever is older; 0 when LagEvents <= 0; null
	// when unknown.
	LagSeconds *float64 `json:"lag_seconds"`
	// Live tells whether an instance folds this projector (partition)
	// now, as NATS sees its consumer (health.ProjectorInstance). Null
	// when NATS could not be asked. NotLive says why not.
	Live    *bool  `json:"live"`
	NotLive string `json:"not_live,omitempty"`
	// Instances is the number of pull requests waiting on its consumer:
	// the live instances of a partitioned projector.
	Instances *int `json:"instances"`
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
