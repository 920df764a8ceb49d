package natsserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ClusterSpec is the shape of a cluster StartCluster runs in this process.
type ClusterSpec struct {
	// Name of the cluster (default "ledger").
	Name string
	// Size is the number of servers (at least 1).
	Size int
	// Dir holds member i's store in Dir/<Name>-<i> (i from 1).
	Dir string
	// Listen are the members' client addresses; default (nil) free ports
	// of 127.0.0.1. Route addresses are always free ports of 127.0.0.1.
	Listen []string
}

// Cluster is a JetStream cluster of embedded servers, all members of one
// process (for `ledger dev --nats-cluster` and tests). Each member can be
// shut down and restarted on its store and its ports.
type Cluster struct {
	spec ClusterSpec
	mu   sync.Mutex
	srv  []*Server
	opts [][]Option
}

// StartCluster starts spec.Size servers with authenticated routes to one
// another, each with opts (WithRouteAuth is required; WithUsers and
// WithSync apply to all), and waits until JetStream has elected a meta
// leader that sees every member. Clients connect with URL, the
// comma-joined list of the members' client URLs.
func StartCluster(ctx context.Context, spec ClusterSpec, opts ...Option) (*Cluster, error) {
	if spec.Name == "" {
		spec.Name = DefaultName
	}
	if spec.Size < 1 || (spec.Listen != nil && len(spec.Listen) != spec.Size) {
		return nil, fmt.Errorf("%w: %d servers, %d client addresses", ErrBadCluster, spec.Size, len(spec.Listen))
	}
	// The route ports are chosen free before the members start, one after
	// the other; another process can bind one in between. Such a start is
	// made again with new ports, its members' stores removed when this
	// call made them (a cluster restarted on existing stores is never
	// touched).
	fresh := make([]bool, spec.Size)
	for i := range spec.Size {
		_, err := os.Stat(filepath.Join(spec.Dir, spec.Name+"-"+strconv.Itoa(i+1)))
		fresh[i] = os.IsNotExist(err)
	}
	for attempt := 1; ; attempt++ {
		c, err := startCluster(ctx, spec, opts...)
		if err == nil || attempt == 3 || !errors.Is(err, syscall.EADDRINUSE) || ctx.Err() != nil {
			return c, err
		}
		for i := range spec.Size {
			if fresh[i] {
				_ = os.RemoveAll(filepath.Join(spec.Dir, spec.Name+"-"+strconv.Itoa(i+1)))
			}
		}
	}
}

// startCluster is one attempt of StartCluster.
func startCluster(ctx context.Context, spec ClusterSpec, opts ...Option) (*Cluster, error) {
	routes := make([]string, spec.Size)
	listen := make([]string, spec.Size)
	for i := range spec.Size {
		var err error
		if routes[i], err = routeAddr(); err != nil {
			return nil, err
		}
		listen[i] = "127.0.0.1:-1"
		if spec.Listen != nil {
			listen[i] = spec.Listen[i]
		}
	}
	c := &Cluster{spec: spec}
	for i := range spec.Size {
		name := spec.Name + "-" + strconv.Itoa(i+1)
		o := append(append([]Option{}, opts...),
			WithName(name), WithStoreDir(filepath.Join(spec.Dir, name)), WithListen(listen[i]),
			WithCluster(spec.Name, routes[i], routes...))
		s, err := Start(ctx, o...)
		if err != nil {
			c.Shutdown()
			return nil, fmt.Errorf("cluster member %s: %w", name, err)
		}
		// A restart reuses the port the member was given.
		o = append(o, WithListen(strings.TrimPrefix(s.URL(), "nats://")))
		c.srv = append(c.srv, s)
		c.opts = append(c.opts, o)
	}
	if err := c.WaitMetaLeader(ctx); err != nil {
		c.Shutdown()
		return nil, err
	}
	return c, nil
}

// routeAddr picks a member's route address (a variable so that a test can
// hand out a taken one).
var routeAddr = freeAddr

// freeAddr is a free port of 127.0.0.1 (free now: the member binds it
// right after).
func freeAddr() (string, error) {
	// A port the kernel hands out for :0 is an ephemeral one, which it
	// also gives any outgoing connection as its local port: a member that
	// restarts on its port (its address is in the others' routes) could
	// find it taken by a connection, another member's reconnect among
	// them. A port below the ephemeral range is never given that way.
	if low, ok := ephemeralLow(); ok && low > 16000 {
		span := low - 15000
		start := int(uint32(time.Now().UnixNano()) % uint32(span))
		for i := range 200 {
			port := 15000 + (start+i*7919)%span
			if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
				addr := l.Addr().String()
				l.Close()
				return addr, nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("%w: no free port: %w", ErrStart, err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux).
func ephemeralLow() (int, bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false
	}
	low, err := strconv.Atoi(f[0])
	return low, err == nil
}

// Size is the number of members.
func (c *Cluster) Size() int { return c.spec.Size }

// Server is member i (from 0), running or shut down.
func (c *Cluster) Server(i int) *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.srv[i]
}

// URLs are the members' client URLs.
func (c *Cluster) URLs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	urls := make([]string, len(c.srv))
	for i, s := range c.srv {
		urls[i] = s.URL()
	}
	return urls
}

// URL is the comma-joined list of URLs, as nats.Connect takes it.
func (c *Cluster) URL() string { return strings.Join(c.URLs(), ",") }

// Restart starts member i again on its store directory and its ports,
// after a Shutdown of it (Restart shuts it down first if it is running).
// It returns once the member accepts connections; it may still be
// catching up with the others.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	c.mu.Lock()
	old, opts := c.srv[i], c.opts[i]
	c.mu.Unlock()
	old.Shutdown()
	s, err := Start(ctx, opts...)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.srv[i] = s
	c.mu.Unlock()
	return nil
}

// Shutdown stops every member.
func (c *Cluster) Shutdown() {
	c.mu.Lock()
	srv := append([]*Server(nil), c.srv...)
	c.mu.Unlock()
	for _, s := range srv {
		s.Shutdown()
	}
}

// running are the members that are not shut down.
func (c *Cluster) running() []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Server
	for _, s := range c.srv {
		if s.ns.Running() {
			out = append(out, s)
		}
	}
	return out
}

// WaitMetaLeader waits until a running member is JetStream's meta leader
// and sees every member as a peer, or ctx ends.
func (c *Cluster) WaitMetaLeader(ctx context.Context) error {
	return poll(ctx, "a JetStream meta leader", func() bool {
		for _, s := range c.running() {
			if s.ns.JetStreamIsLeader() && len(s.ns.JetStreamClusterPeers()) == c.spec.Size {
				return true
			}
		}
		return false
	})
}

// StreamLeader is the index of the member leading stream (of the global
// account, where the ledger's users are), -1 when none does.
func (c *Cluster) StreamLeader(stream string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.srv {
		if s.ns.Running() && s.ns.JetStreamIsStreamLeader(globalAccount, stream) {
			return i
		}
	}
	return -1
}

// WaitStreamLeader waits until a member leads stream and returns it.
func (c *Cluster) WaitStreamLeader(ctx context.Context, stream string) (int, error) {
	i := -1
	err := poll(ctx, "a leader of stream "+stream, func() bool { i = c.StreamLeader(stream); return i >= 0 })
	return i, err
}

// WaitStreamCurrent waits until member i holds every message of stream
// the leader committed.
func (c *Cluster) WaitStreamCurrent(ctx context.Context, i int, stream string) error {
	s := c.Server(i)
	return poll(ctx, fmt.Sprintf("member %d current on stream %s", i, stream), func() bool {
		return s.ns.JetStreamIsStreamCurrent(globalAccount, stream)
	})
}

const globalAccount = "$G"

// poll calls ok every 25ms until it holds or ctx ends.
func poll(ctx context.Context, what string, ok func() bool) error {
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	for !ok() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: no %s: %w", ErrNotReady, what, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}
