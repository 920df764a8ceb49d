package stream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// publishMixed appends n messages, alternating pools a and b, each with a
// message id and a header of its own (one in 10 without the header), and
// one on a subject of no pool shape; it returns them by sequence.
func publishMixed(t *testing.T, js jetstream.JetStream, n int) map[uint64]*nats.Msg {
	t.Helper()
	ctx := context.Background()
	sent := map[uint64]*nats.Msg{}
	for i := range n {
		pool := []string{"a", "b"}[i%2]
		m := nats.NewMsg(stream.Subject(pool, "demand"))
		m.Data = fmt.Appendf(nil, `{"i":%d,"pad":%q}`, i, strings.Repeat("x", i%300))
		if i%10 != 0 {
			m.Header.Set("Ledger-Test", fmt.Sprint(i))
		}
		ack, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(fmt.Sprintf("id-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		sent[ack.Sequence] = m
	}
	return sent
}

func collect(t *testing.T, nc *nats.Conn, filter string, from, to uint64) []stream.Msg {
	t.Helper()
	var got []stream.Msg
	if err := stream.Read(context.Background(), nc, filter, from, to, func(m stream.Msg) error {
		got = append(got, m)
		return nil
	}); err != nil {
		t.Fatalf("Read(%q, %d, %d): %v", filter, from, to, err)
	}
	return got
}

// TestReadRanges reads ranges of a stream of 3,000 messages (more than a
// batch) as the auditor, whole and filtered by pool, from and to any
// sequence: every message in order, as published (subject, data, header
// with the message id; no header of the direct get's own), nothing
// outside the range, and no consumer left on the stream (there is none
// to leave: the auditor may create none).
func TestReadRanges(t *testing.T) {
	url := testenv.NATS(t)
	admin := adminJS(t, url)
	sent := publishMixed(t, admin, 3000)
	nc := testenv.Connect(t, url, natsauth.Auditor)
	for _, c := range []struct {
		filter   string
		from, to uint64
	}{
		{"", 1, 3000}, {"ledger.>", 0, 3000}, {stream.PoolFilter("a"), 1, 3000}, {stream.PoolFilter("b"), 1500, 2999},
		{"", 1024, 1025}, {stream.PoolFilter("a"), 2, 2}, {stream.PoolFilter("a"), 3001, 4000}, {"", 10, 9},
	} {
		got := collect(t, nc, c.filter, c.from, c.to)
		var want []uint64
		for seq := max(c.from, 1); seq <= min(c.to, 3000); seq++ {
			if c.filter == "" || c.filter == "ledger.>" || strings.HasPrefix(sent[seq].Subject, strings.TrimSuffix(c.filter, ">")) {
				want = append(want, seq)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%q %d..%d: %d messages, want %d", c.filter, c.from, c.to, len(got), len(want))
		}
		for i, m := range got {
			p := sent[m.Seq]
			if m.Seq != want[i] || stream.Published(m.Subject) != p.Subject || string(m.Data) != string(p.Data) || m.Time.IsZero() {
				t.Fatalf("%q: message %d is %d %s %q, want %d %s %q", c.filter, i, m.Seq, m.Subject, m.Data, want[i], p.Subject, p.Data)
			}
			if m.Header.Get("Nats-Msg-Id") == "" || m.Header.Get("Ledger-Test") != p.Header.Get("Ledger-Test") ||
				m.Header.Get("Nats-Sequence") != "" || m.Header.Get("Nats-Num-Pending") != "" || m.Header.Get("Nats-Time-Stamp") != "" {
				t.Fatalf("message %d header %v, want the published one %v and its message id", m.Seq, m.Header, p.Header)
			}
		}
	}
	s, err := admin.Stream(context.Background(), stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Consumers; n != 0 {
		t.Errorf("%d consumers on the stream after reading, want 0", n)
	}
	// The leader's view agrees.
	if last, err := stream.LastSeq(context.Background(), nc); err != nil || last != 3000 {
		t.Errorf("LastSeq = %d, %v", last, err)
	}
	if m, ok, err := stream.Last(context.Background(), nc, stream.PoolFilter("a")); err != nil || !ok || m.Seq != 2999 {
		t.Errorf("Last(a) = %d %v %v, want 2999", m.Seq, ok, err)
	}
	if m, ok, err := stream.Next(context.Background(), nc, 3000, stream.PoolFilter("a")); err != nil || ok {
		t.Errorf("Next(a, 3000) = %d %v %v, want none", m.Seq, ok, err)
	}
	if _, ok, err := stream.Last(context.Background(), nc, stream.PoolFilter("none")); err != nil || ok {
		t.Errorf("Last(none) = %v %v, want none", ok, err)
	}
}

// TestReadStops: fn's error ends the read and is returned; a cancelled
// context too.
func TestReadStops(t *testing.T) {
	url := testenv.NATS(t)
	publishMixed(t, adminJS(t, url), 2500)
	nc := testenv.Connect(t, url, natsauth.Ledger)
	stop := errors.New("stop")
	n := 0
	err := stream.Read(context.Background(), nc, "", 1, 2500, func(stream.Msg) error {
		if n++; n == 1500 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 1500 {
		t.Fatalf("Read = %v after %d messages, want stop after 1500", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err = stream.Read(ctx, nc, "", 1, 2500, func(stream.Msg) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after cancel = %v", err)
	}
	// Still usable afterwards (nothing left half-read on the connection).
	if got := collect(t, nc, "", 2400, 2500); len(got) != 101 {
		t.Fatalf("read after stops: %d messages", len(got))
	}
}

// TestReadWithoutDirect: a stream made before allow_direct (by an older
// release) is refused with a message saying what to run; Setup (the
// admin's `ledger nats setup`, `ledger dev`) turns it on.
func TestReadWithoutDirect(t *testing.T) {
	url := testenv.NATS(t)
	admin := adminJS(t, url)
	ctx := context.Background()
	cfg := stream.Config()
	cfg.AllowDirect = false
	if _, err := admin.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	publishMixed(t, admin, 3)
	nc := testenv.Connect(t, url, natsauth.Auditor)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := stream.Read(rctx, nc, "", 1, 3, func(stream.Msg) error { return nil })
	if !errors.Is(err, stream.ErrNoDirect) || !strings.Contains(err.Error(), "ledger nats setup") {
		t.Fatalf("Read without direct gets: %v, want ErrNoDirect", err)
	}
	if _, err := stream.Setup(ctx, admin, stream.Settings{}); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, nc, "", 1, 3); len(got) != 3 {
		t.Fatalf("after setup: %d messages", len(got))
	}
}

// TestReadReplicated reads an R3 stream while it is appended to, through
// each server in turn: followers answer direct gets too, and Read
// confirms the end with the leader, so every message up to the last
// acknowledged one is read.
func TestReadReplicated(t *testing.T) {
	c := testenv.NATSCluster(t, 3)
	admin := adminJS(t, c.URL())
	ctx := context.Background()
	for round := range 30 {
		var last uint64
		for i := range 20 {
			ack, err := admin.Publish(ctx, stream.Subject("p", "demand"), fmt.Appendf(nil, `{"r":%d,"i":%d}`, round, i))
			if err != nil {
				t.Fatal(err)
			}
			last = ack.Sequence
		}
		nc := testenv.Connect(t, c.URLs()[round%3], natsauth.Auditor)
		got := collect(t, nc, stream.PoolFilter("p"), 1, last)
		if len(got) != int(last) || got[len(got)-1].Seq != last {
			t.Fatalf("round %d through server %d: %d messages, want %d", round, round%3, len(got), last)
		}
		nc.Close()
	}
}
