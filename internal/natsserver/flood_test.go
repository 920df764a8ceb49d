package natsserver_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/cluster-ledger/ledger/internal/connect"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/natsserver"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// rawConn is a connection of the attacker: TCP to the client port, the
// server's INFO read, nothing ever sent.
type rawConn struct {
	c      net.Conn
	opened time.Time
}

func dialRaw(addr string) (*rawConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	r := &rawConn{c: c, opened: time.Now()}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _ = bufio.NewReader(c).ReadString('\n') // INFO (a full server sends -ERR after it, and closes)
	return r, nil
}

// closedAfter waits until the server closes r and says how long after
// it was opened (most, when it is still open then).
func (r *rawConn) closedAfter(most time.Duration) time.Duration {
	_ = r.c.SetReadDeadline(r.opened.Add(most))
	_, _ = io.Copy(io.Discard, r.c)
	return min(time.Since(r.opened), most)
}

// connectProjector connects as the projector does when it starts
// (connect.Waiter: a retry every 0.5 s, jitter up to 1 s, its nkey),
// and says how long it took.
func connectProjector(t *testing.T, ctx context.Context, url string) time.Duration {
	t.Helper()
	creds, err := natsauth.Option(testenv.Creds(t, url, natsauth.Projector))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	nc, err := connect.New("projector", slog.New(slog.DiscardHandler), time.Minute).NATS(ctx, url, creds)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("the projector could not connect during the flood (%v): %v", took, err)
	}
	if _, err := nc.Request("$JS.API.INFO", nil, 5*time.Second); err != nil {
		t.Errorf("the projector, connected: %v", err)
	}
	nc.Close()
	return took
}

// TestUnauthenticatedFlood: a local process without credentials opens
// as many TCP connections to the embedded server as it takes
// (max_connections, DefaultMaxConns) and never authenticates. The
// ledger's connection made before keeps working; each of the attacker's
// is closed at the auth timeout (DefaultAuthTimeout); a projector
// starting meanwhile connects within the auth timeout and its next
// retry. Then the attacker opens a new connection as soon as one is
// closed, as fast as it can: the projector still connects (each slot is
// held one auth timeout at most; the retries take one as they free).
func TestUnauthenticatedFlood(t *testing.T) {
	s := testenv.StartNATS(t, t.TempDir(), "127.0.0.1:-1")
	url := s.URL()
	addr := strings.TrimPrefix(url, "nats://")
	before := testenv.Connect(t, url, natsauth.Ledger)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var raws []*rawConn
	for range natsserver.DefaultMaxConns {
		r, err := dialRaw(addr)
		if err != nil {
			t.Fatalf("attacker dial: %v", err)
		}
		raws = append(raws, r)
	}
	if n := s.NATS().NumClients(); n < natsserver.DefaultMaxConns {
		t.Fatalf("%d clients after the flood: the test does not fill the server's %d", n, natsserver.DefaultMaxConns)
	}
	if _, err := before.Request("$JS.API.INFO", nil, 2*time.Second); err != nil {
		t.Errorf("the ledger's connection made before the flood: %v", err)
	}
	took := connectProjector(t, ctx, url)
	t.Logf("server full (%d connections without credentials): the projector connected after %v", natsserver.DefaultMaxConns, took.Round(time.Millisecond))
	// A shared machine: the server's timers fire late, the retry too.
	const slack, closeSlack = time.Second, 900 * time.Millisecond
	if bound := natsserver.DefaultAuthTimeout + 1500*time.Millisecond + slack; took > bound {
		t.Errorf("the projector connected after %v, want within %v (the auth timeout, a retry)", took, bound)
	}
	var wg sync.WaitGroup
	var late, longest atomic.Int64
	for _, r := range raws {
		wg.Go(func() {
			d := r.closedAfter(natsserver.DefaultAuthTimeout + 10*time.Second)
			r.c.Close()
			if d > natsserver.DefaultAuthTimeout+closeSlack {
				late.Add(1)
			}
			for l := longest.Load(); int64(d) > l && !longest.CompareAndSwap(l, int64(d)); l = longest.Load() {
			}
		})
	}
	wg.Wait()
	t.Logf("the attacker's connections were closed at most %v after they were opened", time.Duration(longest.Load()).Round(time.Millisecond))
	if late.Load() > 0 {
		t.Errorf("%d of the attacker's connections were open more than %v", late.Load(), natsserver.DefaultAuthTimeout+closeSlack)
	}

	// A refilling flood: every closed connection is opened again at once.
	actx, stop := context.WithCancel(ctx)
	var dials atomic.Int64
	var attackers sync.WaitGroup
	for range natsserver.DefaultMaxConns + 64 {
		attackers.Go(func() {
			for actx.Err() == nil {
				r, err := dialRaw(addr)
				if err != nil {
					time.Sleep(10 * time.Millisecond) // the listen backlog is full
					continue
				}
				dials.Add(1)
				r.closedAfter(natsserver.DefaultAuthTimeout + 10*time.Second)
				r.c.Close()
			}
		})
	}
	defer func() { stop(); attackers.Wait() }()
	time.Sleep(natsserver.DefaultAuthTimeout + time.Second)
	var worst time.Duration
	for range 3 {
		took := connectProjector(t, ctx, url)
		worst = max(worst, took)
		t.Logf("refilling flood (%d connections opened so far): the projector connected after %v", dials.Load(), took.Round(time.Millisecond))
	}
	// Not a guarantee, a race for each freed slot: README, "NATS
	// identities", says what bounds it (decision 254).
	if bound := 20 * time.Second; worst > bound {
		t.Errorf("during a refilling flood the projector took %v to connect, want within %v", worst, bound)
	}
	if _, err := before.Request("$JS.API.INFO", nil, 2*time.Second); err != nil {
		t.Errorf("the ledger's connection made before the flood, during the refilling flood: %v", err)
	}
}

// TestIdentityFlood: a process holding the auditor's credentials (which
// `ledger dev` prints for audit tools) opens authenticated connections
// as fast as it can. It gets natsauth.MaxConnections[Auditor] of them and
// no more; the ledger's connection made before keeps working; a
// projector and a ledger starting meanwhile connect at once; another
// auditor connection is admitted as soon as one of the flood's closes.
// Someone presenting the auditor's public key without its seed gets
// nothing.
func TestIdentityFlood(t *testing.T) {
	s := testenv.StartNATS(t, t.TempDir(), "127.0.0.1:-1")
	url := s.URL()
	before := testenv.Connect(t, url, natsauth.Ledger)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	auditor, err := natsauth.Option(testenv.Creds(t, url, natsauth.Auditor))
	if err != nil {
		t.Fatal(err)
	}
	bound := natsauth.MaxConnections[natsauth.Auditor]
	var held []*nats.Conn
	defer func() {
		for _, nc := range held {
			nc.Close()
		}
	}()
	var refused error
	for range natsserver.DefaultMaxConns {
		nc, err := nats.Connect(url, auditor, nats.NoReconnect())
		if err != nil {
			refused = err
			break
		}
		held = append(held, nc)
	}
	if len(held) != bound {
		t.Fatalf("the auditor holds %d connections, want its bound %d", len(held), bound)
	}
	if !errors.Is(refused, nats.ErrAuthorization) {
		t.Errorf("connection %d of the auditor: %v, want an authorization violation", bound+1, refused)
	}
	if _, err := before.Request("$JS.API.INFO", nil, 2*time.Second); err != nil {
		t.Errorf("the ledger's connection made before the flood: %v", err)
	}
	if took := connectProjector(t, ctx, url); took > time.Second {
		t.Errorf("with the auditor at its bound the projector took %v to connect, want at once", took)
	}
	nc := testenv.Connect(t, url, natsauth.Ledger)
	if _, err := nc.Request("$JS.API.INFO", nil, 2*time.Second); err != nil {
		t.Errorf("a ledger starting during the flood: %v", err)
	}
	// Each held connection works: the bound refuses the next, not these.
	if _, err := held[bound-1].Request("$JS.API.INFO", nil, 2*time.Second); err != nil {
		t.Errorf("the auditor's last admitted connection: %v", err)
	}

	// One closes: the next is admitted (the bound counts open
	// connections, not those ever made).
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		nc, err := nats.Connect(url, auditor, nats.NoReconnect())
		if err == nil {
			held[0] = nc
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after one of its connections closed, the auditor still cannot connect: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The auditor's public key with another key's signature.
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	auditorPub, err := natsauth.Load(filepath.Dir(testenv.Creds(t, url, natsauth.Auditor)))
	if err != nil {
		t.Fatal(err)
	}
	if nc, err := nats.Connect(url, nats.Nkey(auditorPub[natsauth.Auditor], kp.Sign), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Error("a connection presenting the auditor's public key, signed with another key, was admitted")
	}
}
