package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/connect"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestMain doubles as the command when PROJECTOR_TEST_MAIN is set, so the
// signal test can run the real main in a child process.
func TestMain(m *testing.M) {
	if os.Getenv("PROJECTOR_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	testenv.Main(m)
}

// publishSeed publishes the seed scenario and returns the last sequence.
func publishSeed(t *testing.T, url string) uint64 {
	t.Helper()
	js := testenv.JetStream(t, url)
	ctx := context.Background()
	s, err := scenario.ParseFile("../../test/scenarios/seed/seed-001-share-ratio-subconsumers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	evs := s.Events()
	var last uint64
	for i, ev := range evs {
		env, err := events.New(fmt.Sprintf("e%d", i), "seed", "test", scenario.Epoch.Add(time.Duration(i)*time.Second), ev.Payload)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(env)
		ack, err := js.Publish(ctx, stream.Subject("seed", ev.Payload.EventType()), b, jetstream.WithMsgID(env.ID))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	return last
}

// waitProjected waits until projector_offsets reaches seq.
func waitProjected(t *testing.T, dbURL string, seq uint64) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			continue
		}
		var got int64
		err = conn.QueryRow(ctx, `SELECT stream_seq FROM projector_offsets WHERE name = 'projector'`).Scan(&got)
		conn.Close(ctx)
		if err == nil && uint64(got) >= seq {
			return
		}
	}
	t.Fatalf("projector_offsets did not reach %d within 60s", seq)
}

func checkAllocations(t *testing.T, dbURL string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var got string
	err = conn.QueryRow(ctx, `SELECT string_agg(consumer || '=' || allocated, ' ' ORDER BY consumer) FROM consumer_state WHERE pool = 'seed'`).Scan(&got)
	if err != nil {
		t.Fatal(err)
	}
	// The seed scenario's last step: B1 25, B2 75 (A has no demand).
	if want := "/A=0 /B=100 /B/B1=25 /B/B2=75"; got != want {
		t.Fatalf("consumer_state: %s, want %s", got, want)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunWaitsForNATS starts the command before NATS is up: it must wait,
// then project once NATS appears, and stop cleanly with its context.
func TestRunWaitsForNATS(t *testing.T) {
	dbURL := testdb.New(t).Projector
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	natsURL := "nats://" + addr
	dir := t.TempDir()
	if _, err := natsauth.Init(filepath.Join(dir, "auth")); err != nil { // the identities exist before the server
		t.Fatal(err)
	}
	creds := natsauth.SeedFile(filepath.Join(dir, "auth"), natsauth.Projector)
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--nats-url", natsURL, "--nats-creds", creds, "--database-url", dbURL, "--batch", "2"}, &logs)
	}()
	time.Sleep(700 * time.Millisecond)
	srv := testenv.StartNATS(t, dir, addr)
	last := publishSeed(t, srv.URL())
	waitProjected(t, dbURL, last)
	checkAllocations(t, dbURL)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "NATS not reachable yet; waiting") {
		t.Fatalf("no log line about waiting for NATS:\n%s", logs.String())
	}
}

// TestSIGTERM runs the real main in a child process and stops it with
// SIGTERM: exit status 0.
func TestSIGTERM(t *testing.T) {
	natsURL, dbURL := testenv.NATS(t), testdb.New(t).Projector
	last := publishSeed(t, natsURL)
	cmd := exec.Command(os.Args[0]) // TestMain runs main, which parses no flags
	cmd.Env = append(os.Environ(), "PROJECTOR_TEST_MAIN=1", "NATS_URL="+natsURL, "LEDGER_NATS_CREDS="+testenv.Creds(t, natsURL, natsauth.Projector), "DATABASE_URL="+dbURL)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitProjected(t, dbURL, last)
	checkAllocations(t, dbURL)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("projector after SIGTERM: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "projector: stopped") {
		t.Fatalf("no clean stop logged:\n%s", out.String())
	}
}

func TestFlags(t *testing.T) {
	t.Setenv("NATS_URL", "")
	t.Setenv("DATABASE_URL", "")
	var buf bytes.Buffer
	if err := run(context.Background(), nil, &buf); err == nil || !strings.Contains(err.Error(), "NATS_URL") {
		t.Fatalf("run without addresses: %v", err)
	}
}

// TestGivesUpAfterConnectTimeout: with no PostgreSQL at the address, the
// command says it is waiting, then ends with an error naming what it could
// not reach once --connect-timeout has passed.
func TestGivesUpAfterConnectTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var logs syncBuffer
	start := time.Now()
	err = run(context.Background(), []string{"--nats-url", "nats://" + addr, "--database-url", "postgres://u:secret@" + addr + "/db",
		"--connect-timeout", "1s"}, &logs)
	if !errors.Is(err, connect.ErrUnreachable) || !strings.Contains(err.Error(), "PostgreSQL postgres://u:xxxxx@"+addr) {
		t.Fatalf("run: %v, want PostgreSQL at %s not reachable", err, addr)
	}
	if took := time.Since(start); took < time.Second || took > 4*time.Second {
		t.Errorf("gave up after %v, want about 1s", took)
	}
	if !strings.Contains(logs.String(), "projector: PostgreSQL not reachable yet; waiting") {
		t.Errorf("no progress line:\n%s", logs.String())
	}
}

func TestPartitionFlagsRefused(t *testing.T) {
	for _, args := range [][]string{{"--partitions", "-1"}, {"--partitions", "100000"}, {"--partitions", "2", "--pinned-ttl", "1s"}} {
		var buf bytes.Buffer
		err := run(context.Background(), append([]string{"--nats-url", "nats://127.0.0.1:1", "--database-url", "postgres://x"}, args...), &buf)
		if err == nil || !strings.Contains(err.Error(), args[len(args)-2]) {
			t.Errorf("run %v: %v, want an error naming %s", args, err, args[len(args)-2])
		}
	}
}

// A flag out of its range is refused, naming it, before anything starts,
// rather than taken silently as something else: --stuck-after 0 made
// /healthz answer "down, stuck" for a healthy projector (no failure is 0s
// long, and 0s >= 0s), so an orchestrator would restart it forever;
// --ready-lag -1s made /readyz never ready; the others fell back to the
// default without a word.
func TestFlagsOutOfRangeRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--stuck-after", "0s"}, {"--stuck-after", "-1s"},
		{"--ready-lag", "0s"}, {"--ready-lag", "-1s"},
		{"--connect-timeout", "-1s"},
		{"--batch", "0"}, {"--batch", "-5"},
		{"--pipeline-rows", "-1"},
		{"--snapshot-every", "0"}, {"--snapshot-every", "-1"},
		{"--resident-pools", "0"}, {"--resident-pools", "-1"},
		// A name NATS cannot name a consumer with failed only at the
		// consumer's creation, retried for ever; a bad listener only
		// once PostgreSQL and NATS answered.
		{"--name", ""}, {"--name", "a.b"}, {"--name", "a>"}, {"--name", strings.Repeat("n", 65)},
		{"--health-listen", "nope"}, {"--health-listen", "127.0.0.1:70000"},
		{"--metrics-listen", "nope", "--metrics-tokens", "/nonexistent"},
	} {
		var buf bytes.Buffer
		start := time.Now()
		err := run(context.Background(), append([]string{"--nats-url", "nats://127.0.0.1:1", "--database-url", "postgres://x@127.0.0.1:1/x"}, args...), &buf)
		if err == nil || !strings.Contains(err.Error(), args[0]) || time.Since(start) > time.Second {
			t.Errorf("run %v: %v after %v, want an error naming %s at once", args, err, time.Since(start), args[0])
		}
	}
}

// Two commands with --partitions share the pools with the projector's own
// NATS identity (which may create partition consumers and unpin them).
func TestTwoPartitionedProjectors(t *testing.T) {
	dbURL := testdb.New(t).Projector
	url := testenv.NATS(t)
	creds := testenv.Creds(t, url, natsauth.Projector)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs [2]syncBuffer
	done := make(chan error, 2)
	for i := range logs {
		go func() {
			done <- run(ctx, []string{"--nats-url", url, "--nats-creds", creds, "--database-url", dbURL,
				"--partitions", "3", "--pinned-ttl", "2s", "--instance", fmt.Sprintf("i%d", i)}, &logs[i])
		}()
	}
	last := publishSeed(t, url)
	ctxq := context.Background()
	conn, err := pgx.Connect(ctxq, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctxq)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var n int
		err := conn.QueryRow(ctxq, `SELECT count(*) FROM projector_offsets WHERE partitions = 3 AND stream_seq >= $1`, int64(last)).Scan(&n)
		if err == nil && n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the 3 partitions did not reach %d within 60s\n%s\n%s", last, logs[0].String(), logs[1].String())
		}
	}
	checkAllocations(t, dbURL)
	cancel()
	for range logs {
		if err := <-done; err != nil {
			t.Fatalf("run: %v", err)
		}
	}
	for i := range logs {
		if s := logs[i].String(); strings.Contains(s, "Permissions Violation") || strings.Contains(s, "unpin failed") {
			t.Errorf("instance %d was refused something:\n%s", i, s)
		}
	}
}

// --health-listen serves the probes without a token: /healthz is live
// while the projector runs and NATS answers, /readyz ready once its
// partitions have caught up with the stream, and neither names an
// address or an error.
func TestHealthListener(t *testing.T) {
	natsURL, dbURL := testenv.NATS(t), testenv.Postgres(t)
	last := publishSeed(t, natsURL)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(os.Args[0], "--partitions", "2", "--pinned-ttl", "2s", "--health-listen", addr)
	cmd.Env = append(os.Environ(), "PROJECTOR_TEST_MAIN=1", "NATS_URL="+natsURL, "LEDGER_NATS_CREDS="+testenv.Creds(t, natsURL, natsauth.Projector), "DATABASE_URL="+dbURL)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("projector:\n%s", out.String())
		}
	})
	probe := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var body map[string]any
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("%s: %d %q", path, resp.StatusCode, raw)
		}
		if strings.Contains(string(raw), "127.0.0.1") || strings.Contains(string(raw), "nats://") {
			t.Errorf("%s names an address: %s", path, raw)
		}
		return resp.StatusCode, body
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := probe("/readyz")
		if code == http.StatusOK && body["projection"] == "current" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not ready after 60s: %d %v", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitProjected2(t, dbURL, last, 2)
	if code, body := probe("/healthz"); code != http.StatusOK || body["status"] != "ok" || body["nats"] != "ok" || body["stream"] != "ok" || body["running"] != "ok" {
		t.Errorf("/healthz: %d %v", code, body)
	}
	// Answers are reused for a second (health.CacheFor): caught up shows
	// as lag 0 once the cached one is older.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, body := probe("/readyz")
		if code == http.StatusOK && body["postgres"] == "ok" && body["lag_seconds"] == 0.0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz caught up: %d %v", code, body)
		}
	}
}

// waitProjected2 waits until each of the n partitions' offsets reaches seq.
func waitProjected2(t *testing.T, dbURL string, seq uint64, n int) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			continue
		}
		var got int
		err = conn.QueryRow(ctx, `SELECT count(*) FROM projector_offsets WHERE partitions = $1 AND stream_seq >= $2`, n, int64(seq)).Scan(&got)
		conn.Close(ctx)
		if err == nil && got == n {
			return
		}
	}
	t.Fatalf("the %d partitions did not reach %d within 60s", n, seq)
}

// A projector that can never project (here: a name whose durables the
// projector identity may not manage, so NATS refuses every consumer call)
// retries for ever; its /healthz says so once it has failed without a
// success for --stuck-after (running: stuck, 503), as an outside
// evaluation found it answering ok; /readyz says behind.
func TestHealthzStuckProjector(t *testing.T) {
	natsURL, dbURL := testenv.NATS(t), testenv.Postgres(t)
	publishSeed(t, natsURL)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(os.Args[0], "--name", "side", "--partitions", "2", "--pinned-ttl", "2s", "--health-listen", addr, "--stuck-after", "3s")
	cmd.Env = append(os.Environ(), "PROJECTOR_TEST_MAIN=1", "NATS_URL="+natsURL, "LEDGER_NATS_CREDS="+testenv.Creds(t, natsURL, natsauth.Projector), "DATABASE_URL="+dbURL)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("projector:\n%s", out.String())
		}
	})
	var last string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			continue
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = fmt.Sprintf("%d %s", resp.StatusCode, raw)
		var body map[string]any
		if json.Unmarshal(raw, &body) == nil && resp.StatusCode == http.StatusServiceUnavailable && body["running"] == "stuck" {
			if strings.Contains(string(raw), "Permission") || strings.Contains(string(raw), "$JS") {
				t.Errorf("/healthz names the error: %s", raw)
			}
			return
		}
	}
	t.Fatalf("/healthz never said stuck: last %s", last)
}
