package natsserver

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"

	"github.com/nats-io/nats-server/v2/server"
)

// Errors of cluster membership; match them with errors.Is.
var (
	// ErrNoRouteAuth: WithCluster without WithRouteAuth. Routes are
	// always authenticated: an open route port lets anyone join the
	// cluster and read every message.
	ErrNoRouteAuth = errors.New("natsserver: cluster routes need credentials (use WithRouteAuth)")
	// ErrBadCluster: a cluster name, route address or size that cannot be.
	ErrBadCluster = errors.New("natsserver: bad cluster configuration")
)

type clusterConfig struct {
	name   string
	listen string   // host:port of this server's routes
	routes []string // host:port of the members' routes (this one's may be among them)
}

// WithCluster makes the server a member of the JetStream cluster name:
// it listens for routes on listen (host:port) and connects to routes
// (host:port of every member; its own address may be among them). The
// server name (WithName) must be unique in the cluster and stay the same
// across restarts: JetStream's Raft groups know their peers by it. Routes
// must be authenticated: see WithRouteAuth.
func WithCluster(name, listen string, routes ...string) Option {
	return func(c *config) { c.cluster = &clusterConfig{name: name, listen: listen, routes: routes} }
}

// WithRouteAuth sets the user and password the cluster's servers present
// to each other (internal/natsauth keeps them in a 0600 file). A route
// that presents other credentials, or none, is refused.
func WithRouteAuth(user, password string) Option {
	return func(c *config) { c.routeUser, c.routePass = user, password }
}

// applyCluster sets the cluster options of sopts, when the server is a
// member of a cluster.
func (c *config) applyCluster(sopts *server.Options) error {
	cl := c.cluster
	if cl == nil {
		return nil
	}
	if c.routeUser == "" || c.routePass == "" {
		return ErrNoRouteAuth
	}
	if cl.name == "" {
		return fmt.Errorf("%w: no cluster name", ErrBadCluster)
	}
	host, port, err := splitAddr(cl.listen)
	if err != nil {
		return err
	}
	if port > 0 {
		if err := canListen(net.JoinHostPort(host, strconv.Itoa(port))); err != nil {
			return err
		}
	}
	sopts.Cluster = server.ClusterOpts{
		Name: cl.name, Host: host, Port: port,
		Username: c.routeUser, Password: c.routePass,
	}
	for _, r := range cl.routes {
		if _, _, err := splitAddr(r); err != nil {
			return err
		}
		sopts.Routes = append(sopts.Routes, &url.URL{
			Scheme: "nats-route", Host: r, User: url.UserPassword(c.routeUser, c.routePass),
		})
	}
	return nil
}

// splitAddr splits a route address host:port (port 0 or -1: a free one).
func splitAddr(addr string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%w: route address %q: %w", ErrBadCluster, addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("%w: route address %q: port must be 0..65535 or -1", ErrBadCluster, addr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// RouteAddr is the address the server listens on for routes ("" when it
// is not a member of a cluster).
func (s *Server) RouteAddr() string {
	if a := s.ns.ClusterAddr(); a != nil {
		return a.String()
	}
	return ""
}
