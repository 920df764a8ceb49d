package natsserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// envMember makes the test binary run one cluster member (memberSpec as
// JSON) until it is killed: a process of its own, so that a test can
// crash it with SIGKILL, which an embedded server cannot undergo.
const envMember = "LEDGER_TEST_NATS_MEMBER"

type memberSpec struct {
	Name, Store, Listen, Route string
	Routes                     []string
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(envMember); spec != "" {
		os.Exit(runMember(spec))
	}
	os.Exit(m.Run())
}

func runMember(raw string) int {
	var sp memberSpec
	if err := json.Unmarshal([]byte(raw), &sp); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s, err := Start(context.Background(), WithName(sp.Name), WithStoreDir(sp.Store), WithListen(sp.Listen),
		WithCluster("crash", sp.Route, sp.Routes...), WithRouteAuth(testRouteUser, testRoutePass))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	s.Shutdown()
	return 0
}

// member is a cluster member running in a child process.
type member struct {
	spec memberSpec
	cmd  *exec.Cmd
}

func (m *member) start(t *testing.T) {
	t.Helper()
	raw, _ := json.Marshal(m.spec)
	m.cmd = exec.Command(os.Args[0], "-test.run=^$")
	m.cmd.Env = append(os.Environ(), envMember+"="+string(raw))
	m.cmd.Stderr = os.Stderr
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.Dial("tcp", m.spec.Listen); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("member %s not listening on %s", m.spec.Name, m.spec.Listen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (m *member) kill() {
	_ = m.cmd.Process.Kill()
	_ = m.cmd.Wait()
}

// TestClusterLeaderCrash: the stream leader's process is killed (SIGKILL,
// no hand-over); the two others elect a leader and take appends again,
// every acknowledged message survives, and the killed member restarted on
// its store and ports catches up.
func TestClusterLeaderCrash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	members := make([]*member, 3)
	var routes []string
	for i := range members {
		listen, _ := freeAddr()
		route, _ := freeAddr()
		routes = append(routes, route)
		members[i] = &member{spec: memberSpec{Name: fmt.Sprintf("m%d", i+1), Store: filepath.Join(dir, fmt.Sprint(i)), Listen: listen, Route: route}}
	}
	var urls []string
	for _, m := range members {
		m.spec.Routes = routes
		m.start(t)
		defer m.kill()
		urls = append(urls, "nats://"+m.spec.Listen)
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	var s jetstream.Stream
	for s == nil { // until the meta leader is elected
		if ctx.Err() != nil {
			t.Fatalf("no JetStream meta leader: %v", err)
		}
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		s, err = js.CreateStream(cctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Replicas: 3, Storage: jetstream.FileStorage})
		ccancel()
		if err != nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	acked := 0
	publish := func(id string) error {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		_, err := js.Publish(pctx, "s.x", []byte(id), jetstream.WithMsgID(id))
		if err == nil {
			acked++
		}
		return err
	}
	for i := range 20 {
		if err := publish(fmt.Sprint("before-", i)); err != nil {
			t.Fatal(err)
		}
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var leader *member
	for _, m := range members {
		if m.spec.Name == info.Cluster.Leader {
			leader = m
		}
	}
	if leader == nil {
		t.Fatalf("leader %q is none of the members", info.Cluster.Leader)
	}
	leader.kill()
	crashed := time.Now()
	for i := 0; publish(fmt.Sprint("after-", i)) != nil; {
		if ctx.Err() != nil {
			t.Fatal("no append acknowledged after the leader's crash")
		}
	}
	failover := time.Since(crashed)
	for i := 1; i < 10; i++ {
		if err := publish(fmt.Sprint("after-", i)); err != nil {
			t.Fatalf("append %d after the failover: %v", i, err)
		}
	}
	leader.start(t)
	// The restarted member catches up: ask it alone.
	nc1, err := nats.Connect("nats://" + leader.spec.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer nc1.Close()
	js1, _ := jetstream.New(nc1)
	var got uint64
	for got != uint64(acked) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		if st, err := js1.Stream(ctx, "S"); err == nil {
			info := st.CachedInfo()
			for _, r := range info.Cluster.Replicas {
				if r.Name == leader.spec.Name && r.Current {
					got = info.State.Msgs
				}
			}
			if info.Cluster.Leader == leader.spec.Name {
				got = info.State.Msgs
			}
		}
	}
	if got != uint64(acked) {
		t.Fatalf("after the restart the stream holds %d messages, %d were acknowledged", got, acked)
	}
	t.Logf("leader %s killed: first append acknowledged %v later; %d acknowledged, all stored; the member rejoined",
		leader.spec.Name, failover.Round(time.Millisecond), acked)
}
