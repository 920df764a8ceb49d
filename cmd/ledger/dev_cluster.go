package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/natsserver"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// Where `ledger dev` keeps JetStream's store: one server, or a cluster.
const (
	devNATSDir    = "nats"
	devClusterDir = "nats-cluster"
)

// ErrBadNATSCluster: --nats-cluster is neither 1 nor 3.
var ErrBadNATSCluster = errors.New("--nats-cluster must be 1 (one server) or 3 (a cluster that survives the loss of one)")

// checkCluster checks --nats-cluster and --replicas, and sets the
// default replicas: one copy per server.
func (cfg *devConfig) checkCluster() error {
	if cfg.natsCluster != 1 && cfg.natsCluster != 3 {
		// 2 servers survive no loss (a majority of 2 is 2), and more than 3
		// on one machine prove nothing 3 do not.
		return fmt.Errorf("%w: got %d", ErrBadNATSCluster, cfg.natsCluster)
	}
	if cfg.replicas == 0 {
		cfg.replicas = cfg.natsCluster
	}
	if cfg.replicas < 0 || cfg.replicas > stream.MaxReplicas {
		return fmt.Errorf("%w: --replicas %d", stream.ErrBadReplicas, cfg.replicas)
	}
	if cfg.replicas > cfg.natsCluster {
		return fmt.Errorf("--replicas: %w", &stream.ReplicasError{Replicas: cfg.replicas, Servers: cfg.natsCluster})
	}
	return nil
}

// startDevNATS starts the embedded JetStream (one server, or a cluster of
// --nats-cluster) and returns the URL clients connect with and how to
// stop it.
func startDevNATS(ctx context.Context, log *slog.Logger, cfg devConfig, data string, keys natsauth.Keys) (string, func(), error) {
	single, cluster := filepath.Join(data, devNATSDir), filepath.Join(data, devClusterDir)
	if cfg.natsCluster == 1 {
		if exists(cluster) {
			return "", nil, fmt.Errorf("%s holds the log of a NATS cluster: run dev with --nats-cluster 3, or use another --data", cluster)
		}
		ns, err := natsserver.Start(ctx, natsserver.WithStoreDir(single), natsserver.WithListen(cfg.natsAddr),
			natsserver.WithUsers(natsauth.Users(keys)), natsserver.WithSync(cfg.natsSync))
		if err != nil {
			return "", nil, fmt.Errorf("start NATS: %w", err)
		}
		return ns.URL(), ns.Shutdown, nil
	}
	if exists(single) {
		return "", nil, fmt.Errorf("%s holds the log of a single NATS server: run dev without --nats-cluster, or use another --data", single)
	}
	listen, err := clusterListen(cfg.natsAddr, cfg.natsCluster)
	if err != nil {
		return "", nil, err
	}
	route, err := natsauth.InitRoute(filepath.Join(data, devAuthDir))
	if err != nil {
		return "", nil, fmt.Errorf("NATS route credentials: %w", err)
	}
	log.Info("starting a NATS cluster", "servers", cfg.natsCluster, "listen", listen)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := natsserver.StartCluster(sctx, natsserver.ClusterSpec{Name: natsserver.DefaultName, Size: cfg.natsCluster, Dir: cluster, Listen: listen},
		natsserver.WithUsers(natsauth.Users(keys)), natsserver.WithSync(cfg.natsSync),
		natsserver.WithRouteAuth(route.User, route.Password))
	if err != nil {
		return "", nil, fmt.Errorf("start the NATS cluster: %w", err)
	}
	return c.URL(), c.Shutdown, nil
}

// clusterListen gives n servers the client address addr and the n-1
// ports after it (all free ports when addr's port is 0).
func clusterListen(addr string, n int) ([]string, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--nats %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port+n-1 > 65535 {
		return nil, fmt.Errorf("--nats %q: the port and the %d after it must be ports", addr, n-1)
	}
	out := make([]string, n)
	for i := range n {
		p := port + i
		if port == 0 {
			p = -1 // a free port each
		}
		out[i] = net.JoinHostPort(host, strconv.Itoa(p))
	}
	return out, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
