package connlimit

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// dialN opens n connections to l's address and returns the client ends
// and the server ends Accept gave.
func dialN(t *testing.T, l *Listener, n int) (clients []net.Conn, servers []*Conn) {
	t.Helper()
	for range n {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		clients, servers = append(clients, c), append(servers, s.(*Conn))
	}
	return clients, servers
}

// closedByServer reports whether the server closed c's other end.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed)
}

// Past the unauthenticated bound the oldest unauthenticated connection
// is closed, never an authenticated one nor the newest.
func TestOldestUnauthenticatedIsClosed(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(inner, 100, 3)
	defer l.Close()
	clients, servers := dialN(t, l, 3)
	servers[0].Authenticated() // the producer's
	more, _ := dialN(t, l, 2)  // 2 unauthenticated + 2 new: the oldest of them goes
	if !closedByServer(clients[1]) {
		t.Error("the oldest unauthenticated connection is still open")
	}
	if closedByServer(clients[0]) {
		t.Error("the authenticated connection was closed")
	}
	for i, c := range append([]net.Conn{clients[2]}, more...) {
		if closedByServer(c) {
			t.Errorf("connection %d of the newest was closed", i)
		}
	}
	if got := l.Unauthenticated(); got != 3 {
		t.Errorf("%d unauthenticated open, want 3", got)
	}
	if l.Evicted() != 1 || l.Open() != 4 {
		t.Errorf("evicted %d, open %d; want 1 and 4", l.Evicted(), l.Open())
	}
	servers[2].Close()
	if l.Open() != 3 || l.Unauthenticated() != 2 {
		t.Errorf("after a close: open %d, unauthenticated %d", l.Open(), l.Unauthenticated())
	}
}

// At the bound on all connections Accept waits until one closes.
func TestAcceptWaitsAtTheBound(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(inner, 2, 2)
	defer l.Close()
	_, servers := dialN(t, l, 2)
	for _, s := range servers {
		s.Authenticated()
	}
	c, err := net.Dial("tcp", l.Addr().String()) // in the kernel's queue
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := make(chan net.Conn, 1)
	go func() {
		s, err := l.Accept()
		if err == nil {
			got <- s
		}
	}()
	select {
	case <-got:
		t.Fatal("Accept returned a third connection over a bound of 2")
	case <-time.After(200 * time.Millisecond):
	}
	servers[0].Close()
	select {
	case s := <-got:
		s.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still waits after a connection closed")
	}
}

// The connection is found from a request's context.
func TestConnContext(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(inner, 10, 5)
	defer l.Close()
	_, servers := dialN(t, l, 1)
	ctx := ConnContext(context.Background(), servers[0])
	if IsAuthenticated(ctx) {
		t.Fatal("a new connection is authenticated")
	}
	Authenticated(ctx)
	if !IsAuthenticated(ctx) || l.Unauthenticated() != 0 {
		t.Fatalf("after Authenticated: %v, %d unauthenticated", IsAuthenticated(ctx), l.Unauthenticated())
	}
	if IsAuthenticated(context.Background()) {
		t.Error("a context without a connection is authenticated")
	}
}

// The budget is the raised soft limit less the reserve; too small a
// limit is refused.
func TestBudget(t *testing.T) {
	soft, err := RaiseFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	n, err := Budget(DefaultReserve)
	if err != nil {
		t.Fatal(err)
	}
	if n != int(soft)-DefaultReserve {
		t.Errorf("budget %d, want %d - %d", n, soft, DefaultReserve)
	}
	if _, err := Budget(int(soft)); !errors.Is(err, ErrLowFileLimit) {
		t.Errorf("a reserve of the whole limit: %v, want ErrLowFileLimit", err)
	}
}
