package api_test

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// cluster3 starts three clustered JetStream servers n0, n1, n2 on
// 127.0.0.1 (routes to each other, no client authentication: this test
// is about what status reads, the cluster work tests the secured shape)
// and returns them with a client URL list naming all three.
func cluster3(t *testing.T) ([]*server.Server, string) {
	t.Helper()
	ports := make([]int, 3)
	var routes []string
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
	}
	var servers []*server.Server
	var urls []string
	for i := range ports {
		s, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: -1,
			JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "ledger", Host: "127.0.0.1", Port: ports[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatalf("n%d not ready", i)
		}
		servers = append(servers, s)
		urls = append(urls, s.ClientURL())
	}
	return servers, strings.Join(urls, ",")
}

// On an R3 stream: three copies, a leader among the servers, every copy
// current; a follower shut down is reported offline or behind; with two
// of three down (no quorum) status still answers in time, naming the
// stream as the failing part.
func TestStatusReplicated(t *testing.T) {
	servers, urls := cluster3(t)
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.Config()
	cfg.Replicas = 3
	deadline := time.Now().Add(30 * time.Second)
	for { // the meta leader is elected a moment after the servers start
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = js.CreateStream(ctx, cfg)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create the R3 stream: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	token, tokens := testenv.AdminToken(t)
	srv, err := api.New(context.Background(), js, nil, api.WithTokens(tokens))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	l := &ledger{t: t, url: hs.URL, token: token}
	setup(l, "p")

	names := []string{"n0", "n1", "n2"}
	var res api.StatusResponse
	waitStatus := func(what string, ok func(api.StatusResponse) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			var took time.Duration
			res, took = status(t, l)
			if took > api.StatusTimeout+time.Second {
				t.Fatalf("%s: status took %v", what, took)
			}
			if ok(res) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v %+v", what, res, res.Stream)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitStatus("three current copies", func(r api.StatusResponse) bool {
		st := r.Stream
		if st == nil || st.Replicas != 3 || st.Cluster != "ledger" || !slices.Contains(names, st.Leader) ||
			len(st.ReplicasDetail) != 3 || st.LastSeq != 2 {
			return false
		}
		for _, c := range st.ReplicasDetail {
			if !c.Current || c.Offline {
				return false
			}
		}
		return r.NATS.Cluster == "ledger" && r.Postgres.Error != ""
	})
	leader := res.Stream.Leader
	t.Logf("R3: leader %s, copies %+v", leader, res.Stream.ReplicasDetail)

	// Shut a follower down: still a leader, the copy is reported.
	var follower *server.Server
	for _, s := range servers {
		if s.Name() != leader {
			follower = s
			break
		}
	}
	follower.Shutdown()
	follower.WaitForShutdown()
	waitStatus("a follower down", func(r api.StatusResponse) bool {
		if r.Stream == nil || r.Stream.Leader != leader {
			return false
		}
		for _, p := range r.Problems {
			if strings.Contains(p, "stream copy on "+follower.Name()) {
				return true
			}
		}
		return false
	})
	t.Logf("a follower down: %v", res.Problems)

	// And the leader: one of three left, no quorum.
	for _, s := range servers {
		if s.Name() == leader {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
	waitStatus("two of three down", func(r api.StatusResponse) bool {
		return r.Status == "degraded" && (r.Stream == nil || r.Stream.Leader == "")
	})
	t.Logf("two of three down: stream %+v, problems %v", res.Stream, res.Problems)
}
