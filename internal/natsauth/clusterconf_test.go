package natsauth_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/cluster-ledger/ledger/internal/natsauth"
)

// freeRoutePorts returns n ports of 127.0.0.1 nothing listens on.
func freeRoutePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		l.Close()
	}
	return ports
}

// peers lists, sorted and comma-joined, the servers s has a route with,
// itself included (so a full mesh of three reads the same everywhere).
func peers(t *testing.T, s *server.Server) string {
	t.Helper()
	rz, err := s.Routez(nil)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{s.Name()}
	for _, r := range rz.Routes {
		if !slices.Contains(names, r.RemoteName) {
			names = append(names, r.RemoteName)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// member starts a nats-server from what a compose member loads: a
// configuration including the identities and the cluster file.
func member(t *testing.T, name, dir string, routePort int) *server.Server {
	t.Helper()
	conf := filepath.Join(dir, name+".conf")
	body := fmt.Sprintf("server_name: %s\nport: -1\ninclude nats-auth.conf\ninclude nats-cluster.conf\n", name)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	// The file's listener is the compose one (0.0.0.0:6222); on one host
	// each member needs its own port.
	if opts.Cluster.Port != 6222 || opts.Cluster.Username == "" || len(opts.Routes) != 3 {
		t.Fatalf("%s: cluster %+v, routes %v", name, opts.Cluster, opts.Routes)
	}
	opts.Cluster.Host, opts.Cluster.Port = "127.0.0.1", routePort
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatalf("%s not ready", name)
	}
	return s
}

// Three servers configured from `ledger nats init --routes` files join
// into one cluster; a server with another route password is refused.
func TestClusterConfigRoutesAuthenticated(t *testing.T) {
	dir := t.TempDir()
	keys, err := natsauth.Init(filepath.Join(dir, "nats-auth"))
	if err != nil {
		t.Fatal(err)
	}
	var auth strings.Builder
	if err := natsauth.WriteServerConfig(&auth, keys, natsauth.DefaultLayout); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nats-auth.conf"), []byte(auth.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	route, err := natsauth.InitRoute(filepath.Join(dir, "nats-auth"))
	if err != nil {
		t.Fatal(err)
	}
	ports := freeRoutePorts(t, 4)
	var routes []string
	for _, p := range ports[:3] {
		routes = append(routes, fmt.Sprintf("127.0.0.1:%d", p))
	}
	var b strings.Builder
	c := natsauth.Cluster{Name: "ledger", Listen: "0.0.0.0:6222", Routes: routes}
	if err := natsauth.WriteClusterConfig(&b, c, route); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nats-cluster.conf"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var members []*server.Server
	for i, p := range ports[:3] {
		members = append(members, member(t, fmt.Sprintf("n%d", i), dir, p))
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, s := range members {
		for peers(t, s) != "n0,n1,n2" {
			if time.Now().After(deadline) {
				t.Fatalf("%s is routed to %q, want the two others", s.Name(), peers(t, s))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if opts := members[0].ClusterName(); opts != "ledger" {
		t.Errorf("cluster name %q", opts)
	}

	// An intruder with the right addresses but another password.
	other := t.TempDir()
	for _, f := range []string{"nats-auth.conf"} {
		raw, _ := os.ReadFile(filepath.Join(dir, f))
		os.WriteFile(filepath.Join(other, f), raw, 0o600)
	}
	var bad strings.Builder
	if err := natsauth.WriteClusterConfig(&bad, c, natsauth.Route{User: route.User, Password: strings.Repeat("0", 64)}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(other, "nats-cluster.conf"), []byte(bad.String()), 0o600)
	intruder := member(t, "intruder", other, ports[3])
	time.Sleep(2 * time.Second)
	if n := intruder.NumRoutes(); n != 0 {
		t.Errorf("a server with another route password has %d routes", n)
	}
	for _, s := range members {
		if p := peers(t, s); p != "n0,n1,n2" {
			t.Errorf("%s is routed to %q with the intruder up", s.Name(), p)
		}
	}

	// Bad input is refused, naming it.
	for _, bad := range []natsauth.Cluster{
		{Name: "ledger", Listen: "0.0.0.0:6222"},
		{Name: "ledger", Listen: "0.0.0.0:6222", Routes: []string{"nats-1"}},
		{Name: "ledger", Listen: "0.0.0.0:6222", Routes: []string{"u:p@nats-1:6222"}},
		{Name: "", Listen: "0.0.0.0:6222", Routes: []string{"nats-1:6222"}},
	} {
		if err := bad.Validate(); !errors.Is(err, natsauth.ErrBadRoute) {
			t.Errorf("%+v: %v, want ErrBadRoute", bad, err)
		}
	}
}

// TestClusterRoutePorts: a port out of range or a route named twice was
// written into nats-cluster.conf as given, for nats-server to refuse at
// its start; `ledger nats init` now refuses it, naming it.
func TestClusterRoutePorts(t *testing.T) {
	for _, bad := range []natsauth.Cluster{
		{Name: "ledger", Listen: "0.0.0.0:70000", Routes: []string{"nats-1:6222"}},
		{Name: "ledger", Listen: "0.0.0.0:6222", Routes: []string{"nats-1:0"}},
		{Name: "ledger", Listen: "0.0.0.0:6222", Routes: []string{"nats-1:99999"}},
		{Name: "ledger", Listen: "0.0.0.0:6222", Routes: []string{"nats-1:route"}},
		{Name: "ledger", Listen: "0.0.0.0:6222", Routes: []string{"nats-1:6222", "nats-2:6222", "nats-1:6222"}},
	} {
		if err := bad.Validate(); !errors.Is(err, natsauth.ErrBadRoute) {
			t.Errorf("%+v: %v, want ErrBadRoute", bad, err)
		}
	}
	good := natsauth.Cluster{Name: "ledger", Listen: "0.0.0.0:6222", Routes: []string{"nats-1:6222", "nats-2:6222", "nats-3:6222"}}
	if err := good.Validate(); err != nil {
		t.Errorf("%+v: %v", good, err)
	}
}
