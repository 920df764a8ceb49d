package api_test

import (
	"context"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/pgcluster"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/migrations"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
)

// statusLedger is a ledger on a database, connected as the API's role;
// db is the projector's role on it, to stage what a projector writes.
// Its token has every scope, and writer is a token of the same server
// with the append scope only.
func statusLedger(t *testing.T, natsURL string, roles testdb.DB, extra ...auth.Entry) (l *ledger, db *pgxpool.Pool, writer string) {
	t.Helper()
	return statusLedgerWith(t, natsURL, roles, nil, extra...)
}

// statusLedgerWith is statusLedger with options for the server.
func statusLedgerWith(t *testing.T, natsURL string, roles testdb.DB, opts []api.Option, extra ...auth.Entry) (l *ledger, db *pgxpool.Pool, writer string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := migrations.Up(ctx, roles.Owner)
	if err != nil {
		t.Fatal(err)
	}
	db, err = pgxpool.New(ctx, roles.Projector)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	apiDB, err := pgxpool.New(ctx, roles.API)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(apiDB.Close)
	nc := testenv.Connect(t, natsURL, natsauth.Ledger)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	token, admin, err := auth.Generate("admin", auth.Scopes, []string{auth.AllPools})
	if err != nil {
		t.Fatal(err)
	}
	// A writer may append but not read: status is refused to it.
	var wr auth.Entry
	writer, wr, err = auth.Generate("writer", []auth.Scope{auth.ScopeAppend}, []string{auth.AllPools})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.New(append([]auth.Entry{admin, wr}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(ctx, js, apiDB, append([]api.Option{api.WithTokens(tokens), api.WithPublishTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &ledger{t: t, nc: nc, js: js, srv: srv, url: hs.URL, token: token}, db, writer
}

// status asks GET /v1/status and says how long it took.
func status(t *testing.T, l *ledger) (api.StatusResponse, time.Duration) {
	t.Helper()
	start := time.Now()
	resp, raw := l.request(http.MethodGet, "/v1/status", "", nil)
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/status: %d %s", resp.StatusCode, raw)
	}
	var res api.StatusResponse
	mustUnmarshal(t, raw, &res)
	return res, took
}

// project runs a projector until it has committed the stream's last
// sequence, then stops it.
func project(t *testing.T, natsURL string, db *pgxpool.Pool, last uint64) {
	t.Helper()
	js, err := jetstream.New(testenv.Connect(t, natsURL, natsauth.Projector))
	if err != nil {
		t.Fatal(err)
	}
	runProjector(t, projections.New(js, db).Run, db, last)
}

// runProjector runs run until every projector_offsets row (the slowest
// partition) has reached last, then calls each of while (it still
// runs), then stops it.
func runProjector(t *testing.T, run func(context.Context) error, db *pgxpool.Pool, last uint64, while ...func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("projector: %v", err)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		seq, err := query.ProjectorOffset(context.Background(), db, "")
		if err == nil && seq >= last {
			for _, f := range while {
				f()
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("projector at %d after 30s, want %d (%v)", seq, last, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// On one node: the stream has one copy, led by the server; the projector
// row shows lag 0 once it has projected everything and the events
// appended since while it is stopped (and their age); a halted pool is
// listed; status needs the read scope.
func TestStatusSingleNode(t *testing.T) {
	natsURL := testenv.NATS(t)
	l, db, writer := statusLedger(t, natsURL, testdb.New(t))

	res, _ := status(t, l)
	if res.Status != "ok" || res.Stream == nil || res.Stream.Replicas != 1 || res.Stream.Leader != "test" ||
		len(res.Stream.ReplicasDetail) != 1 || !res.Stream.ReplicasDetail[0].Leader || len(res.Projectors) != 0 ||
		!res.Postgres.Reachable || !res.NATS.Connected || res.NATS.Server != "test" {
		t.Fatalf("fresh deployment: %+v", res)
	}

	setup(l, "p")
	l.mustPost("p", demand(map[string]int{"/a": 4}))
	res, _ = status(t, l)
	if res.Stream.LastSeq != 3 || res.Stream.Messages != 3 || res.Stream.FirstSeq != 1 {
		t.Fatalf("after 3 events: %+v", res.Stream)
	}
	project(t, natsURL, db, 3)
	res, _ = status(t, l)
	if len(res.Projectors) != 1 {
		t.Fatalf("projectors: %+v", res.Projectors)
	}
	p := res.Projectors[0]
	if p.Name != projections.DefaultName || p.Partition != nil || p.Partitions != nil || p.Seq != 3 ||
		p.LagEvents == nil || *p.LagEvents != 0 || p.LagSeconds == nil || *p.LagSeconds != 0 ||
		time.Since(p.UpdatedAt) > time.Minute || res.Status != "ok" {
		t.Fatalf("caught up: %s %+v", res.Status, p)
	}

	// The projector is stopped: two more events wait.
	l.mustPost("p", demand(map[string]int{"/b": 2}))
	l.mustPost("p", release("/a", 1))
	time.Sleep(200 * time.Millisecond)
	res, _ = status(t, l)
	p = res.Projectors[0]
	if p.LagEvents == nil || *p.LagEvents != 2 || p.LagSeconds == nil || *p.LagSeconds < 0.2 || *p.LagSeconds > 30 {
		t.Fatalf("behind by two events: %+v (lag %v s)", p, p.LagSeconds)
	}
	if res.Status != "ok" { // behind by less than StaleLag is normal
		t.Fatalf("a projector 0.2s behind: %s %v", res.Status, res.Problems)
	}

	exec(t, db, `INSERT INTO halted_pools (pool, seq, reason) VALUES ('bad', 42, 'fold failed at sequence 42: boom')`)
	res, _ = status(t, l)
	if len(res.Halted) != 1 || res.Halted[0].Pool != "bad" || res.Halted[0].Seq != 42 ||
		!strings.Contains(res.Halted[0].Reason, "boom") || res.Status != "degraded" || len(res.Problems) != 1 ||
		!strings.Contains(res.Problems[0], "pool bad halted at sequence 42") {
		t.Fatalf("with a halted pool: %s %v %+v", res.Status, res.Problems, res.Halted)
	}

	// The read scope is required.
	resp, raw := send(t, http.MethodGet, l.url+"/v1/status", "", writer, nil)
	errorOf(t, "status as writer", resp, raw, http.StatusForbidden, api.ReasonMissingScope)
	if resp, _ := send(t, http.MethodGet, l.url+"/v1/status", "", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", resp.StatusCode)
	}
}

// A token for one pool (the read token a team gets) is given the pools
// view of the status: whether appends and reads work, its own halted
// pool, the problems bearing on it; nothing of the other pools, not
// their names nor how busy they are (the stream's counters, the
// projectors' offsets move with every pool's traffic), nor the servers.
// A token that reads every pool, not only admin, gets the full report.
func TestStatusShowsATokenOnlyItsPools(t *testing.T) {
	reader, entry := mustToken(t, "team-p", []auth.Scope{auth.ScopeRead}, "p")
	ops, opsEntry := mustToken(t, "ops", []auth.Scope{auth.ScopeRead}, auth.AllPools)
	natsURL := testenv.NATS(t)
	l, db, _ := statusLedger(t, natsURL, testdb.New(t), entry, opsEntry)
	setup(l, "p")
	setup(l, "secret")
	project(t, natsURL, db, 4)
	halt := func() {
		exec(t, db, `INSERT INTO halted_pools (pool, seq, reason, halted_at) VALUES ('p', 7, 'fold failed at sequence 7: mine', '2026-11-27T05:00:00Z'), ('secret', 42, 'fold failed at sequence 42: theirs', '2026-11-27T05:00:00Z')`)
	}
	halt()

	asReader := func() (api.StatusResponse, []byte) {
		t.Helper()
		resp, raw := send(t, http.MethodGet, l.url+"/v1/status", "", reader, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status as a reader of p: %d %s", resp.StatusCode, raw)
		}
		var res api.StatusResponse
		mustUnmarshal(t, raw, &res)
		return res, raw
	}
	mine, raw := asReader()
	for _, leak := range []string{"secret", "theirs", `"last_seq"`, `"messages"`, `"lag_events"`, `"seq":4`, "nats://", `"server"`, `"name":"projector"`} {
		if strings.Contains(string(raw), leak) {
			t.Errorf("a reader of p is told %s: %s", leak, raw)
		}
	}
	if mine.View != api.ViewPools || len(mine.Halted) != 1 || mine.Halted[0].Pool != "p" || len(mine.Problems) != 1 ||
		!strings.Contains(mine.Problems[0], "pool p halted") || mine.Status != "degraded" || mine.Appends != "ok" || mine.Reads != "ok" ||
		mine.Stream != nil || len(mine.Projectors) != 0 || !mine.NATS.Connected || mine.NATS.URL != "" || !mine.Postgres.Reachable {
		t.Errorf("a reader of p: %+v", mine)
	}

	// The other pool's traffic, and its projection, change nothing the
	// reader of p is told.
	for i := range 20 {
		l.mustPost("secret", demand(map[string]int{"/a": i + 1}))
	}
	project(t, natsURL, db, 24) // it lifts the halts: they are staged again
	halt()
	after, _ := asReader()
	mine.Time, after.Time = time.Time{}, time.Time{}
	if fmt.Sprintf("%+v", after) != fmt.Sprintf("%+v", mine) {
		t.Errorf("another pool's 20 events changed what a reader of p is told:\nbefore %+v\nafter  %+v", mine, after)
	}

	for name, token := range map[string]string{"admin": l.token, "a reader of every pool": ops} {
		resp, raw := send(t, http.MethodGet, l.url+"/v1/status", "", token, nil)
		var full api.StatusResponse
		mustUnmarshal(t, raw, &full)
		if resp.StatusCode != http.StatusOK || full.View != api.ViewFull || full.Stream == nil || full.Stream.LastSeq != 24 ||
			len(full.Projectors) != 1 || full.Projectors[0].Seq != 24 || len(full.Halted) != 2 || len(full.Problems) != 2 || full.NATS.URL == "" {
			t.Errorf("%s: %d %+v", name, resp.StatusCode, full)
		}
	}
}

// A partitioned projector (4 partitions, one instance): a row per
// partition with its owner, lag 0 once caught up; an event of one pool
// while it is stopped is lag 1 for every partition (each reads the whole
// stream).
func TestStatusPartitioned(t *testing.T) {
	natsURL := testenv.NATS(t)
	l, db, _ := statusLedger(t, natsURL, testdb.New(t))
	for _, pool := range []string{"p1", "p2", "p3", "p4", "p5"} {
		setup(l, pool)
	}
	js, err := jetstream.New(testenv.Connect(t, natsURL, natsauth.Projector))
	if err != nil {
		t.Fatal(err)
	}
	g, err := projections.NewGroup(js, db, 4, projections.WithInstance("inst-a"))
	if err != nil {
		t.Fatal(err)
	}
	var res api.StatusResponse
	runProjector(t, g.Run, db, 10, func() {
		// While it runs, every partition has its one live instance.
		res, _ = status(t, l)
		if len(res.Projectors) != 4 || res.Status != "ok" {
			t.Fatalf("partitioned: %s %v %+v", res.Status, res.Problems, res.Projectors)
		}
		for k, p := range res.Projectors {
			if p.Live == nil || !*p.Live || p.Instances == nil || *p.Instances != 1 {
				t.Errorf("partition %d of a running instance: live %v, instances %v", k, p.Live, p.Instances)
			}
		}
	})
	// Stopped: nobody folds the partitions, and status says so at once.
	stopped, _ := status(t, l)
	if stopped.Status != "degraded" || len(stopped.Problems) != 4 || !strings.Contains(stopped.Problems[0], "has no live instance") {
		t.Errorf("the only instance stopped: %s %v", stopped.Status, stopped.Problems)
	}
	for k, p := range res.Projectors {
		if p.Name != projections.PartitionName(projections.DefaultName, k, 4) || p.Partition == nil || *p.Partition != k ||
			p.Partitions == nil || *p.Partitions != 4 || p.Owner != "inst-a" || p.Seq != 10 || *p.LagEvents != 0 {
			t.Errorf("partition %d: %+v", k, p)
		}
	}
	l.mustPost("p1", demand(map[string]int{"/a": 1}))
	res, _ = status(t, l)
	for k, p := range res.Projectors {
		if p.LagEvents == nil || *p.LagEvents != 1 || p.LagSeconds == nil || *p.LagSeconds <= 0 {
			t.Errorf("partition %d after one more event: %+v", k, p)
		}
	}
}

// Partitioned rows carry their partition, partitions and owner; a
// projection ahead of the stream is a problem that says so.
func TestStatusPartitionsAndAhead(t *testing.T) {
	natsURL := testenv.NATS(t)
	l, db, _ := statusLedger(t, natsURL, testdb.New(t))
	setup(l, "p")
	for i := range 8 {
		exec(t, db, `INSERT INTO projector_offsets (name, stream_seq, updated_at, partition, partitions, owner)
VALUES ($1, $2, now(), $3, 8, 'host-a:12')`, fmt.Sprintf("projector-p%dof8", i), 1+i%2, i)
	}
	res, _ := status(t, l)
	if len(res.Projectors) != 8 {
		t.Fatalf("projectors: %+v", res.Projectors)
	}
	for i, p := range res.Projectors {
		if p.Partition == nil || *p.Partition != i || p.Partitions == nil || *p.Partitions != 8 || p.Owner != "host-a:12" ||
			p.LagEvents == nil || *p.LagEvents != int64(2-p.Seq) {
			t.Errorf("row %d: %+v", i, p)
		}
	}
	// A little behind is no problem; these rows have no projector
	// running, which is one (each partition's consumer is missing).
	for i, p := range res.Projectors {
		if p.Live == nil || *p.Live || !strings.Contains(p.NotLive, "does not exist") {
			t.Errorf("row %d without a projector: live %v (%s)", i, p.Live, p.NotLive)
		}
	}
	if res.Status != "degraded" || len(res.Problems) != 8 || slices.ContainsFunc(res.Problems, func(p string) bool { return !strings.Contains(p, "has no live instance") }) {
		t.Errorf("partitions a little behind, no projector: %s %v", res.Status, res.Problems)
	}
	exec(t, db, `INSERT INTO projector_offsets (name, stream_seq, updated_at) VALUES ('projector', 9, now())`)
	res, _ = status(t, l)
	if res.Status != "degraded" || !slices.ContainsFunc(res.Problems, func(p string) bool { return strings.Contains(p, "projector projector is 7 events ahead") }) {
		t.Fatalf("ahead: %s %v", res.Status, res.Problems)
	}
}

// PostgreSQL stopped, then NATS stopped: status still answers 200,
// quickly, naming the part that failed.
func TestStatusPartsDown(t *testing.T) {
	dir, err := os.MkdirTemp("", "ledger-status-test-")
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
	natsSrv := testenv.StartNATS(t, t.TempDir(), "127.0.0.1:-1")
	l, _, _ := statusLedger(t, natsSrv.URL(), clusterRoles(pg))
	setup(l, "p")
	if res, _ := status(t, l); res.Status != "ok" || !res.Postgres.Reachable {
		t.Fatalf("all up: %+v", res)
	}

	if err := pg.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	res, took := status(t, l)
	if res.Postgres.Reachable || res.Postgres.Error == "" || res.Status != "down" || res.Appends != "ok" || res.Reads != "down" ||
		took > api.StatusTimeout+time.Second || res.Stream == nil || res.Stream.LastSeq != 2 || !res.NATS.Connected ||
		strings.Contains(res.Postgres.Error, "dial") || strings.Contains(res.Postgres.Error, strconv.Itoa(pg.Port())) {
		t.Fatalf("PostgreSQL stopped (%v): %+v", took, res)
	}
	t.Logf("PostgreSQL stopped: answered in %v: %v", took, res.Problems)

	natsSrv.Shutdown()
	// Until the client notices the lost connection the stream is asked
	// and does not answer: either way, degraded within the bound.
	res, took = status(t, l)
	if res.Stream != nil || res.NATS.Error == "" || res.Status != "down" || res.Appends != "down" || took > api.StatusTimeout+time.Second {
		t.Fatalf("NATS stopped too (%v): %+v", took, res)
	}
	t.Logf("NATS stopped: answered in %v: %v", took, res.Problems)
	for deadline := time.Now().Add(10 * time.Second); l.nc.IsConnected(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the ledger's connection still up 10s after NATS stopped")
		}
	}
	res, took = status(t, l)
	if res.NATS.Connected || res.Stream != nil || took > time.Second {
		t.Fatalf("NATS stopped, the client knows (%v): %+v", took, res)
	}
}

// A PostgreSQL that accepts connections and never answers (a hung
// server, a black-holed route) costs status StatusTimeout, not a hang.
func TestStatusPostgresHangs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() }) // held open, never answered
		}
	}()
	db, err := pgxpool.New(context.Background(), "postgres://ledger:x@"+ln.Addr().String()+"/ledger?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	natsURL := testenv.NATS(t)
	js, err := jetstream.New(testenv.Connect(t, natsURL, natsauth.Ledger))
	if err != nil {
		t.Fatal(err)
	}
	token, tokens := testenv.AdminToken(t)
	srv, err := api.New(context.Background(), js, db, api.WithTokens(tokens))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	res, took := status(t, &ledger{t: t, url: hs.URL, token: token})
	if res.Postgres.Reachable || res.Status != "down" || res.Postgres.Error != "no answer within 3s" || res.Stream == nil || took < api.StatusTimeout-time.Second ||
		took > api.StatusTimeout+time.Second {
		t.Fatalf("hung PostgreSQL (%v): %+v", took, res)
	}
	t.Logf("hung PostgreSQL: answered in %v: %v", took, res.Problems)
}

// clusterRoles are the roles of a private cluster started with
// pgcluster.WithRoles(migrations.Roles...), on its database.
func clusterRoles(pg *pgcluster.Cluster) testdb.DB {
	return testdb.DB{Admin: pg.URLFor(pgcluster.DefaultDatabase), Owner: pg.URL(),
		Projector: pg.URLAs(migrations.RoleProjector), API: pg.URLAs(migrations.RoleAPI), Reporting: pg.URLAs(migrations.RoleReporting)}
}
