package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestDevNATSClusterFlags: --nats-cluster other than 1 or 3, and more
// replicas than servers, are refused before anything starts.
func TestDevNATSClusterFlags(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		cluster, replicas int
		want              error
		says              string
	}{
		{2, 0, ErrBadNATSCluster, "got 2"},
		{5, 0, ErrBadNATSCluster, "got 5"},
		{1, 3, stream.ErrTooManyReplicas, "3 replicas asked, but the NATS cluster has 1 server(s)"},
		{3, 4, stream.ErrTooManyReplicas, "4 replicas asked, but the NATS cluster has 3 server(s)"},
		{3, -1, stream.ErrBadReplicas, "-1"},
	} {
		data := filepath.Join(t.TempDir(), "data")
		err := runDev(ctx, io.Discard, devConfig{data: data, natsCluster: tc.cluster, replicas: tc.replicas})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("--nats-cluster %d --replicas %d: %v; want %v saying %q", tc.cluster, tc.replicas, err, tc.want, tc.says)
		}
		if exists(data) {
			t.Errorf("--nats-cluster %d --replicas %d: created %s before refusing", tc.cluster, tc.replicas, data)
		}
	}
}

// TestDevNATSCluster runs `ledger dev --nats-cluster 3` in this process:
// NATS_URL lists three servers that each accept the printed identities,
// the stream has 3 replicas on them, appends work, and a second start on
// the same DATA without --nats-cluster is refused.
func TestDevNATSCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data := filepath.Join(t.TempDir(), "data")
	cfg := devConfig{data: data, httpAddr: "127.0.0.1:0", natsAddr: "127.0.0.1:0", natsCluster: 3,
		databaseURL: testenv.Postgres(t), duplicateWindow: stream.DuplicateWindow, snapshotEvery: 100}
	cfg.natsSync.Always = true
	env, done := startDevInProcess(t, ctx, cfg)

	urls := strings.Split(env["NATS_URL"], ",")
	if len(urls) != 3 {
		t.Fatalf("NATS_URL=%s, want 3 servers", env["NATS_URL"])
	}
	for _, u := range urls {
		nc, err := natsauth.Connect(u, env["LEDGER_NATS_CREDS"])
		if err != nil {
			t.Fatalf("the auditor cannot connect to %s: %v", u, err)
		}
		nc.Close()
	}
	nc, err := natsauth.Connect(env["NATS_URL"], filepath.Join(data, devAuthDir, "admin.nk"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	s, err := js.Stream(ctx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	if info := s.CachedInfo(); info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream replicas %d, cluster %+v; want 3", info.Config.Replicas, info.Cluster)
	}
	rq, _ := http.NewRequest(http.MethodPost, env["LEDGER_URL"]+"/v1/pools/demo/events",
		strings.NewReader(`{"id":"h1","type":"host_up","data":{"host":"h1","slots":4}}`))
	rq.Header.Set("Content-Type", "application/json")
	rq.Header.Set("Authorization", "Bearer "+env["LEDGER_TOKEN"])
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"seq":1`) {
		t.Fatalf("append on the cluster: %d %s", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("dev did not stop cleanly: %v", err)
	}
	cfg.natsCluster = 1
	if err := runDev(context.Background(), io.Discard, cfg); err == nil || !strings.Contains(err.Error(), "holds the log of a NATS cluster") {
		t.Errorf("single-server dev on a cluster's DATA: %v", err)
	}
}

// startDevInProcess runs runDev until ctx ends and returns the lines it
// printed once ready, and its result.
func startDevInProcess(t *testing.T, ctx context.Context, cfg devConfig) (map[string]string, <-chan error) {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := runDev(ctx, pw, cfg)
		pw.Close()
		done <- err
	}()
	env := map[string]string{}
	sc := bufio.NewScanner(pr)
	for env["DATABASE_URL"] == "" && sc.Scan() {
		if k, v, ok := parseExport(sc.Text()); ok {
			env[k] = v
		}
	}
	if env["DATABASE_URL"] == "" {
		t.Fatalf("dev stopped before it was ready: %v", <-done)
	}
	go io.Copy(io.Discard, pr)
	return env, done
}

// parseExport reads a line `ledger dev` prints, export NAME='VALUE', as
// a POSIX shell would.
func parseExport(line string) (name, value string, ok bool) {
	rest, found := strings.CutPrefix(line, "export ")
	if !found {
		return "", "", false
	}
	name, quoted, found := strings.Cut(rest, "=")
	if !found || len(quoted) < 2 || quoted[0] != '\'' || quoted[len(quoted)-1] != '\'' {
		return "", "", false
	}
	return name, strings.ReplaceAll(quoted[1:len(quoted)-1], `'\''`, "'"), true
}
