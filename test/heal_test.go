package test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/gen"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/natsserver"
	"github.com/cluster-ledger/ledger/internal/pgdump"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
)

// crashNATS is an embedded NATS whose store directory the test can copy
// and put back while the server is stopped, on a fixed address so that
// reconnecting clients find it again.
type crashNATS struct {
	t     *testing.T
	dir   string
	addr  string
	srv   *natsserver.Server
	js    jetstream.JetStream
	alive bool
}

func newCrashNATS(t *testing.T) *crashNATS {
	c := &crashNATS{t: t, dir: filepath.Join(t.TempDir(), "jetstream"), addr: freeAddr(t)}
	c.start()
	c.js = testenv.JetStream(t, c.srv.URL())
	t.Cleanup(c.stop)
	return c
}

func (c *crashNATS) start() {
	c.t.Helper()
	// With authentication, as everywhere: the identities live in c.dir
	// too, so snapshots and restores keep them.
	c.srv, c.alive = testenv.StartNATS(c.t, c.dir, c.addr), true
}

func (c *crashNATS) stop() {
	if c.alive {
		c.srv.Shutdown()
		c.alive = false
	}
}

// snapshot copies the store directory (the server must be stopped).
func (c *crashNATS) snapshot() string {
	c.t.Helper()
	to := filepath.Join(c.t.TempDir(), "copy")
	if err := os.CopyFS(to, os.DirFS(c.dir)); err != nil {
		c.t.Fatal(err)
	}
	return to
}

// restore replaces the store directory by a snapshot (server stopped):
// the state a machine finds after a crash took the unsynced tail.
func (c *crashNATS) restore(from string) {
	c.t.Helper()
	if err := os.RemoveAll(c.dir); err != nil {
		c.t.Fatal(err)
	}
	if err := os.CopyFS(c.dir, os.DirFS(from)); err != nil {
		c.t.Fatal(err)
	}
	// CopyFS does not keep modes; credentials must stay private.
	seeds, _ := filepath.Glob(filepath.Join(c.dir, "auth", "*.nk"))
	for _, f := range seeds {
		if err := os.Chmod(f, 0o600); err != nil {
			c.t.Fatal(err)
		}
	}
}

func (c *crashNATS) lastSeq(t *testing.T) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		info, err := mustStream(t, c.js).Info(ctx)
		if err == nil {
			return info.State.LastSeq
		}
		if ctx.Err() != nil {
			t.Fatalf("stream info: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// inProcessProjector runs a projector until the test ends or stop.
type inProcessProjector struct {
	stop func() error
	done chan error
}

func runProjectorInProcess(t *testing.T, js jetstream.JetStream, db *pgxpool.Pool) *inProcessProjector {
	return runPartitionedInProcess(t, js, db, 0)
}

// runPartitionedInProcess is runProjectorInProcess with the pools in
// partitions (0: unpartitioned).
func runPartitionedInProcess(t *testing.T, js jetstream.JetStream, db *pgxpool.Pool, partitions int) *inProcessProjector {
	ctx, cancel := context.WithCancel(context.Background())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rp := &inProcessProjector{done: make(chan error, 1)}
	// As production runs it: the projector's identity, healing with the
	// ledger's (--heal-creds), the only one that may append.
	pjs := testenv.As(t, js, natsauth.Projector)
	opts := []projections.Option{projections.WithLogger(quiet), projections.WithSnapshotEvery(25), projections.WithBatchSize(40),
		projections.WithPinnedTTL(2 * time.Second), projections.WithHealer(testenv.As(t, js, natsauth.Ledger))}
	go func() {
		if partitions == 0 {
			rp.done <- projections.New(pjs, db, opts...).Run(ctx)
			return
		}
		g, err := projections.NewGroup(pjs, db, partitions, opts...)
		if err == nil {
			err = g.Run(ctx)
		}
		rp.done <- err
	}()
	var err error
	stopped := false
	rp.stop = func() error {
		if !stopped {
			cancel()
			err, stopped = <-rp.done, true
		}
		return err
	}
	t.Cleanup(func() { _ = rp.stop() })
	return rp
}

// apiPool appends a small pool through the API: a plan, hosts (one array,
// so an atomic batch with its Nats-Batch-* headers) and demands one by one.
func apiPool(t *testing.T, c *client.Client, pool string, demands int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	one := func(p events.Payload) client.Event {
		ev, err := client.NewEvent(p)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	share := int64(2)
	setup := []client.Event{
		one(&events.PlanChange{Plan: events.Plan{Consumers: []events.Consumer{{Path: "/a", Share: &share}, {Path: "/b"}}}}),
		one(&events.HostUp{Host: "h1", Slots: 8}),
		one(&events.HostUp{Host: "h2", Slots: 8}),
	}
	if _, err := c.Append(ctx, pool, setup...); err != nil {
		t.Fatal(err)
	}
	for i := range demands {
		if _, err := c.Append(ctx, pool, one(&events.Demand{Demands: map[string]int64{"/a": int64(i % 11), "/b": int64(i % 7)}})); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStreamCutBackIsHealed reproduces what a power loss leaves when
// JetStream had not synced its last writes: the projection in PostgreSQL
// is ahead of the stream. On restart the projector appends the lost
// events again from the events table, each at its original sequence,
// while the API holds appends (503, Retry-After); then the audit passes,
// a fresh projection of the healed stream equals the one that was there,
// and appends continue after the healed sequence.
func TestStreamCutBackIsHealed(t *testing.T) {
	t.Run("one projector", func(t *testing.T) { testStreamCutBackIsHealed(t, 0) })
	// Each partition finds the stream behind its own offset; one heals it,
	// the others find it healed.
	t.Run("3 partitions", func(t *testing.T) { testStreamCutBackIsHealed(t, 3) })
}

func testStreamCutBackIsHealed(t *testing.T, partitions int) {
	ctx := context.Background()
	nats := newCrashNATS(t)
	db := newDB(t)
	token, tokens := testenv.Token(t, "heal-test", auth.Scopes, auth.AllPools)
	srv, err := api.New(ctx, nats.js, db, api.WithTokens(tokens))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(testenv.Authorized(srv, token))
	defer hs.Close()
	c := client.New(hs.URL)

	publishRandomPools(t, nats.js, 3, 80)
	apiPool(t, c, "early", 10)
	project := runPartitionedInProcess(t, nats.js, db, partitions)
	early := nats.lastSeq(t)
	waitOffsetAbove(t, db, early-1)
	if err := project.stop(); err != nil {
		t.Fatal(err)
	}

	nats.stop() // the "synced" state: what survives the crash
	synced := nats.snapshot()
	nats.start()

	apiPool(t, c, "late", 30)
	apiPool(t, c, "early2", 5)
	project = runPartitionedInProcess(t, nats.js, db, partitions)
	full := nats.lastSeq(t)
	waitOffsetAbove(t, db, full-1)
	if err := project.stop(); err != nil {
		t.Fatal(err)
	}
	before, err := pgdump.Tables(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	want := storedMessages(t, nats.js, early+1, full)

	nats.stop() // the crash: the unsynced tail is gone
	nats.restore(synced)
	nats.start()
	if got := nats.lastSeq(t); got != early {
		t.Fatalf("after the restore the stream ends at %d, want %d", got, early)
	}

	// Appends wait while the stream is behind the projection.
	status, retryAfter, reason := postRaw(t, hs.URL, "late")
	if status != http.StatusServiceUnavailable || retryAfter == "" || reason != api.ReasonHealing {
		t.Fatalf("append during the heal: %d %q Retry-After %q; want 503 %q with Retry-After", status, reason, retryAfter, api.ReasonHealing)
	}
	if got := nats.lastSeq(t); got != early {
		t.Fatalf("a held append reached the stream: it ends at %d, want %d", got, early)
	}

	project = runPartitionedInProcess(t, nats.js, db, partitions)
	deadline := time.Now().Add(60 * time.Second)
	for nats.lastSeq(t) < full {
		select {
		case err := <-project.done:
			t.Fatalf("projector stopped instead of healing: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream was not healed: it ends at %d, want %d", nats.lastSeq(t), full)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := nats.lastSeq(t); got != full {
		t.Fatalf("healed stream ends at %d, want exactly %d", got, full)
	}
	got := storedMessages(t, nats.js, early+1, full)
	for seq, w := range want {
		g := got[seq]
		if g.subject != w.subject || g.body != w.body || g.id != w.id || g.id == "" {
			t.Fatalf("sequence %d after the heal: %+v; before the crash: %+v", seq, g, w)
		}
	}
	after, err := pgdump.Tables(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if d := pgdump.Diff(before, after); d != "" {
		t.Fatalf("healing changed the projection at %s", d)
	}
	if _, err := audit.Verify(ctx, nats.js, db, nil, 1, "", nil); err != nil {
		t.Fatalf("audit verify after the heal: %v", err)
	}

	// A projection of the healed stream from scratch is the same.
	fresh := newDB(t)
	s := &stack{js: nats.js, natsURL: nats.srv.URL()}
	s.rebuild(t, fresh, "fresh", projections.WithSnapshotEvery(25))
	again, err := pgdump.Tables(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if d := pgdump.Diff(before, again); d != "" {
		t.Fatalf("a fresh projection of the healed stream differs at %s", d)
	}

	// Appends resume after the healed sequence, and are projected.
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ev, _ := client.NewEvent(&events.Demand{Demands: map[string]int64{"/a": 3}})
	res, err := c.Append(actx, "late", ev)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Seq != full+1 {
		t.Fatalf("first append after the heal got sequence %d, want %d", res[0].Seq, full+1)
	}
	waitOffsetAbove(t, db, full)
	if err := project.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Verify(ctx, nats.js, db, nil, 1, "", nil); err != nil {
		t.Fatalf("audit verify after new appends: %v", err)
	}
}

// TestRunningProjectorHealsAfterNATSRestart: the projector keeps running
// while NATS crashes and comes back without its unsynced tail; it sees the
// reconnection, heals the stream, and projects what comes next.
func TestRunningProjectorHealsAfterNATSRestart(t *testing.T) {
	t.Run("one projector", func(t *testing.T) { testRunningProjectorHeals(t, 0) })
	t.Run("3 partitions", func(t *testing.T) { testRunningProjectorHeals(t, 3) })
}

func testRunningProjectorHeals(t *testing.T, partitions int) {
	ctx := context.Background()
	nats := newCrashNATS(t)
	db := newDB(t)
	rawPool(t, nats.js, "r", 0, 20)
	project := runPartitionedInProcess(t, nats.js, db, partitions)
	early := nats.lastSeq(t)
	waitOffsetAbove(t, db, early-1)
	nats.stop()
	synced := nats.snapshot()
	nats.start()
	rawPool(t, nats.js, "r", 20, 50)
	full := nats.lastSeq(t)
	waitOffsetAbove(t, db, full-1)
	want := storedMessages(t, nats.js, early+1, full)

	nats.stop()
	nats.restore(synced)
	nats.start()
	deadline := time.Now().Add(60 * time.Second)
	for nats.lastSeq(t) < full {
		select {
		case err := <-project.done:
			t.Fatalf("projector stopped instead of healing: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the running projector did not heal the stream: it ends at %d, want %d", nats.lastSeq(t), full)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := storedMessages(t, nats.js, early+1, full); !maps.Equal(got, want) {
		t.Fatal("the healed messages differ from those lost")
	}
	rawPool(t, nats.js, "r", 50, 60)
	waitOffsetAbove(t, db, full+9)
	if err := project.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Verify(ctx, nats.js, db, nil, 1, "", nil); err != nil {
		t.Fatalf("audit verify: %v", err)
	}
}

// TestStreamThatDivergedIsNotHealed: after the cut, another writer
// appended different events at the lost sequences. The projector must not
// guess: it stops, naming the first sequence where stream and projection
// differ, and appends nothing.
func TestStreamThatDivergedIsNotHealed(t *testing.T) {
	ctx := context.Background()
	nats := newCrashNATS(t)
	db := newDB(t)
	early, _ := projectThenLoseTail(t, nats, db, func() { publishRandomPools(t, nats.js, 2, 40) }, 0, 30)

	// Another writer gets there first, with other events.
	for i := range 5 {
		env, err := events.New(fmt.Sprintf("intruder-%d", i), "p0", "intruder", time.Now().UTC(), &events.HostUp{Host: fmt.Sprintf("x%d", i), Slots: 1})
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(env)
		if _, err := nats.js.Publish(ctx, stream.Subject("p0", env.Type), data, jetstream.WithMsgID(env.ID)); err != nil {
			t.Fatal(err)
		}
	}
	cut := nats.lastSeq(t)
	project := runProjectorInProcess(t, nats.js, db)
	select {
	case err := <-project.done:
		if !errors.Is(err, projections.ErrDiverged) || !strings.Contains(err.Error(), fmt.Sprintf("at sequence %d:", early+1)) {
			t.Fatalf("projector stopped with %v; want ErrDiverged naming sequence %d", err, early+1)
		}
		project.done <- err // for stop
	case <-time.After(60 * time.Second):
		t.Fatal("the projector did not stop on a diverged stream")
	}
	if got := nats.lastSeq(t); got != cut {
		t.Fatalf("the stream ends at %d after the refusal, want %d (nothing appended)", got, cut)
	}
}

// projectThenLoseTail builds the state a crash leaves: the events appended
// by before are projected and synced to disk (the snapshot returned), then
// rawPool's events from..to are appended and projected too, and NATS is
// stopped and cut back to the snapshot. The projection is then ahead of
// the stream, which ends at early; full is where it ended before the cut.
func projectThenLoseTail(t *testing.T, nats *crashNATS, db *pgxpool.Pool, before func(), from, to int) (early, full uint64) {
	t.Helper()
	before()
	project := runProjectorInProcess(t, nats.js, db)
	early = nats.lastSeq(t)
	waitOffsetAbove(t, db, early-1)
	_ = project.stop()
	nats.stop()
	synced := nats.snapshot()
	nats.start()
	rawPool(t, nats.js, "r", from, to)
	project = runProjectorInProcess(t, nats.js, db)
	full = nats.lastSeq(t)
	waitOffsetAbove(t, db, full-1)
	_ = project.stop()
	nats.stop()
	nats.restore(synced)
	nats.start()
	return early, full
}

// TestStreamNotHealedWithoutStoredMessages: rows projected before
// migration 0003 have no stored message; the projector says so and
// appends nothing rather than making messages up.
func TestStreamNotHealedWithoutStoredMessages(t *testing.T) {
	ctx := context.Background()
	nats := newCrashNATS(t)
	db := newDB(t)
	early, _ := projectThenLoseTail(t, nats, db, func() { rawPool(t, nats.js, "r", 0, 10) }, 10, 20)
	if _, err := db.Exec(ctx, `UPDATE events SET subject = NULL, headers = NULL, body = NULL WHERE seq > $1`, early); err != nil {
		t.Fatal(err)
	}
	project := runProjectorInProcess(t, nats.js, db)
	select {
	case err := <-project.done:
		if !errors.Is(err, projections.ErrUnhealable) || !strings.Contains(err.Error(), fmt.Sprintf("at sequence %d", early+1)) {
			t.Fatalf("projector stopped with %v; want ErrUnhealable naming sequence %d", err, early+1)
		}
		project.done <- err
	case <-time.After(60 * time.Second):
		t.Fatal("the projector did not stop")
	}
	if got := nats.lastSeq(t); got != early {
		t.Fatalf("the stream ends at %d, want %d (nothing appended)", got, early)
	}
}

// TestPostgresRestoredFromOlderDump: PostgreSQL comes back from a backup
// taken earlier (pg_dump, psql); the stream is ahead of it. The projector
// folds from the restored checkpoint and catches up, and the result
// equals the projection that was lost and passes the audit.
func TestPostgresRestoredFromOlderDump(t *testing.T) {
	t.Run("one projector", func(t *testing.T) { testPostgresRestoredFromOlderDump(t, 0) })
	// The partition consumers have delivered past the restored offsets:
	// the partitions fill the gap from the stream.
	t.Run("3 partitions", func(t *testing.T) { testPostgresRestoredFromOlderDump(t, 3) })
}

// projectAll runs a projector (partitions > 0: a group) until the whole
// stream is projected into db.
func projectAll(t *testing.T, s *stack, db *pgxpool.Pool, partitions int) {
	t.Helper()
	if partitions == 0 {
		s.project(t, db, projections.WithSnapshotEvery(25))
		return
	}
	rp := runPartitionedInProcess(t, s.js, db, partitions)
	waitOffsetAbove(t, db, lastSeqOf(t, s.js)-1)
	if err := rp.stop(); err != nil {
		t.Fatal(err)
	}
}

func lastSeqOf(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	st, err := js.Stream(context.Background(), stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.LastSeq
}

func testPostgresRestoredFromOlderDump(t *testing.T, partitions int) {
	bin, err := findPGBin("pg_dump")
	if err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	s := newStack(t)
	publishRandomPools(t, s.js, 3, 60)
	rawPool(t, s.js, "r", 0, 40)
	projectAll(t, s, s.db, partitions)
	dump := filepath.Join(t.TempDir(), "older.sql")
	if out, err := exec.Command(bin, "--no-owner", "--no-privileges", "-f", dump, s.db.Config().ConnString()).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	rawPool(t, s.js, "r", 40, 100) // the stream goes on past the dump
	projectAll(t, s, s.db, partitions)
	want, err := pgdump.Tables(ctx, s.db)
	if err != nil {
		t.Fatal(err)
	}

	restoredURL := testenv.Postgres(t)
	psql := filepath.Join(filepath.Dir(bin), "psql")
	if out, err := exec.Command(psql, "-v", "ON_ERROR_STOP=1", "-q", "-f", dump, restoredURL).CombinedOutput(); err != nil {
		t.Fatalf("psql restore: %v\n%s", err, out)
	}
	restored, err := pgxpool.New(ctx, restoredURL)
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	if offset(t, restored) >= offset(t, s.db) {
		t.Fatalf("the dump is not older: offset %d, live %d", offset(t, restored), offset(t, s.db))
	}
	projectAll(t, s, restored, partitions)
	got, err := pgdump.Tables(ctx, restored)
	if err != nil {
		t.Fatal(err)
	}
	if d := pgdump.Diff(want, got); d != "" {
		t.Fatalf("projection caught up from the older dump differs at %s", d)
	}
	if _, err := audit.Verify(ctx, s.js, restored, nil, 1, "", nil); err != nil {
		t.Fatalf("audit verify of the restored projection: %v", err)
	}
}

// rawPool publishes straight to the stream (as a producer without the
// API may) a pool's plan and hosts when from is 0, then its demands
// from..to-1.
func rawPool(t *testing.T, js jetstream.JetStream, pool string, from, to int) {
	t.Helper()
	signedPool(t, js, nil, pool, from, to)
}

// signedPool is rawPool signed by signer, as the ledger signs (nil: not
// signed).
func signedPool(t *testing.T, js jetstream.JetStream, signer *signing.Signer, pool string, from, to int) {
	t.Helper()
	at := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	var ps []events.Payload
	if from == 0 {
		share := int64(3)
		ps = append(ps, &events.PlanChange{Plan: events.Plan{Consumers: []events.Consumer{{Path: "/x", Share: &share}, {Path: "/y"}}}},
			&events.HostUp{Host: "h1", Slots: 10})
	}
	for i := from; i < to; i++ {
		ps = append(ps, &events.Demand{Demands: map[string]int64{"/x": int64(i % 13), "/y": int64(i % 5)}})
	}
	for k, p := range ps {
		env, err := events.New(fmt.Sprintf("%s-%d-%d", pool, from, k), pool, "test", at.Add(time.Duration(from+k)*time.Second), p)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(stream.Subject(pool, env.Type))
		m.Data, _ = json.Marshal(env)
		m.Header.Set(jetstream.MsgIDHeader, env.ID)
		if signer != nil {
			signer.Sign(m)
		}
		if _, err := js.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
}

// findPGBin looks for a PostgreSQL client program in the directory
// testenv uses, then on PATH.
func findPGBin(name string) (string, error) {
	for _, dir := range []string{"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"} {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p, nil
		}
	}
	return exec.LookPath(name)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// storedMsg is what a stream message holds that the heal must give back.
type storedMsg struct {
	subject, body, id string
}

func storedMessages(t *testing.T, js jetstream.JetStream, from, to uint64) map[uint64]storedMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := mustStream(t, js)
	out := map[uint64]storedMsg{}
	for seq := from; seq <= to; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		sum := sha256.Sum256(m.Data)
		out[seq] = storedMsg{subject: m.Subject, body: string(sum[:]), id: m.Header.Get(jetstream.MsgIDHeader)}
	}
	return out
}

// postRaw posts one valid demand without retrying and returns the status,
// Retry-After and reason.
func postRaw(t *testing.T, base, pool string) (int, string, string) {
	t.Helper()
	body := `{"id":"held-1","type":"demand","data":{"demands":{"/a":1}}}`
	resp, err := http.Post(base+"/v1/pools/"+pool+"/events", "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e client.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, resp.Header.Get("Retry-After"), e.Reason
}

// TestLedgerRecover heals a cut-back stream with the command, by hand, and
// a second run finds nothing to do.
func TestLedgerRecover(t *testing.T) {
	bin := ledgerBinary(t)
	ctx := context.Background()
	nats := newCrashNATS(t)
	db := newDB(t)
	early, full := projectThenLoseTail(t, nats, db, func() { rawPool(t, nats.js, "r", 0, 20) }, 20, 45)

	recover := func() string {
		cmd := exec.Command(bin, "recover", "--nats-url", nats.srv.URL(), "--nats-creds", testenv.Creds(t, nats.srv.URL(), natsauth.Admin), "--database-url", db.Config().ConnString())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ledger recover: %v\n%s", err, out)
		}
		return string(out)
	}
	out := recover()
	if want := fmt.Sprintf("recovered %d events: the stream ended at %d, it now ends at %d", full-early, early, full); !strings.Contains(out, want) {
		t.Fatalf("ledger recover said %q; want %q", out, want)
	}
	if got := nats.lastSeq(t); got != full {
		t.Fatalf("after ledger recover the stream ends at %d, want %d", got, full)
	}
	if out := recover(); !strings.Contains(out, "nothing to recover") {
		t.Fatalf("second ledger recover said %q; want nothing to recover", out)
	}
	if _, err := audit.Verify(ctx, nats.js, db, nil, 1, "", nil); err != nil {
		t.Fatalf("audit verify: %v", err)
	}
}

// TestStreamCutBackHealsSetAsideEvents: a busy pool's events that the
// projector set aside (pending_events, below its offset) are part of what
// it gives back to a stream that lost its tail: the heal appends them
// again, with the projected ones, at their original sequences; then they
// are folded, and the projection equals a fresh one of the healed stream.
func TestStreamCutBackHealsSetAsideEvents(t *testing.T) {
	ctx := context.Background()
	nats := newCrashNATS(t)
	db := newDB(t)
	s := &stack{js: nats.js, natsURL: nats.srv.URL()}
	quiet := []string{"q0", "q1", "q2"}
	for _, q := range quiet {
		publishEvents(t, nats.js, q, &events.PlanChange{Plan: events.Plan{Consumers: []events.Consumer{{Path: "/a"}}}},
			&events.HostUp{Host: "h", Slots: 4})
	}
	nats.stop() // the "synced" state: what survives the crash
	synced := nats.snapshot()
	nats.start()
	early := nats.lastSeq(t)

	// The tail: a busy pool's backlog, then the quiet pools' events.
	hosts, consumers, _ := gen.OwnedBench(900)
	busy := []events.Payload{&events.PlanChange{Plan: events.Plan{Rules: 3, Consumers: consumers}}}
	busy = append(busy, hosts...)
	for i := range 60 {
		h := hosts[i%len(hosts)].(*events.HostUp)
		busy = append(busy, &events.HostDown{Host: h.Host}, h)
	}
	publishEvents(t, nats.js, "busy", busy...)
	for i := range 30 {
		publishEvents(t, nats.js, quiet[i%3], &events.Demand{Demands: map[string]int64{"/a": int64(i % 4)}})
	}
	full := nats.lastSeq(t)
	var pending atomic.Int32
	boom := errors.New("simulated crash")
	quietLog := slog.New(slog.NewTextHandler(io.Discard, nil))
	// A batch's work bounded at 8 ms (a pool's share 2 ms) sets the busy
	// pool's events aside on any machine, however fast it folds them.
	crashing := projections.New(testenv.As(t, nats.js, natsauth.Projector), db, projections.WithLogger(quietLog), projections.WithBatchWork(8*time.Millisecond), projections.WithFailpoint(func(stage string) error {
		var n int
		if stage == projections.StageAfterCommitBeforeAck && db.QueryRow(ctx, `SELECT count(*) FROM pending_events`).Scan(&n) == nil && n > 0 {
			pending.Store(int32(n))
			return boom
		}
		return nil
	}))
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := crashing.Run(rctx); !errors.Is(err, boom) {
		t.Fatalf("the projector stopped with %v, want the simulated crash with events set aside", err)
	}
	// The offset passed the events set aside: they are held by the
	// projection (pending_events), not projected yet.
	offset, err := query.PassedOffset(ctx, db, "")
	if err != nil || offset <= early {
		t.Fatalf("offset %d (%v), want past the synced %d", offset, err, early)
	}
	want := storedMessages(t, nats.js, early+1, offset)

	nats.stop() // the crash: the unsynced tail is gone
	nats.restore(synced)
	nats.start()
	if got := nats.lastSeq(t); got != early {
		t.Fatalf("after the restore the stream ends at %d, want %d", got, early)
	}
	project := runPartitionedInProcess(t, nats.js, db, 0)
	deadline := time.Now().Add(60 * time.Second)
	for nats.lastSeq(t) < offset && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	got := storedMessages(t, nats.js, early+1, offset)
	for seq, w := range want {
		if g := got[seq]; g != w {
			t.Fatalf("sequence %d after the heal: %+v; before the crash: %+v (%d events were set aside)", seq, g, w, pending.Load())
		}
	}
	// Everything given back is folded (the rest of the tail is lost).
	for time.Now().Before(deadline) {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM pending_events`).Scan(&n); err == nil && n == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := project.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Verify(ctx, nats.js, db, nil, 1, "", nil); err != nil {
		t.Fatalf("audit verify after the heal: %v", err)
	}
	fresh := newDB(t)
	s.rebuild(t, fresh, "fresh", projections.WithSnapshotEvery(25))
	live, _ := pgdump.Tables(ctx, db)
	again, _ := pgdump.Tables(ctx, fresh)
	if d := pgdump.Diff(live, again); d != "" {
		t.Fatalf("a fresh projection of the healed stream differs at %s", d)
	}
	t.Logf("healed %d messages (%d of them set aside for the busy pool) of a tail of %d", offset-early, pending.Load(), full-early)
}

// publishEvents appends events to pool as the ledger would, unsigned.
func publishEvents(t *testing.T, js jetstream.JetStream, pool string, ps ...events.Payload) {
	t.Helper()
	for _, p := range ps {
		publishCounter++
		env, err := events.New(fmt.Sprintf("%s-%d", pool, publishCounter), pool, "test", scenario.Epoch.Add(time.Duration(publishCounter)*time.Second), p)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(env)
		if _, err := js.Publish(context.Background(), stream.Subject(pool, env.Type), data, jetstream.WithMsgID(env.ID)); err != nil {
			t.Fatal(err)
		}
	}
}

var publishCounter int

// TestLedgerRecoverNamesItsIdentity: `ledger recover` appends, so it runs
// as the ledger identity (the reporting role for PostgreSQL, as `ledger
// dev` prints it): with the auditor's identity, the one `ledger dev`
// prints, a needed recover fails at once saying which identity appends,
// and appends nothing; with the ledger's it gives the stream its tail
// back (decision 428).
func TestLedgerRecoverNamesItsIdentity(t *testing.T) {
	bin := ledgerBinary(t)
	nats := newCrashNATS(t)
	roles := testdb.New(t)
	early, full := projectThenLoseTail(t, nats, testdb.Pool(t, roles.Projector), func() { rawPool(t, nats.js, "r", 0, 20) }, 20, 45)
	recover := func(id natsauth.Role) (string, error) {
		cmd := exec.Command(bin, "recover", "--nats-url", nats.srv.URL(), "--nats-creds", testenv.Creds(t, nats.srv.URL(), id), "--database-url", roles.Reporting)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	start := time.Now()
	out, err := recover(natsauth.Auditor)
	if err == nil || !strings.Contains(out, "ledger identity") || !strings.Contains(out, "ledger.nk") {
		t.Fatalf("ledger recover as the auditor: %v\n%s\nwant a failure naming the identity that appends", err, out)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("ledger recover as the auditor took %v to fail", d)
	}
	if got := nats.lastSeq(t); got != early {
		t.Fatalf("a refused recover changed the stream: it ends at %d, it ended at %d", got, early)
	}
	if out, err := recover(natsauth.Ledger); err != nil || !strings.Contains(out, fmt.Sprintf("it now ends at %d", full)) {
		t.Fatalf("ledger recover as the ledger: %v\n%s", err, out)
	}
}

// TestProjectorHealWithoutTheRightToAppend: a projector run as
// docker-compose runs it, with its own identity and no --heal-creds, on
// a stream that lost its tail: its heal is refused by NATS (the
// projector may not append), and instead of waiting for ever for
// acknowledgements, projecting nothing while its liveness probe says
// ok, it fails saying which identity heals, counts the failure toward
// --stuck-after, and appends nothing; given the ledger's identity to heal
// with, it heals (decision 428).
func TestProjectorHealWithoutTheRightToAppend(t *testing.T) {
	nats := newCrashNATS(t)
	roles := testdb.New(t)
	db := testdb.Pool(t, roles.Projector)
	early, full := projectThenLoseTail(t, nats, db, func() { rawPool(t, nats.js, "r", 0, 20) }, 20, 45)

	var logged syncBuffer
	failures := projections.NewFailures()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- projections.New(testenv.As(t, nats.js, natsauth.Projector), db, projections.WithFailures(failures),
			projections.WithLogger(slog.New(slog.NewTextHandler(&logged, nil)))).Run(ctx)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(logged.String(), "healing needs one allowed to publish to ledger.>") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("a projector that may not append did not say why its heal fails within 60s:\n%s", logged.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if failures.Longest() <= 0 {
		t.Errorf("the refused heal is not counted as a failure (--stuck-after)")
	}
	cancel()
	<-done
	if got := nats.lastSeq(t); got != early {
		t.Fatalf("a refused heal changed the stream: it ends at %d, it ended at %d", got, early)
	}
	project := runProjectorInProcess(t, nats.js, db) // heals with the ledger's identity
	for deadline := time.Now().Add(60 * time.Second); nats.lastSeq(t) != full; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the projector healing as the ledger did not give the stream its tail back (at %d, want %d)", nats.lastSeq(t), full)
		}
	}
	_ = project.stop()
}
