package natsserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const testRouteUser, testRoutePass = "ledger-route", "0123456789abcdef0123456789abcdef"

func startTestCluster(t *testing.T, ctx context.Context, n int) *Cluster {
	t.Helper()
	c, err := StartCluster(ctx, ClusterSpec{Name: "t", Size: n, Dir: t.TempDir()}, WithRouteAuth(testRouteUser, testRoutePass))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// TestRoutesRefuseWithoutCredentials: a route that brings no credentials,
// or wrong ones, is refused by every member; a server with the wrong
// password never joins.
func TestRoutesRefuseWithoutCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := startTestCluster(t, ctx, 3)
	for i := range 3 {
		if n := c.Server(i).NATS().NumRoutes(); n < 2 {
			t.Errorf("member %d has %d routes, want the 2 others", i, n)
		}
	}
	for _, creds := range []string{``, `"user":"ledger-route","pass":"wrong",`, `"user":"intruder","pass":"` + testRoutePass + `",`} {
		if got := routeConnect(t, c.Server(0).RouteAddr(), creds); !strings.Contains(got, "Authorization Violation") {
			t.Errorf("route CONNECT with {%s} answered %q, want an authorization violation", creds, got)
		}
	}

	var routes []string
	for i := range 3 {
		routes = append(routes, c.Server(i).RouteAddr())
	}
	intruder, err := Start(ctx, WithStoreDir(t.TempDir()), WithListen("127.0.0.1:-1"), WithName("intruder"),
		WithCluster("t", "127.0.0.1:-1", routes...), WithRouteAuth(testRouteUser, "not-the-password-at-all"))
	if err != nil {
		t.Fatal(err)
	}
	defer intruder.Shutdown()
	// Routes are tried at once and refused at once; the intruder keeps
	// trying, and a route it is soliciting counts until the member
	// refuses it, so it must show none for a while.
	time.Sleep(time.Second)
	zero := 0
	for deadline := time.Now().Add(5 * time.Second); zero < 5 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if intruder.NATS().NumRoutes() == 0 {
			zero++
		} else {
			zero = 0
		}
	}
	if zero < 5 {
		t.Errorf("a server with the wrong route password has %d routes", intruder.NATS().NumRoutes())
	}

	// The meta leader sees exactly the 3 members, not the intruder.
	if err := c.WaitMetaLeader(ctx); err != nil {
		t.Errorf("after the intruder tried: %v", err)
	}

	if _, err := Start(ctx, WithStoreDir(t.TempDir()), WithListen("127.0.0.1:-1"), WithCluster("t", "127.0.0.1:-1", routes...)); !errors.Is(err, ErrNoRouteAuth) {
		t.Errorf("a member without route credentials: %v, want ErrNoRouteAuth", err)
	}
}

// routeConnect speaks the route protocol to addr: it sends CONNECT with
// the given credential fields and returns the first line answered.
func routeConnect(t *testing.T, addr, creds string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	r := bufio.NewReader(conn)
	if info, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(info, "INFO ") {
		t.Fatalf("route port greeting %q: %v", info, err)
	}
	fmt.Fprintf(conn, "CONNECT {%s\"verbose\":false,\"pedantic\":false,\"name\":\"intruder\",\"cluster\":\"t\"}\r\nPING\r\n", creds)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "closed: " + err.Error()
		}
		if !strings.HasPrefix(line, "INFO ") {
			return strings.TrimSpace(line)
		}
	}
}

// TestClusterRestartMember: an R3 stream keeps taking writes with its
// leader down, and the leader's server restarted on its store and ports
// catches up with what it missed.
func TestClusterRestartMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := startTestCluster(t, ctx, 3)
	if got := len(strings.Split(c.URL(), ",")); got != 3 {
		t.Fatalf("URL() %q lists %d servers", c.URL(), got)
	}
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Replicas: 3, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s.1", []byte("before")); err != nil {
		t.Fatal(err)
	}
	leader, err := c.WaitStreamLeader(ctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	url := c.URLs()[leader]
	c.Server(leader).Shutdown()
	down := time.Now()
	var ack *jetstream.PubAck
	for ack == nil && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		ack, _ = js.Publish(pctx, "s.2", []byte("while down"), jetstream.WithMsgID("m2"))
		pcancel()
	}
	if ack == nil {
		t.Fatal("no append while the leader was down")
	}
	t.Logf("first append acknowledged %v after the leader went down", time.Since(down).Round(time.Millisecond))
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if c.URLs()[leader] != url {
		t.Errorf("restarted on %s, was %s", c.URLs()[leader], url)
	}
	if err := c.WaitStreamCurrent(ctx, leader, "S"); err != nil {
		t.Fatal(err)
	}
	// Through a connection to the restarted member alone.
	nc1, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc1.Close()
	js1, _ := jetstream.New(nc1)
	s, err := js1.Stream(ctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	if s.CachedInfo().State.Msgs != 2 {
		t.Errorf("stream holds %d messages after the restart, want 2", s.CachedInfo().State.Msgs)
	}
	// A retry of m2 on the new topology is still a duplicate.
	if a, err := js1.Publish(ctx, "s.2", []byte("while down"), jetstream.WithMsgID("m2")); err != nil || !a.Duplicate || a.Sequence != ack.Sequence {
		t.Errorf("retry of m2: %+v %v, want a duplicate of seq %d", a, err, ack.Sequence)
	}
}

// TestClusterStartsAgainWhenARoutePortIsTaken: a route port another
// process binds between its choice and the member's start (here the third
// member's, held by the test) makes the start try again with new ports,
// and the cluster comes up with every member routed.
func TestClusterStartsAgainWhenARoutePortIsTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	picks := 0
	routeAddr = func() (string, error) {
		picks++
		if picks == 3 {
			return taken.Addr().String(), nil
		}
		return freeAddr()
	}
	defer func() { routeAddr = freeAddr }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := startTestCluster(t, ctx, 3)
	if picks != 6 {
		t.Errorf("%d route ports picked, want 3 for the failed start and 3 for the second", picks)
	}
	for i := range 3 {
		if n := c.Server(i).NATS().NumRoutes(); n < 2 {
			t.Errorf("member %d has %d routes, want the 2 others", i, n)
		}
	}
}
