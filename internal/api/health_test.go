package api_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	healthprobe "github.com/cluster-ledger/ledger/internal/health"
	"github.com/cluster-ledger/ledger/internal/pgcluster"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/migrations"
)

// A read that waits on a lock longer than the read timeout is answered
// 503 with Retry-After, and the query is cancelled (the lock holder is
// not kept waiting for it afterwards).
func TestReadTimeout(t *testing.T) {
	base, roles, _ := readServerAs(t, api.WithReadTimeout(300*time.Millisecond))
	db := testdb.Pool(t, roles.Admin) // holds the lock: whatever holds it, reads must not hang
	ctx := context.Background()
	// A pool, so that the pools list has a page to summarise.
	exec(t, db, `INSERT INTO checkpoints (pool, last_seq, state_hash, chain_hash) VALUES ('p', 7, '\x00', '\x00')`)
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE consumer_state, decisions IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// The console's reads too (its live stream excepted).
	for _, path := range []string{"/v1/pools/p/allocations", "/v1/pools/p/decisions", "/v1/pools", "/v1/pools/p", "/v1/pools/p/timeline"} {
		start := time.Now()
		resp, raw := getWithin(t, 10*time.Second, base+path, "")
		took := time.Since(start)
		errorOf(t, path, resp, raw, 503, "read_timeout")
		if resp.Header.Get("Retry-After") == "" || took > 3*time.Second {
			t.Errorf("%s: Retry-After %q after %v", path, resp.Header.Get("Retry-After"), took)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Reads come back once the lock is gone. The read timeout is 300 ms,
	// which one read on a loaded machine can pass on its own (CI saw a
	// 503 here), so a few tries are given.
	var res client.Allocations
	code := 0
	for deadline := time.Now().Add(10 * time.Second); code != 200 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		code = getJSON(t, base+"/v1/pools/p/allocations", &res)
	}
	if code != 200 {
		t.Errorf("after the lock is gone: %d for 10 s", code)
	}
}

// /healthz says the stream is missing (503) once it is deleted, and
// reveals no address or error text.
func TestHealthzStreamDeleted(t *testing.T) {
	natsURL := testenv.NATS(t)
	l := newLedger(t, natsURL)
	code, h := health(t, l)
	if code != 200 || h.Status != "ok" || h.Stream != "ok" {
		t.Fatalf("healthy ledger: %d %+v", code, h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Only the admin identity may (the ledger's is refused: TestLeastPrivilege).
	if err := testenv.JetStream(t, natsURL).DeleteStream(ctx, stream.Name); err != nil {
		t.Fatal(err)
	}
	pastProbeCache()
	code, h = health(t, l)
	if code != 503 || h.Status != "down" || h.Stream != "missing" {
		t.Errorf("stream deleted: %d %+v, want 503 with stream missing", code, h)
	}
	resp, raw := send(t, http.MethodGet, l.url+"/healthz", "", "", nil)
	if s := string(raw); strings.Contains(s, "127.0.0.1") || strings.Contains(s, "nats://") || resp.Header.Get("Retry-After") == "" {
		t.Errorf("healthz answer %q (Retry-After %q): no addresses, and a Retry-After", s, resp.Header.Get("Retry-After"))
	}
}

// /healthz says the stream is full once it holds its most messages, and
// not writable once it is sealed (503 both).
func TestHealthzStreamNotWritable(t *testing.T) {
	natsURL := testenv.NATS(t)
	l := newLedger(t, natsURL)
	setup(l, "p")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js := testenv.JetStream(t, natsURL) // admin: the only identity that may change the stream
	s, err := js.Stream(ctx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxMsgs = int64(s.CachedInfo().State.Msgs)
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if code, h := health(t, l); code != 503 || h.Status != "down" || h.Stream != "full" {
		t.Errorf("stream at its most messages: %d %+v, want 503 with stream full", code, h)
	}
	cfg.MaxMsgs, cfg.Sealed = -1, true
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	pastProbeCache()
	if code, h := health(t, l); code != 503 || h.Status != "down" || h.Stream != "not writable" {
		t.Errorf("sealed stream: %d %+v, want 503 with stream not writable", code, h)
	}
}

// Liveness is "an append would be stored": with PostgreSQL stopped
// /healthz stays 200 and a producer's appends are stored, while /readyz
// answers 503 (the projection cannot be read); a projection further
// behind than the bound is not ready either, and ready again once the
// projector catches up.
func TestHealthzLiveWithPostgresDownReadyzNot(t *testing.T) {
	dir, err := os.MkdirTemp("", "ledger-health-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // PostgreSQL may run as its own user
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := pgcluster.Start(ctx, pgcluster.WithDataDir(filepath.Join(dir, "data")), pgcluster.WithFsync(false), pgcluster.WithRoles(migrations.Roles...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })
	natsURL := testenv.NATS(t)
	scheduler, entry := mustToken(t, "scheduler", []auth.Scope{auth.ScopeAppend, auth.ScopePlan}, "p")
	l, db, _ := statusLedgerWith(t, natsURL, clusterRoles(pg), []api.Option{api.WithReadyLag(time.Second)}, entry)
	l.token = scheduler
	setup(l, "p")
	project(t, natsURL, db, 2)

	live := func() (int, api.HealthResponse) {
		t.Helper()
		resp, raw := send(t, http.MethodGet, l.url+"/healthz", "", "", nil)
		var h api.HealthResponse
		mustUnmarshal(t, raw, &h)
		return resp.StatusCode, h
	}
	ready := func() (int, api.ReadyResponse) {
		t.Helper()
		resp, raw := send(t, http.MethodGet, l.url+"/readyz", "", "", nil)
		var r api.ReadyResponse
		mustUnmarshal(t, raw, &r)
		if resp.StatusCode == 503 && resp.Header.Get("Retry-After") == "" {
			t.Errorf("/readyz 503 without Retry-After")
		}
		return resp.StatusCode, r
	}
	if code, h := live(); code != 200 || h.Status != "ok" {
		t.Fatalf("all up: /healthz %d %+v", code, h)
	}
	if code, r := ready(); code != 200 || r.Status != "ok" || r.Projection != "current" {
		t.Fatalf("all up: /readyz %d %+v", code, r)
	}

	// The projection falls behind: the projector is stopped and an
	// event waits for longer than the bound (1 s here).
	l.mustPost("p", demand(map[string]int{"/a": 2}))
	time.Sleep(1500 * time.Millisecond)
	if code, r := ready(); code != 503 || r.Projection != "behind" || r.LagSeconds == nil || *r.LagSeconds < 1 {
		t.Errorf("projection 1.5s behind, bound 1s: /readyz %d %+v", code, r)
	}
	project(t, natsURL, db, 3)
	pastProbeCache()
	if code, r := ready(); code != 200 || r.Projection != "current" {
		t.Errorf("caught up again: /readyz %d %+v", code, r)
	}

	if err := pg.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	pastProbeCache()
	if code, h := live(); code != 200 || h.Status != "ok" || h.NATS != "ok" || h.Stream != "ok" {
		t.Errorf("PostgreSQL stopped: /healthz %d %+v, want 200 ok", code, h)
	}
	if code, r := ready(); code != 503 || r.Status != "not ready" || r.Postgres != "down" {
		t.Errorf("PostgreSQL stopped: /readyz %d %+v, want 503 not ready", code, r)
	}
	// Appends work: the log is the truth; the projection catches up later.
	for i := range 5 {
		res := l.mustPost("p", demand(map[string]int{"/a": 3 + i, "/b": i}))
		if res.Events[0].Seq != uint64(4+i) {
			t.Errorf("append %d with PostgreSQL down: %+v", i, res)
		}
	}
}

// pastProbeCache waits until the probes' last answers are too old to be
// reused (health.CacheFor), so that the next one sees a change.
func pastProbeCache() { time.Sleep(healthprobe.CacheFor + 100*time.Millisecond) }
