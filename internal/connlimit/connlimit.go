// Package connlimit keeps the HTTP server's connections within the
// process's file descriptors, and keeps connections that have not
// authenticated from crowding out those that have (issue 21: 19,980 idle
// keep-alive connections without a token took every descriptor; a
// producer's POSTs timed out and the embedded NATS refused new clients).
//
// Three bounds, each for one attack:
//
//   - All connections: at most MaxConns, the file descriptors the
//     process may open (RLIMIT_NOFILE's soft limit, raised to the hard
//     limit at start by RaiseFileLimit) less a reserve for what else the
//     process opens (NATS and PostgreSQL connections, the stream's files
//     in `ledger dev`, tokens and keys). Past it Accept waits
//     (golang.org/x/net/netutil.LimitListener): the descriptors never run
//     out, and legitimate load that fills them is slowed, not failed.
//   - Connections that have not authenticated: at most MaxUnauthenticated
//     (half of MaxConns by default). When one more arrives, the oldest of
//     them is closed: a flood without a token can hold at most that many
//     descriptors, and never blocks Accept, so a producer's new
//     connection always gets in and is not the next to go (the flood's
//     own older connections are). A connection leaves the count once a
//     request on it presents a valid token (Authenticated).
//   - Time: the HTTP server's ReadHeaderTimeout (slowloris headers), and
//     an answer to a request without a valid token closes its connection
//     (the API sets Connection: close), so nothing unauthenticated idles
//     on keep-alive.
//
// The listener is the ledger's own only where the library has no such
// policy: netutil.LimitListener blocks at its limit, which is right for a
// ceiling of legitimate connections and wrong for a flood (a producer's
// new connection would wait in the kernel's queue behind the flood's).
package connlimit

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"golang.org/x/net/netutil"
)

// DefaultReserve is the file descriptors kept for everything but the
// HTTP server's connections: NATS and PostgreSQL connections (a few
// dozen), the stream's message blocks and the store's files when NATS is
// embedded (`ledger dev`: its own client connections are counted apart,
// by ledger dev), logs, tokens and keys, with room to spare.
const DefaultReserve = 1024

// MinConns is the fewest connections the budget may leave: below it the
// file limit is too low to serve at all.
const MinConns = 64

// ErrLowFileLimit: RLIMIT_NOFILE leaves too few descriptors for
// connections after the reserve.
var ErrLowFileLimit = errors.New("connlimit: file descriptor limit too low")

// Budget is how many HTTP connections the process may hold: its file
// limit (RaiseFileLimit) less reserve.
func Budget(reserve int) (int, error) {
	soft, err := RaiseFileLimit()
	if err != nil {
		return 0, err
	}
	n := int(min(soft, 1<<30)) - reserve
	if n < MinConns {
		return 0, fmt.Errorf("%w: RLIMIT_NOFILE is %d, the reserve %d: raise it (ulimit -n, LimitNOFILE=) to at least %d", ErrLowFileLimit, soft, reserve, reserve+MinConns)
	}
	return n, nil
}

// Listener bounds the connections of the listener it wraps (package doc).
type Listener struct {
	net.Listener
	maxConns, maxUnauth int
	open                int64 // guarded by mu

	mu      sync.Mutex
	unauth  list.List      // of *Conn not authenticated yet, oldest first
	byOwner map[string]int // authenticated connections by the token they authenticated with
	evicted atomic.Int64
}

// Listen wraps l: at most maxConns connections at once (Accept waits
// past it), of which at most maxUnauth not authenticated (the oldest is
// closed when one more arrives). maxUnauth <= 0 means maxConns/2.
func Listen(l net.Listener, maxConns, maxUnauth int) *Listener {
	if maxUnauth <= 0 || maxUnauth > maxConns {
		maxUnauth = max(maxConns/2, 1)
	}
	return &Listener{Listener: netutil.LimitListener(l, maxConns), maxConns: maxConns, maxUnauth: maxUnauth, byOwner: map[string]int{}}
}

// MaxConns is the bound on all connections.
func (l *Listener) MaxConns() int { return l.maxConns }

// Open is how many connections are open.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.open)
}

// MaxUnauthenticated is the bound on connections not authenticated.
func (l *Listener) MaxUnauthenticated() int { return l.maxUnauth }

// Evicted is how many connections were closed to make room for newer
// ones before they authenticated.
func (l *Listener) Evicted() int64 { return l.evicted.Load() }

// Unauthenticated is how many open connections have not authenticated.
func (l *Listener) Unauthenticated() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unauth.Len()
}

// Accept waits for a connection (and for room for it under maxConns),
// closing the oldest unauthenticated ones beyond maxUnauth.
func (l *Listener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &Conn{Conn: nc, l: l}
	var victims []*Conn
	l.mu.Lock()
	for l.unauth.Len() >= l.maxUnauth {
		v := l.unauth.Remove(l.unauth.Front()).(*Conn)
		v.elem = nil
		victims = append(victims, v)
	}
	c.elem = l.unauth.PushBack(c)
	l.open++
	l.mu.Unlock()
	for _, v := range victims {
		l.evicted.Add(1)
		_ = v.Close() // the server's goroutine on it ends with a read error
	}
	return c, nil
}

// Conn is a connection of a Listener.
type Conn struct {
	net.Conn
	l      *Listener
	elem   *list.Element // in l.unauth while not authenticated; guarded by l.mu
	authed atomic.Bool
	owner  string // the token it authenticated with; guarded by l.mu
	closed bool   // guarded by l.mu
}

// Authenticated marks the connection as one whose client presented a
// valid token: it is no longer counted against the unauthenticated bound
// nor closed for newer connections.
func (c *Conn) Authenticated() { c.AuthenticatedAs("", 0) }

// AuthenticatedAs marks the connection as authenticated with the token
// named owner, unless that token already holds limit authenticated
// connections (limit <= 0: no bound): then it stays unauthenticated (the
// server closes it after its answer, and a newer connection may evict
// it), so one token cannot hold the connections every other client
// needs. It reports whether the connection is authenticated.
func (c *Conn) AuthenticatedAs(owner string, limit int) bool {
	if c.authed.Load() {
		return true
	}
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed || (limit > 0 && l.byOwner[owner] >= limit) {
		return false
	}
	if c.authed.CompareAndSwap(false, true) {
		c.owner = owner
		l.byOwner[owner]++
		if c.elem != nil {
			l.unauth.Remove(c.elem)
			c.elem = nil
		}
	}
	return true
}

// IsAuthenticated reports whether a request on the connection presented
// a valid token.
func (c *Conn) IsAuthenticated() bool { return c.authed.Load() }

// Close closes the connection and forgets it.
func (c *Conn) Close() error {
	c.l.mu.Lock()
	if c.elem != nil {
		c.l.unauth.Remove(c.elem)
		c.elem = nil
	}
	if !c.closed {
		c.closed = true
		c.l.open--
		if c.authed.Load() {
			if c.l.byOwner[c.owner]--; c.l.byOwner[c.owner] <= 0 {
				delete(c.l.byOwner, c.owner)
			}
		}
	}
	c.l.mu.Unlock()
	return c.Conn.Close()
}

type connKey struct{}

// ConnContext is the http.Server's ConnContext: it puts the connection
// (a *Conn, under TLS too) in each request's context, for Authenticated
// and IsAuthenticated.
func ConnContext(ctx context.Context, nc net.Conn) context.Context {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if c, ok := nc.(*Conn); ok {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// Authenticated marks the connection of the request whose context is
// ctx as authenticated (nothing when it is not a Listener's).
func Authenticated(ctx context.Context) { AuthenticatedAs(ctx, "", 0) }

// AuthenticatedAs is Conn.AuthenticatedAs for the connection of the
// request whose context is ctx (true when it is not a Listener's).
func AuthenticatedAs(ctx context.Context, owner string, limit int) bool {
	if c, ok := ctx.Value(connKey{}).(*Conn); ok {
		return c.AuthenticatedAs(owner, limit)
	}
	return true
}

// IsAuthenticated reports whether the connection of the request whose
// context is ctx has authenticated (false when it is not a Listener's).
func IsAuthenticated(ctx context.Context) bool {
	c, ok := ctx.Value(connKey{}).(*Conn)
	return ok && c.IsAuthenticated()
}
