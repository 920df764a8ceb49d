package connect_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/connect"
	"github.com/cluster-ledger/ledger/internal/natsserver"
	"github.com/cluster-ledger/ledger/internal/pgcluster"
	"github.com/cluster-ledger/ledger/projections/query"
)

// logBuffer collects a Waiter's log lines (written from several
// goroutines).
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// refusedAddr is a 127.0.0.1 port nothing listens on.
func refusedAddr(t *testing.T) (string, int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return addr, port
}

// TestPostgresStartedAfterTheConnect starts connecting to a port where no
// server runs yet, then starts a real PostgreSQL there: Postgres waits,
// says so, connects and migrates.
func TestPostgresStartedAfterTheConnect(t *testing.T) {
	_, port := refusedAddr(t)
	url := fmt.Sprintf("postgres://%s:testpw@127.0.0.1:%d/ledger?sslmode=disable", pgcluster.Superuser, port)
	var logs logBuffer
	w := connect.New("test", logs.logger(), 2*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type result struct {
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		db, err := w.Postgres(ctx, url, true)
		if err == nil {
			// The schema is there: the projection can be read (and is empty).
			var held bool
			held, err = query.HoldsProjection(ctx, db)
			if err == nil && held {
				err = errors.New("a fresh database holds a projection")
			}
			db.Close()
		}
		done <- result{err, time.Now()}
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("Postgres returned before any server ran: %v", r.err)
	default:
	}
	dir, err := os.MkdirTemp("", "ledger-connect-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil { // PostgreSQL may run as nobody
		t.Fatal(err)
	}
	var pglog bytes.Buffer
	started := time.Now()
	c, err := pgcluster.Start(ctx, pgcluster.WithDataDir(filepath.Join(dir, "data")), pgcluster.WithPort(port),
		pgcluster.WithFsync(false), pgcluster.WithLog(&pglog), pgcluster.WithSuperuserPassword("testpw"))
	if err != nil {
		t.Fatalf("start PostgreSQL: %v\n%s", err, pglog.String())
	}
	defer func() { _ = c.Stop(context.Background()) }()
	r := <-done
	if r.err != nil {
		t.Fatalf("Postgres: %v\n%s", r.err, logs.String())
	}
	if r.at.Before(started) {
		t.Fatal("Postgres returned before PostgreSQL was started")
	}
	for _, want := range []string{"test: PostgreSQL not reachable yet; waiting", "limit=2m0s", fmt.Sprintf("127.0.0.1:%d", port), "test: PostgreSQL reachable"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestNATSRefusedGivesUpAfterTheBound connects to an address that refuses
// connections: a clear error once the bound has passed, not before, and
// progress lines meanwhile.
func TestNATSRefusedGivesUpAfterTheBound(t *testing.T) {
	addr, _ := refusedAddr(t)
	var logs logBuffer
	const bound = 1500 * time.Millisecond
	start := time.Now()
	nc, err := connect.New("test", logs.logger(), bound).NATS(context.Background(), "nats://"+addr)
	took := time.Since(start)
	if err == nil {
		nc.Close()
		t.Fatal("connected to a refused address")
	}
	if !errors.Is(err, connect.ErrUnreachable) {
		t.Fatalf("error %v does not match ErrUnreachable", err)
	}
	for _, want := range []string{"NATS nats://" + addr, "not reachable after 1.5s", "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if took < bound || took > bound+2*time.Second {
		t.Errorf("gave up after %v, want just after %v", took, bound)
	}
	if !strings.Contains(logs.String(), "test: NATS not reachable yet; waiting") {
		t.Errorf("no progress line:\n%s", logs.String())
	}
}

// TestNATSStartedAfterTheConnect starts NATS once the connect is waiting:
// the connection comes up soon after and survives the bound.
func TestNATSStartedAfterTheConnect(t *testing.T) {
	addr, _ := refusedAddr(t)
	var logs logBuffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	var started time.Time
	go func() {
		nc, err := connect.New("test", logs.logger(), 30*time.Second).NATS(ctx, "nats://"+addr)
		if err == nil {
			defer nc.Close()
			if !nc.IsConnected() {
				err = errors.New("returned a connection that is not connected")
			}
		}
		done <- err
	}()
	time.Sleep(700 * time.Millisecond)
	started = time.Now()
	srv, err := natsserver.Start(ctx, natsserver.WithStoreDir(t.TempDir()), natsserver.WithListen(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	if err := <-done; err != nil {
		t.Fatalf("NATS: %v\n%s", err, logs.String())
	}
	if took := time.Since(started); took > 5*time.Second {
		t.Errorf("connected %v after NATS started", took)
	}
	for _, want := range []string{"test: NATS not reachable yet; waiting", "test: NATS connected"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestStopsWithTheContext: no bound, but a cancelled context ends the
// wait at once with an error wrapping context.Canceled.
func TestStopsWithTheContext(t *testing.T) {
	_, port := refusedAddr(t)
	var logs logBuffer
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err := connect.New("test", logs.logger(), 0).Postgres(ctx, fmt.Sprintf("postgres://u:secret@127.0.0.1:%d/db", port), false)
	if !errors.Is(err, context.Canceled) || errors.Is(err, connect.ErrUnreachable) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("stopped %v after the start, want about 300ms", took)
	}
	if !strings.Contains(logs.String(), "limit=\"none (until stopped)\"") || strings.Contains(logs.String(), "secret") {
		t.Errorf("log should say there is no limit and hide the password:\n%s", logs.String())
	}
}

// TestRetryGivesTheLastError: the bound ends a generic wait too, with
// the last failure in the error chain.
func TestRetryGivesTheLastError(t *testing.T) {
	errBusy := errors.New("busy")
	calls := 0
	err := connect.New("test", slog.New(slog.NewTextHandler(&logBuffer{}, nil)), 700*time.Millisecond).
		Retry(context.Background(), "JetStream", "nats://127.0.0.1:4222", func(context.Context) error { calls++; return errBusy })
	if !errors.Is(err, connect.ErrUnreachable) || !errors.Is(err, errBusy) || calls < 2 {
		t.Fatalf("after %d calls: %v, want ErrUnreachable wrapping busy", calls, err)
	}
}
