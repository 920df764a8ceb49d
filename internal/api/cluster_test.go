package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/natsserver"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// The tests of this file run the API on a real 3-server JetStream cluster
// (testenv.NATSCluster) with the LEDGER stream at 3 replicas.

// acked is what a producer was answered 200 for.
type acked struct {
	id, pool string
	seq      uint64
	dup      bool
}

// answer is one HTTP answer to an append.
type answer struct {
	code       int
	retryAfter string
	res        client.AppendResponse
	bad        client.ErrorBody
}

var clusterHTTP = &http.Client{Timeout: 15 * time.Second}

// postTo appends body to pool on l; safe in goroutines (no Fatal).
func postTo(l *ledger, pool string, body any) (answer, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return answer{}, err
	}
	rq, err := http.NewRequest(http.MethodPost, l.url+"/v1/pools/"+pool+"/events", strings.NewReader(string(raw)))
	if err != nil {
		return answer{}, err
	}
	rq.Header.Set("Content-Type", "application/json")
	rq.Header.Set("Authorization", "Bearer "+l.token)
	resp, err := clusterHTTP.Do(rq)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if a.code == http.StatusOK {
		err = json.Unmarshal(b, &a.res)
	} else {
		err = json.Unmarshal(b, &a.bad)
	}
	if err != nil {
		return a, fmt.Errorf("%d answer %q: %w", a.code, b, err)
	}
	return a, nil
}

// clusterLedgers starts two API instances (two `ledger serve`) on the
// cluster, each with its own connection to the list of servers.
func clusterLedgers(t *testing.T, c *natsserver.Cluster) (*ledger, *ledger) {
	t.Helper()
	return newLedger(t, c.URL()), newLedger(t, c.URL())
}

// producers appends demand events with ids of their own to each pool,
// alternating between the ledgers, until stop is closed. A 503 is retried
// with the same id (as the API asks); any other answer but 200 is an error
// unless allow503 is false, in which case a 503 is one too.
type producers struct {
	t        *testing.T
	ledgers  []*ledger
	allow503 bool

	mu        sync.Mutex
	acks      []acked
	retries   atomic.Int64 // 503s retried
	firstFail atomic.Int64 // unix nanos of the first 503 (0: none)
	lastFail  atomic.Int64 // unix nanos of the last 503
}

func (p *producers) run(pool string, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		id := fmt.Sprintf("%s-%d", pool, i)
		body := withID(demand(map[string]int{"/a": i % 7, "/b": i % 3}), id)
		for attempt := 0; ; attempt++ {
			l := p.ledgers[(i+attempt)%len(p.ledgers)]
			a, err := postTo(l, pool, body)
			if err != nil {
				p.t.Errorf("%s: %v", id, err)
				return
			}
			if a.code == http.StatusOK {
				p.mu.Lock()
				p.acks = append(p.acks, acked{id: id, pool: pool, seq: a.res.Events[0].Seq, dup: a.res.Events[0].Duplicate})
				p.mu.Unlock()
				break
			}
			if a.code != http.StatusServiceUnavailable || !p.allow503 {
				p.t.Errorf("%s: answered %d %+v", id, a.code, a.bad)
				return
			}
			if a.retryAfter == "" || a.bad.Reason == "" || a.bad.Error == "" {
				p.t.Errorf("%s: 503 without Retry-After or a JSON reason: %q %+v", id, a.retryAfter, a.bad)
			}
			now := time.Now().UnixNano()
			p.firstFail.CompareAndSwap(0, now)
			p.lastFail.Store(now)
			p.retries.Add(1)
			time.Sleep(50 * time.Millisecond) // Retry-After says 1s; tests are impatient
		}
	}
}

// logged reads every message of the stream: the sequences of each id.
func logged(t *testing.T, js jetstream.JetStream) map[string][]uint64 {
	t.Helper()
	state := testenv.StreamState(t, js)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Read as the ledger's readers do (stream.Read): a follower just
	// back may answer direct gets before it holds the tail, and Read
	// confirms the end with the leader.
	ids := map[string][]uint64{}
	err := stream.Read(ctx, js.Conn(), "", state.FirstSeq, state.LastSeq, func(m stream.Msg) error {
		sd, err := stream.DecodeRaw(m.Seq, m.Data)
		if err != nil {
			return err
		}
		ids[sd.Envelope.ID] = append(ids[sd.Envelope.ID], m.Seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(0)
	for _, seqs := range ids {
		n += uint64(len(seqs))
	}
	if state.LastSeq > 0 && n != state.LastSeq-state.FirstSeq+1 {
		t.Fatalf("read %d messages of %d..%d", n, state.FirstSeq, state.LastSeq)
	}
	return ids
}

// checkExactlyOnce: every id acknowledged is stored once, at the sequence
// given, and no id is stored twice.
func checkExactlyOnce(t *testing.T, acks []acked, log map[string][]uint64) {
	t.Helper()
	for id, seqs := range log {
		if len(seqs) != 1 {
			t.Errorf("id %s stored %d times, at %v", id, len(seqs), seqs)
		}
	}
	for _, a := range acks {
		if seqs := log[a.id]; len(seqs) != 1 || seqs[0] != a.seq {
			t.Errorf("%s acknowledged at seq %d, stored at %v", a.id, a.seq, seqs)
		}
	}
}

var clusterPools = []string{"c1", "c2", "c3"}

func setupPools(t *testing.T, l *ledger) {
	t.Helper()
	for _, p := range clusterPools {
		setup(l, p)
	}
}

// TestClusterStreamLeaderKilled: two API instances append to three pools
// while the stream leader's server is shut down and, a little later,
// restarted on its store and ports. Appends are answered 200, or 503
// with Retry-After while the cluster elects a new leader, and the retries
// (same ids) are stored once: every acknowledged event is in the log
// exactly once, at the sequence it was given, also on the two survivors
// alone (an ack on R3 means a majority stored it).
func TestClusterStreamLeaderKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := testenv.NATSCluster(t, 3)
	a, b := clusterLedgers(t, c)
	setupPools(t, a)
	admin := testenv.JetStream(t, c.URL())

	p := &producers{t: t, ledgers: []*ledger{a, b}, allow503: true}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, pool := range clusterPools {
		wg.Go(func() { p.run(pool, stop) })
	}
	time.Sleep(time.Second)
	leader, err := c.WaitStreamLeader(ctx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	c.Server(leader).Shutdown()
	killed := time.Now()
	p.mu.Lock()
	beforeKill := len(p.acks)
	p.mu.Unlock()
	newLeader, err := c.WaitStreamLeader(ctx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	elected := time.Since(killed)
	time.Sleep(time.Second)
	// The survivors alone hold everything acknowledged so far.
	p.mu.Lock()
	sofar := append([]acked(nil), p.acks...)
	p.mu.Unlock()
	checkExactlyOnce(t, sofar, logged(t, admin))

	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitStreamCurrent(ctx, leader, stream.Name); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	log := logged(t, admin)
	checkExactlyOnce(t, p.acks, log)
	dups := 0
	for _, a := range p.acks {
		if a.dup {
			dups++
		}
	}
	gap := time.Duration(0)
	if f := p.firstFail.Load(); f != 0 {
		gap = time.Duration(p.lastFail.Load() - f)
	}
	t.Logf("%d events acknowledged (%d before the kill), %d stored; leader %d -> %d elected %v after the kill; "+
		"%d 503s retried over %v; %d retries answered as duplicates",
		len(p.acks), beforeKill, len(log), leader, newLeader, elected.Round(time.Millisecond), p.retries.Load(), gap.Round(time.Millisecond), dups)
	if len(p.acks) <= beforeKill {
		t.Errorf("no append acknowledged after the leader was killed")
	}
}

// TestClusterTwoInstances: two API instances append to the same pools at
// once on the cluster: every request is answered 200 (a sequence conflict
// refreshes the instance's state of the pool and tries again, never a
// 5xx), and every acknowledged event is in the log exactly once.
func TestClusterTwoInstances(t *testing.T) {
	c := testenv.NATSCluster(t, 3)
	a, b := clusterLedgers(t, c)
	setupPools(t, a)
	p := &producers{t: t, ledgers: []*ledger{a, b}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, pool := range clusterPools {
		for range 2 { // two producers a pool, each alternating instances
			wg.Go(func() { p.run(pool, stop) })
		}
	}
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d events acknowledged", len(p.acks))
	if len(p.acks) < 50 {
		t.Errorf("only %d events acknowledged in 3s", len(p.acks))
	}
	checkExactlyOnce(t, p.acks, logged(t, testenv.JetStream(t, c.URL())))
}

// TestClusterQuorum: with one server of three down appends keep working;
// with two down there is no majority to store an event, and an append is
// answered 503 with Retry-After and a JSON reason, whether the survivor
// was a follower (no leader: JetStream answers at once) or the leader
// (it cannot commit: the publish times out). Once the servers are back,
// nothing of the refused events is in the log, and the producer's retry
// (same ids) stores them once.
func TestClusterQuorum(t *testing.T) {
	for _, tc := range []struct {
		name       string
		leaderDown bool
	}{{"survivor is a follower", true}, {"survivor is the leader", false}} {
		t.Run(tc.name, func(t *testing.T) { testQuorum(t, tc.leaderDown) })
	}
}

func testQuorum(t *testing.T, leaderDown bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := testenv.NATSCluster(t, 3)
	l := newLedger(t, c.URL())
	setup(l, "q")
	admin := testenv.JetStream(t, c.URL())

	leader, err := c.WaitStreamLeader(ctx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	down := []int{(leader + 1) % 3, (leader + 2) % 3}
	if leaderDown {
		down[1] = leader
	}
	c.Server(down[0]).Shutdown()
	// The instance's connection may have been to the server that went
	// down: a request caught in its reconnection is answered 503, and the
	// producer's retry goes through.
	retried := 0
	for i := range 5 {
		retried += postRetrying(t, l, "q", withID(demand(map[string]int{"/a": i}), fmt.Sprintf("one-down-%d", i)))
	}
	retried += postRetrying(t, l, "q", []any{withID(release("/a", 1), "one-down-batch-1"), withID(demand(map[string]int{"/b": 2}), "one-down-batch-2")})
	t.Logf("1 of 3 down: 6 appends, %d retried after a 503", retried)

	c.Server(down[1]).Shutdown()
	single := withID(demand(map[string]int{"/a": 9}), "two-down-0")
	batch := []any{
		withID(demand(map[string]int{"/a": 3}), "two-down-1"),
		withID(demand(map[string]int{"/b": 1}), "two-down-2"),
		withID(demand(map[string]int{"/p/x": 2}), "two-down-3"),
	}
	for _, body := range []any{single, batch} {
		start := time.Now()
		a, err := postTo(l, "q", body)
		if err != nil {
			t.Fatal(err)
		}
		if a.code != http.StatusServiceUnavailable || a.retryAfter == "" || a.bad.Reason != api.ReasonUnavailable || a.bad.Error == "" {
			t.Errorf("append with 2 of 3 servers down: %d Retry-After %q %+v; want 503, Retry-After and reason unavailable", a.code, a.retryAfter, a.bad)
		}
		t.Logf("2 of 3 down: %d %q in %v", a.code, a.bad.Error, time.Since(start).Round(time.Millisecond))
	}

	for _, i := range down {
		if err := c.Restart(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.WaitStreamLeader(ctx, stream.Name); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := c.WaitStreamCurrent(ctx, i, stream.Name); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing half-written: the batch is whole or absent. With no leader
	// nothing was stored; a leader that timed out may still commit what
	// it proposed once a majority is back (the retry below answers it).
	log := logged(t, admin)
	for i := range 4 {
		id := fmt.Sprintf("two-down-%d", i)
		if len(log[id]) > 1 || (leaderDown && len(log[id]) != 0) {
			t.Errorf("%s, answered 503, is in the log at %v", id, log[id])
		}
		if i > 1 && len(log[id]) != len(log["two-down-1"]) {
			t.Errorf("the batch is half-written: %s at %v, two-down-1 at %v", id, log[id], log["two-down-1"])
		}
		if len(log[id]) == 1 {
			t.Logf("%s, answered 503, was stored once the servers came back", id)
		}
	}
	for _, body := range []any{single, batch} {
		var res client.AppendResponse
		waitFor(t, "an append once the servers are back", func() bool {
			a, err := postTo(l, "q", body)
			res = a.res
			return err == nil && a.code == http.StatusOK
		})
		log = logged(t, admin)
		for _, e := range res.Events {
			if seqs := log[e.ID]; len(seqs) != 1 || seqs[0] != e.Seq {
				t.Errorf("retried %s: answered %+v, stored at %v", e.ID, e, seqs)
			}
		}
	}
	checkExactlyOnce(t, nil, log)
}

// TestClusterRetryAfterLeaderChange: an event stored through one instance
// and retried through another, whose view of the pool predates it, after
// the stream's leader changed: the retry is answered with the stored
// sequence (duplicate) and the log holds the event once. The same for an
// atomic batch.
func TestClusterRetryAfterLeaderChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := testenv.NATSCluster(t, 3)
	a, b := clusterLedgers(t, c)
	setup(a, "r")
	b.mustPost("r", withID(demand(map[string]int{"/a": 1}), "seen-by-b"))

	single := withID(demand(map[string]int{"/a": 2}), "retried")
	batch := []any{withID(demand(map[string]int{"/b": 1}), "retried-batch-1"), withID(release("/a", 1), "retried-batch-2")}
	first := a.mustPost("r", single)
	firstBatch := a.mustPost("r", batch)

	leader, err := c.WaitStreamLeader(ctx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Server(leader).NATS().JetStreamStepdownStream("$G", stream.Name); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new stream leader", func() bool { l := c.StreamLeader(stream.Name); return l >= 0 && l != leader })

	for _, tc := range []struct {
		body  any
		first client.AppendResponse
	}{{single, first}, {batch, firstBatch}} {
		var again client.AppendResponse
		waitFor(t, "the retry to be answered", func() bool {
			ans, err := postTo(b, "r", tc.body)
			again = ans.res
			return err == nil && ans.code == http.StatusOK
		})
		for i, e := range again.Events {
			if !e.Duplicate || e.Seq != tc.first.Events[i].Seq {
				t.Errorf("retry of %s: %+v, want a duplicate of seq %d", e.ID, e, tc.first.Events[i].Seq)
			}
		}
	}
	checkExactlyOnce(t, nil, logged(t, testenv.JetStream(t, c.URL())))
}

// postRetrying posts body until it is answered 200, retrying 503s (same
// ids) for up to 10s, and returns how many times it retried.
func postRetrying(t *testing.T, l *ledger, pool string, body any) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for retries := 0; ; retries++ {
		a, err := postTo(l, pool, body)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case a.code == http.StatusOK:
			return retries
		case a.code != http.StatusServiceUnavailable || time.Now().After(deadline):
			t.Fatalf("POST %s: %d %+v", pool, a.code, a.bad)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
