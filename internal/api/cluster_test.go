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
	res        api.EventsResponse
	bad        api.ErrorResponse
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
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string][]uint64{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		sd, err := stream.DecodeRaw(m.Sequence, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		ids[sd.Envelope.ID] = append(ids[sd.Envelope.ID], seq)
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
