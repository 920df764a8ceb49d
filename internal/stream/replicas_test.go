package stream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

func adminJS(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(testenv.Connect(t, url, natsauth.Admin), jetstream.WithDefaultTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestReplicatedStream: on a 3-server cluster the stream is created with
// 3 replicas, placed on the 3 servers; 4 or 5 are refused with both
// numbers named, and the stream is left as it was.
func TestReplicatedStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := testenv.NATSCluster(t, 3)
	js := adminJS(t, c.URL())
	s, err := js.Stream(ctx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream config replicas %d, cluster %+v; want 3 replicas, a leader and 2 followers", info.Config.Replicas, info.Cluster)
	}
	for _, tc := range []struct {
		set  stream.Settings
		want string
	}{
		{stream.Settings{Replicas: 4}, "4 replicas asked, but the NATS cluster has 3 server(s)"},             // the server refuses
		{stream.Settings{Replicas: 5, Servers: 3}, "5 replicas asked, but the NATS cluster has 3 server(s)"}, // known before asking
	} {
		_, err := stream.Setup(ctx, js, tc.set)
		var re *stream.ReplicasError
		if !errors.Is(err, stream.ErrTooManyReplicas) || !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Setup(%+v): %v; want ErrTooManyReplicas saying %q", tc.set, err, tc.want)
		}
	}
	if _, err := stream.Setup(ctx, js, stream.Settings{Replicas: 6}); !errors.Is(err, stream.ErrBadReplicas) {
		t.Errorf("6 replicas: %v, want ErrBadReplicas", err)
	}
	if info, err := s.Info(ctx); err != nil || info.Config.Replicas != 3 {
		t.Errorf("after the refusals: replicas %d, %v; want 3 unchanged", info.Config.Replicas, err)
	}
	// An existing stream is scaled to what the admin asks (decisions.md).
	for _, r := range []int{1, 3} {
		if _, err := stream.Setup(ctx, js, stream.Settings{Replicas: r}); err != nil {
			t.Fatalf("scale to %d: %v", r, err)
		}
		if info, err := s.Info(ctx); err != nil || info.Config.Replicas != r {
			t.Errorf("scaled to %d: replicas %d, %v", r, info.Config.Replicas, err)
		}
	}
	// Ensure (what every other program calls) leaves the replicas alone.
	if _, err := stream.Ensure(ctx, js); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Info(ctx); info.Config.Replicas != 3 {
		t.Errorf("Ensure changed the replicas to %d", info.Config.Replicas)
	}
}

// TestReplicasOnOneServer: a server that is not clustered holds one copy.
func TestReplicasOnOneServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := adminJS(t, testenv.NATS(t))
	_, err := stream.Setup(ctx, js, stream.Settings{Replicas: 3})
	if !errors.Is(err, stream.ErrTooManyReplicas) || !strings.Contains(err.Error(), "3 replicas asked, but the NATS cluster has 1 server(s)") {
		t.Fatalf("R3 on one server: %v", err)
	}
	if _, err := stream.Setup(ctx, js, stream.Settings{Replicas: 1}); err != nil {
		t.Fatalf("R1 on one server: %v", err)
	}
}
