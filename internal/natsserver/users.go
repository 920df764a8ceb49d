package natsserver

import (
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// ErrBadUsers: a WithUsers list holds an invalid or repeated nkey, or a
// negative connection bound.
var ErrBadUsers = errors.New("natsserver: bad users")

// User is an nkey identity of the server: its public key, its rights,
// and the most client connections it may hold at once.
//
// nats-server bounds connections per server (max_connections) and per
// account, not per user, and the ledger's identities share one account
// (the one holding the LEDGER stream). Without a bound per identity, a
// process holding one identity's credentials could take every slot of
// max_connections and keep the others out: an auditor tool holding
// 1,021 connections refused a restarting projector its connection.
type User struct {
	Nkey        string
	Permissions *server.Permissions // nil: no restriction
	// MaxConnections is the most connections the identity may hold at
	// once; 0 means no bound but the server's.
	MaxConnections int
}

// WithUsers makes the server require authentication: only these nkey
// users may connect, each with its rights, and none with more than its
// MaxConnections at once (a connection past the bound is refused as an
// authorization violation, the others keep theirs). Without it the
// server accepts anonymous connections (benchmarks on a private port
// only).
func WithUsers(users []User) Option { return func(c *config) { c.users = users } }

// userAuth is the server's authentication when it has users: nats-server's
// own nkey check (the client signs the server's nonce), then the
// identity's connection bound. It is nats-server's documented hook for
// what its configuration cannot express (server.Authentication).
type userAuth struct {
	users map[string]User
	srv   atomic.Pointer[server.Server] // set once the server exists

	mu sync.Mutex
	// held are the ids of the connections each bounded identity was
	// admitted on; some may have closed since (nats-server tells no
	// one), so a count at the bound is checked against the server's
	// open connections before a connection is refused.
	held map[string]map[uint64]struct{}
}

func newUserAuth(users []User) (*userAuth, error) {
	a := &userAuth{users: make(map[string]User, len(users)), held: map[string]map[uint64]struct{}{}}
	for i, u := range users {
		if !nkeys.IsValidPublicUserKey(u.Nkey) {
			// Not quoted: a seed given by mistake must not reach a log.
			return nil, fmt.Errorf("%w: user %d is not a public user nkey (U...)", ErrBadUsers, i+1)
		}
		if _, dup := a.users[u.Nkey]; dup {
			return nil, fmt.Errorf("%w: %s is listed twice", ErrBadUsers, u.Nkey)
		}
		if u.MaxConnections < 0 {
			return nil, fmt.Errorf("%w: %s may hold %d connections (0 for no bound, or more)", ErrBadUsers, u.Nkey, u.MaxConnections)
		}
		a.users[u.Nkey] = u
	}
	return a, nil
}

// Check admits c when it signed the server's nonce with a known user's
// key and that user holds fewer than its bound of connections.
func (a *userAuth) Check(c server.ClientAuthentication) bool {
	if c.Kind() != server.CLIENT {
		return false
	}
	opts := c.GetOpts()
	u, ok := a.users[opts.Nkey]
	if !ok || !signed(opts.Nkey, opts.Sig, c.GetNonce()) {
		return false
	}
	if u.MaxConnections > 0 && !a.admit(u, c.GetID()) {
		if s := a.srv.Load(); s != nil {
			s.Warnf("refused a connection of %s: it holds its most connections (%d)", u.Nkey, u.MaxConnections)
		}
		return false
	}
	c.RegisterUser(&server.User{Permissions: u.Permissions})
	return true
}

// signed reports whether sig (base64, URL or standard alphabet, as
// nats-server takes it) is pub's signature of nonce.
func signed(pub, sig string, nonce []byte) bool {
	if sig == "" || len(nonce) == 0 {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		if raw, err = base64.StdEncoding.DecodeString(sig); err != nil {
			return false
		}
	}
	kp, err := nkeys.FromPublicKey(pub)
	return err == nil && kp.Verify(nonce, raw) == nil
}

// admit counts connection id against u's bound, or says it is reached.
func (a *userAuth) admit(u User, id uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := a.held[u.Nkey]
	if ids == nil {
		ids = map[uint64]struct{}{}
		a.held[u.Nkey] = ids
	}
	if len(ids) >= u.MaxConnections {
		a.forgetClosed(u.Nkey, ids)
	}
	if len(ids) >= u.MaxConnections {
		return false
	}
	ids[id] = struct{}{}
	return true
}

// forgetClosed drops from ids the connections that are no longer open.
// It runs only at the bound, so its cost (a scan of the server's
// connections) is paid by the identity at its bound, not by every
// connection.
func (a *userAuth) forgetClosed(pub string, ids map[uint64]struct{}) {
	s := a.srv.Load()
	if s == nil {
		return
	}
	// The server's open connections that presented pub (an
	// authenticated one among them is one this bound admitted).
	open, err := s.Connz(&server.ConnzOptions{User: pub, State: server.ConnOpen, Limit: s.NumClients() + 1})
	if err != nil {
		return // keep counting them: refusing is the safe side
	}
	live := make(map[uint64]struct{}, len(open.Conns))
	for _, ci := range open.Conns {
		live[ci.Cid] = struct{}{}
	}
	for id := range ids {
		if _, ok := live[id]; !ok {
			delete(ids, id)
		}
	}
}
