package projections

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// publishAcked is publish retried until the stream answers (with the
// same message id, so a retry of an append that was stored is
// recognised), for a stream electing a leader; it returns when the
// append was acknowledged.
func (m *model) publishAcked(pool string, p events.Payload) time.Time {
	m.t.Helper()
	env, data := m.next(pool, p)
	at := env.Time
	for begin := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ack, err := m.js.Publish(ctx, stream.Subject(pool, p.EventType()), data, jetstream.WithMsgID(env.ID))
		cancel()
		if err == nil {
			m.fold(pool, ack.Sequence, at, p)
			return time.Now()
		}
		if time.Since(begin) > 60*time.Second {
			m.t.Fatalf("publish to %s: still failing after 60s: %v", pool, err)
		}
	}
}

// stallBound is how long an event may wait to be projected while the
// stream's leader moves: a lost request is given up after requestTimeout
// (1 s; 2 s for a second one lost in a row) and asked again after
// 100 ms, and the partition is taken over again from PostgreSQL. A partition that waited out nats.go's default
// timeout instead (5 s) made events wait 4.9 to 6.3 s.
const stallBound = 3500 * time.Millisecond

// offsetSample is a partition's offset as a reader saw it.
type offsetSample struct {
	at  time.Time
	seq uint64
}

// TestPartitionsGoOnWhileTheStreamElectsALeader: a projector instance
// (the projector's identities) holds 4 partitions of a 3-server cluster
// and is connected to the stream leader's server, which is shut down
// while events are appended and started again. While the stream elects
// a leader every request about it goes unanswered: a partition asks
// with a short timeout and backs off (requests.go), so no partition
// waits out a long one, none holds the others back, and in-progress
// acks keep going. Every event is projected once, and every event
// appended once the stream had a leader again is projected within a
// bound.
func TestPartitionsGoOnWhileTheStreamElectsALeader(t *testing.T) {
	c := testenv.NATSCluster(t, 3)
	js := connectNATS(t, c.URL())
	db := newDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(31, 32))
	const pools, parts = 12, 4
	publishPools(m, rng, pools, 1)

	leader := c.StreamLeader(stream.Name)
	if leader < 0 {
		t.Fatal("no stream leader")
	}
	// The projector's connection goes to the leader's server first, so
	// that it is cut when that server dies.
	urls := []string{c.Server(leader).URL()}
	for i := range c.Size() {
		if i != leader {
			urls = append(urls, c.Server(i).URL())
		}
	}
	nc, err := natsauth.Connect(strings.Join(urls, ","), testenv.Creds(t, c.URL(), natsauth.Projector),
		nats.DontRandomize(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	pjs, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGroup(pjs, db, parts, WithLogger(logsOnFailure(t, "a")), WithBatchSize(20), WithInstance("a"), WithPinnedTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	waitProjected(t, db, m, 60*time.Second)

	// Each partition's offset, as reporting reads it, every 20 ms.
	var mu sync.Mutex
	samples := map[int][]offsetSample{}
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		rd := reader(db)
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
			for k := range parts {
				var seq int64
				if err := rd.QueryRow(context.Background(), `SELECT stream_seq FROM projector_offsets WHERE name = $1`, PartitionName(DefaultName, k, parts)).Scan(&seq); err == nil {
					mu.Lock()
					samples[k] = append(samples[k], offsetSample{time.Now(), uint64(seq)})
					mu.Unlock()
				}
			}
		}
	}()

	// Events flow; the leader's server dies after 2 s and comes back 5 s
	// later.
	acked := map[uint64]time.Time{}
	poolAt := map[uint64]string{}
	var killed, restarted time.Time
	begin := time.Now()
	for i := 0; time.Since(begin) < 16*time.Second; i++ {
		if killed.IsZero() && time.Since(begin) > 2*time.Second {
			c.Server(leader).Shutdown()
			killed = time.Now()
			t.Logf("shut down server %d, the stream leader, which the projector is connected to", leader)
		}
		if restarted.IsZero() && !killed.IsZero() && time.Since(killed) > 5*time.Second {
			rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := c.Restart(rctx, leader); err != nil {
				t.Fatal(err)
			}
			rcancel()
			restarted = time.Now()
			t.Logf("restarted server %d", leader)
		}
		pool := fmt.Sprintf("p%d", i%pools)
		at := m.publishAcked(pool, &events.Demand{Demands: map[string]int64{"/A": rng.Int64N(100), "/B/B1": rng.Int64N(100)}})
		acked[m.lastSeq], poolAt[m.lastSeq] = at, pool
		time.Sleep(20 * time.Millisecond)
	}
	waitProjected(t, db, m, 90*time.Second)
	close(stopSampling)
	<-sampled
	sampledTo := time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("group Run: %v", err)
	}

	// How long each event waited to be projected, by partition.
	resumed := time.Time{} // the first append acknowledged after the kill
	var seqs []uint64
	for seq, at := range acked {
		seqs = append(seqs, seq)
		if at.After(killed) && (resumed.IsZero() || at.Before(resumed)) {
			resumed = at
		}
	}
	slices.Sort(seqs)
	worst := make([]time.Duration, parts)
	worstAfter := time.Duration(0)
	counts := make([]int, parts)
	for _, seq := range seqs {
		k := PartitionOf(poolAt[seq], parts)
		at := acked[seq]
		ss := samples[k]
		i := sort.Search(len(ss), func(i int) bool { return ss[i].seq >= seq && !ss[i].at.Before(at) })
		if i == len(ss) {
			i = sort.Search(len(ss), func(i int) bool { return ss[i].seq >= seq })
		}
		lag := sampledTo.Sub(at)
		if i < len(ss) {
			lag = max(ss[i].at.Sub(at), 0)
		}
		worst[k] = max(worst[k], lag)
		counts[k]++
		if at.After(resumed) {
			worstAfter = max(worstAfter, lag)
		}
	}
	t.Logf("appends stopped %v after the kill; events waited to be projected at most %v (by partition, %d events: %v); appended after that, at most %v",
		resumed.Sub(killed).Round(time.Millisecond), slices.Max(worst).Round(time.Millisecond), len(seqs), roundAll(worst), worstAfter.Round(time.Millisecond))
	if w := slices.Max(worst); w > stallBound {
		t.Errorf("an event waited %v to be projected (by partition: %v), want at most %v: a partition waited out a lost request",
			w.Round(time.Millisecond), roundAll(worst), stallBound)
	}
	for k, n := range counts {
		if n == 0 {
			t.Errorf("no event of partition %d appended while the server went away: the test measured nothing there", k)
		}
	}
	checkAgainstModel(t, db, m)
	var delivered uint64
	for k := range parts {
		cons, err := js.Consumer(context.Background(), stream.Name, PartitionName(DefaultName, k, parts))
		if err != nil {
			t.Fatal(err)
		}
		delivered += cons.CachedInfo().Delivered.Consumer
	}
	t.Logf("the partition consumers made %d deliveries for %d events", delivered, m.lastSeq)
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
