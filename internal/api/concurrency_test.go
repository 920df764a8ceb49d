package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// countConflicts counts the servers' "append conflict" log lines.
type countConflicts struct{ n *atomic.Int64 }

func (c countConflicts) Enabled(context.Context, slog.Level) bool { return true }
func (c countConflicts) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "append conflict; catching up" {
		c.n.Add(1)
		if os.Getenv("LEDGER_DEBUG") != "" {
			r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(os.Stderr, " %s=%v", a.Key, a.Value); return true })
			fmt.Fprintln(os.Stderr)
		}
	}
	return nil
}
func (c countConflicts) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c countConflicts) WithGroup(string) slog.Handler      { return c }

// Two ledger instances append to one pool at once. Instance B's events
// (host_down hN) are only valid after instance A's (host_up hN), so B's
// must be validated against a state that includes A's appends; both
// answer every request (no 5xx) and the pool's history is gapless and
// folds without a single refusal.
func TestTwoInstancesShareAPool(t *testing.T) {
	natsURL := testenv.NATS(t)
	conflicts := &atomic.Int64{}
	logger := slog.New(countConflicts{conflicts})
	a := newLedger(t, natsURL, api.WithLogger(logger))
	b := newLedger(t, natsURL, api.WithLogger(logger))
	a.mustPost("p", []any{plan(consumer("/a"), consumer("/b")), hostUp("h0", 10)})

	const n = 50
	acked := make(chan uint64, 2*n)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 1; i <= n; i++ {
			res := a.mustPost("p", hostUp(fmt.Sprintf("h%d", i), 1))
			acked <- res.Events[0].Seq
		}
	})
	wg.Go(func() {
		// Arrays of two, so atomic batches meet conflicts too.
		for i := 1; i <= n; i += 2 {
			body := []any{
				ev("host_down", map[string]any{"host": fmt.Sprintf("h%d", i)}),
				ev("host_down", map[string]any{"host": fmt.Sprintf("h%d", i+1)}),
			}
			for _, seq := range postUntilValid(t, b, body) {
				acked <- seq
			}
		}
	})
	wg.Wait()
	close(acked)
	t.Logf("%d conflicting appends retried", conflicts.Load())

	seen := map[uint64]bool{1: true, 2: true}
	for seq := range acked {
		if seen[seq] {
			t.Errorf("sequence %d acknowledged twice", seq)
		}
		seen[seq] = true
	}
	stored := poolEvents(t, a.js, "p")
	if len(stored) != 2+2*n || len(seen) != len(stored) {
		t.Fatalf("%d events stored, %d acknowledged, want %d", len(stored), len(seen), 2+2*n)
	}
	pool := domain.NewPool("p")
	for i, e := range stored {
		if e.seq != uint64(i+1) || !seen[e.seq] {
			t.Errorf("stored event %d at seq %d (acknowledged: %t)", i, e.seq, seen[e.seq])
		}
		p, err := e.stored.Envelope.Decode()
		if err == nil {
			_, err = pool.Apply(domain.Event{Seq: e.seq, Time: e.stored.Envelope.Time, Payload: p})
		}
		if err != nil {
			t.Errorf("stored event %d (%s) is refused on replay: %v", e.seq, e.stored.Envelope.Data, err)
		}
	}
}

// postUntilValid posts body until it is accepted, as long as the refusal
// is that A has not yet brought the host up.
func postUntilValid(t *testing.T, l *ledger, body any) []uint64 {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		code, res, bad := l.post("p", body)
		switch {
		case code == http.StatusOK:
			var seqs []uint64
			for _, e := range res.Events {
				seqs = append(seqs, e.Seq)
			}
			return seqs
		case code == http.StatusUnprocessableEntity && bad.Reason == "unknown_host":
			time.Sleep(time.Millisecond)
		default:
			t.Errorf("POST answered %d %+v", code, bad)
			return nil
		}
	}
	t.Error("host never came up")
	return nil
}

// An instance far behind on a pool (a new `ledger serve`, or one that was
// cut off while another appended) catches up with a consumer, which the
// ledger's own NATS identity may create: its append is answered 200.
func TestInstanceFarBehindCatchesUp(t *testing.T) {
	natsURL := testenv.NATS(t)
	a := newLedger(t, natsURL)
	setup(a, "p")
	b := newLedger(t, natsURL)
	b.mustPost("p", demand(map[string]int{"/a": 1})) // b knows the pool
	for i := range 40 {                              // more than one message get per event catches up
		a.mustPost("p", demand(map[string]int{"/a": i % 5}))
	}
	res := b.mustPost("p", demand(map[string]int{"/b": 2}))
	if got := res.Events[0].Seq; got != 2+1+40+1 {
		t.Errorf("b appended at seq %d, want %d", got, 2+1+40+1)
	}
	fresh := newLedger(t, natsURL)
	if res := fresh.mustPost("p", demand(map[string]int{"/b": 3})); res.Events[0].Seq != 2+1+40+2 {
		t.Errorf("a new instance appended at seq %d", res.Events[0].Seq)
	}
}
