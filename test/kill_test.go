package test

import (
	"context"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
	"github.com/cluster-ledger/ledger/internal/pgdump"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections/query"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
)

// TestProjectorKilledMidRun kills the projector process with SIGKILL
// (no chance to clean up) twice while it works through a backlog, restarts
// it each time, and requires the final tables to equal those of an
// uninterrupted projection of the same log.
func TestProjectorKilledMidRun(t *testing.T) { projectorKilledMidRun(t) }

// TestProjectorKilledMidRunOverlapped is TestProjectorKilledMidRun with
// every batch written by COPY (--pipeline-rows 0), each one's rows
// appended while the batch before commits (docs/decisions.md #439): a
// kill leaves up to two transactions open.
func TestProjectorKilledMidRunOverlapped(t *testing.T) {
	projectorKilledMidRun(t, "--pipeline-rows", "0")
}

func projectorKilledMidRun(t *testing.T, extra ...string) {
	s := newStack(t)
	publishRandomPools(t, s.js, 8, 600)
	want := newDB(t)
	s.project(t, want)

	bin := projectorBinary(t)
	got := newDB(t)
	natsURL, gotURL := s.natsURL, got.Config().ConnString()
	info, err := mustStream(t, s.js).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	last := info.State.LastSeq
	for kill := 0; kill < 2; kill++ {
		cmd := exec.Command(bin, append([]string{"--nats-url", natsURL, "--nats-creds", testenv.Creds(t, natsURL, natsauth.Projector), "--database-url", gotURL, "--batch", "50"}, extra...)...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitOffsetAbove(t, got, uint64(1500*(kill+1)))
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if at := offset(t, got); at >= last {
			t.Fatalf("kill %d came after the projector had finished (offset %d of %d): nothing was interrupted", kill+1, at, last)
		}
	}
	s.project(t, got) // the third run, in process, finishes the backlog
	w, err := pgdump.Tables(context.Background(), want)
	if err != nil {
		t.Fatal(err)
	}
	g, err := pgdump.Tables(context.Background(), got)
	if err != nil {
		t.Fatal(err)
	}
	if d := pgdump.Diff(w, g); d != "" {
		t.Fatalf("after two SIGKILLs the projection differs from an uninterrupted one at %s", d)
	}
}

// publishRandomPools appends n random events (valid and invalid) to each
// of pools pools, interleaved.
func publishRandomPools(t *testing.T, js jetstream.JetStream, pools, n int) {
	t.Helper()
	scs := make([]gen.Scenario, pools)
	for i := range scs {
		scs[i] = gen.Generate(gen.NewRand(uint64(100+i)), n)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for k := 0; ; k++ {
		if k%200 == 199 {
			// Bounded in flight: with every write synced, acks come slower
			// than PublishAsync's default limit of pending messages allows.
			<-js.PublishAsyncComplete()
		}
		sent := false
		for i, sc := range scs {
			if k >= len(sc.Events) {
				continue
			}
			sent = true
			pool := fmt.Sprintf("p%d", i)
			env, err := events.New(fmt.Sprintf("%s-%d", pool, k), pool, "test", at.Add(time.Duration(k)*time.Second), sc.Events[k])
			if err != nil {
				t.Fatal(err)
			}
			data, _ := jsonMarshal(env)
			if _, err := js.PublishAsync(stream.Subject(pool, env.Type), data, jetstream.WithMsgID(env.ID)); err != nil {
				t.Fatal(err)
			}
		}
		if !sent {
			break
		}
	}
	<-js.PublishAsyncComplete()
}

func offset(t *testing.T, db *pgxpool.Pool) uint64 {
	got, err := query.ProjectorOffset(context.Background(), db, "")
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func waitOffsetAbove(t *testing.T, db *pgxpool.Pool, seq uint64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if offset(t, db) > seq {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("projector did not pass sequence %d", seq)
}
