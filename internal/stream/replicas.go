package stream

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxReplicas is the most copies JetStream keeps of a stream.
const MaxReplicas = 5

// Errors of the replica count; match them with errors.Is.
var (
	// ErrTooManyReplicas: more replicas asked than the NATS cluster has
	// servers (a *ReplicasError says both numbers).
	ErrTooManyReplicas = errors.New("more stream replicas than NATS servers")
	// ErrBadReplicas: a replica count outside 1..MaxReplicas.
	ErrBadReplicas = fmt.Errorf("the number of stream replicas must be 1 to %d", MaxReplicas)
)

// ReplicasError is a replica count the cluster cannot hold: each replica
// lives on a different server.
type ReplicasError struct {
	Replicas int   // asked for
	Servers  int   // in the cluster (1: a server that is not clustered)
	Err      error // the server's refusal, if it refused
}

func (e *ReplicasError) Error() string {
	msg := fmt.Sprintf("stream %s: %d replicas asked, but the NATS cluster has %d server(s), so at most %d replica(s)",
		Name, e.Replicas, e.Servers, e.Servers)
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	return msg
}

// Is makes errors.Is(err, ErrTooManyReplicas) hold.
func (e *ReplicasError) Is(target error) bool { return target == ErrTooManyReplicas }

func (e *ReplicasError) Unwrap() error { return e.Err }

// JetStream error codes of a replica count the servers cannot place.
const (
	errCodeReplicasNotSupported = jetstream.ErrorCode(10074) // replicas > 1 not supported in non-clustered mode
	errCodeNoPeers              = jetstream.ErrorCode(10005) // no suitable peers for placement
	errCodeInsufficient         = jetstream.ErrorCode(10023) // insufficient resources
)

// checkReplicas refuses a replica count before asking the server, when
// it is out of range or above what the caller knows of the cluster.
func checkReplicas(nc *nats.Conn, set Settings) error {
	if set.Replicas == 0 {
		return nil
	}
	if set.Replicas < 0 || set.Replicas > MaxReplicas {
		return fmt.Errorf("%w: %d", ErrBadReplicas, set.Replicas)
	}
	if set.Servers > 0 && set.Replicas > set.Servers {
		return &ReplicasError{Replicas: set.Replicas, Servers: set.Servers}
	}
	if set.Replicas > 1 && nc != nil && nc.ConnectedClusterName() == "" {
		return &ReplicasError{Replicas: set.Replicas, Servers: 1}
	}
	return nil
}

// replicasRefusal turns the server's refusal to place replicas into a
// *ReplicasError when the cluster is too small, and returns err as it is
// otherwise (e.g. a member is down: "no suitable peers, peer offline").
func replicasRefusal(nc *nats.Conn, set Settings, err error) error {
	var je jetstream.JetStreamError
	if !errors.As(err, &je) || je.APIError() == nil {
		return err
	}
	switch je.APIError().ErrorCode {
	case errCodeReplicasNotSupported:
		return &ReplicasError{Replicas: set.Replicas, Servers: 1, Err: err}
	case errCodeNoPeers, errCodeInsufficient:
		// The servers this connection knows of: the URLs it was given and
		// those the cluster advertised to it.
		if n := knownServers(nc); n > 0 && set.Replicas > n {
			return &ReplicasError{Replicas: set.Replicas, Servers: n, Err: err}
		}
	}
	return err
}

func knownServers(nc *nats.Conn) int {
	if nc == nil {
		return 0
	}
	return len(nc.Servers())
}
