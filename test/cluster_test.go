package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/natsserver"
	"github.com/cluster-ledger/ledger/internal/pgdump"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
)

// The acceptance test of the distributed shape: a 3-server JetStream
// cluster with the LEDGER stream at 3 replicas, two API instances, two
// projector instances sharing 4 partitions, and producers appending to
// several pools with retries, while the stream leader's server is killed
// and restarted and one projector is killed and restarted.

const (
	clusterPools     = 6
	eventsPerPool    = 350
	clusterPartition = 4
)

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// unackedCounter adds up the "unacknowledged" attributes the projector
// instances log when they leave a partition holding messages they did
// not acknowledge (killed, released to another instance, fenced): NATS
// delivers those again to the next holder.
type unackedCounter struct{ n atomic.Int64 }

func (c *unackedCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *unackedCounter) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *unackedCounter) WithGroup(string) slog.Handler            { return c }
func (c *unackedCounter) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "unacknowledged" {
			c.n.Add(a.Value.Int64())
		}
		return true
	})
	return nil
}

// clusterProjector is one projector instance, on its own connection.
type clusterProjector struct {
	cancel context.CancelFunc
	done   chan error
}

func startClusterProjector(t *testing.T, c *natsserver.Cluster, db *pgxpool.Pool, name string, left *unackedCounter) *clusterProjector {
	t.Helper()
	nc := testenv.Connect(t, c.URL(), natsauth.Projector)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	g, err := projections.NewGroup(js, db, clusterPartition, projections.WithInstance(name),
		projections.WithPinnedTTL(2*time.Second), projections.WithLogger(slog.New(left)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &clusterProjector{cancel: func() { cancel(); nc.Close() }, done: make(chan error, 1)}
	go func() { p.done <- g.Run(ctx) }()
	return p
}

// kill stops the instance the hard way: its connection closes under it.
func (p *clusterProjector) kill() error {
	p.cancel()
	return <-p.done
}

// clusterProducer appends to pools through the API instances, retrying a
// failed request with the same body (the same ids) until it is answered.
type clusterProducer struct {
	urls    []string
	token   string
	http    *http.Client
	acked   sync.Map // event id -> sequence
	n       atomic.Int64
	retries atomic.Int64
}

func (p *clusterProducer) post(ctx context.Context, pool string, i int, body []byte) error {
	deadline := time.Now().Add(90 * time.Second)
	for attempt := 0; ; attempt++ {
		url := p.urls[(i+attempt)%len(p.urls)] + "/v1/pools/" + pool + "/events"
		rq, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		rq.Header.Set("Content-Type", "application/json")
		rq.Header.Set("Authorization", "Bearer "+p.token)
		resp, err := p.http.Do(rq)
		var raw []byte
		if err == nil {
			raw, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK:
				var res client.AppendResponse
				if err := json.Unmarshal(raw, &res); err != nil {
					return err
				}
				for _, e := range res.Events {
					p.acked.Store(e.ID, e.Seq)
				}
				p.n.Add(int64(len(res.Events)))
				return nil
			case resp.StatusCode < 500:
				return fmt.Errorf("POST %s: %d %s", pool, resp.StatusCode, raw)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("POST %s: still failing after 90s: %v %s", pool, err, raw)
		}
		p.retries.Add(1)
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *clusterProducer) run(ctx context.Context, pool string) error {
	setup := fmt.Sprintf(`[{"id":"%[1]s-plan","type":"plan","data":{"plan":{"consumers":[{"path":"/a","share":1},{"path":"/b","share":2},{"path":"/c","share":3}]}}},
		{"id":"%[1]s-h1","type":"host_up","data":{"host":"h1","slots":40}},{"id":"%[1]s-h2","type":"host_up","data":{"host":"h2","slots":20}}]`, pool)
	if err := p.post(ctx, pool, 0, []byte(setup)); err != nil {
		return err
	}
	for i := range eventsPerPool {
		body := fmt.Sprintf(`{"id":"%s-%d","type":"demand","data":{"demands":{"/a":%d,"/b":%d,"/c":%d}}}`, pool, i, i%50, (i*7)%40, (i*13)%30)
		if err := p.post(ctx, pool, i, []byte(body)); err != nil {
			return err
		}
	}
	return nil
}

func TestClusterSurvivesLeaderAndProjectorLoss(t *testing.T) {
	ctx := context.Background()
	c := testenv.NATSCluster(t, 3)
	db := newDB(t)
	token, tokens := testenv.AdminToken(t)
	var urls []string
	for range 2 { // two `ledger serve`
		js, err := jetstream.New(testenv.Connect(t, c.URL(), natsauth.Ledger))
		if err != nil {
			t.Fatal(err)
		}
		srv, err := api.New(ctx, js, db, api.WithTokens(tokens), api.WithLogger(quietLogger), api.WithPublishTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		urls = append(urls, hs.URL)
	}
	var left unackedCounter
	projectors := []*clusterProjector{startClusterProjector(t, c, db, "a", &left), startClusterProjector(t, c, db, "b", &left)}

	prod := &clusterProducer{urls: urls, token: token, http: &http.Client{Timeout: 10 * time.Second}}
	var wg sync.WaitGroup
	errs := make(chan error, clusterPools)
	for i := range clusterPools {
		wg.Go(func() {
			if err := prod.run(ctx, fmt.Sprintf("pool%d", i)); err != nil {
				errs <- err
			}
		})
	}
	total := int64(clusterPools * (eventsPerPool + 3))
	waitAcked := func(n int64) {
		for prod.n.Load() < n && len(errs) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}

	// The stream leader's server dies and comes back.
	waitAcked(total / 4)
	leader := c.StreamLeader(stream.Name)
	if leader < 0 {
		t.Fatal("no stream leader")
	}
	killedAt := prod.n.Load()
	inFlight := partitionsInFlight(t, c) // what the consumers may deliver again because of the kill
	c.Server(leader).Shutdown()
	t.Logf("killed server %d (stream leader) after %d acked events", leader, killedAt)
	// Two servers of three keep the stream: appends go on (after a new
	// leader is elected) before the lost one comes back.
	down := time.Now()
	for prod.n.Load() < killedAt+100 && len(errs) == 0 {
		if time.Since(down) > 30*time.Second {
			t.Fatalf("%d events acked in 30s with one server of three down, want 100", prod.n.Load()-killedAt)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("100 events acked %v after the leader's server died", time.Since(down).Round(time.Millisecond))
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted server %d; %d events acked meanwhile, %d retries so far", leader, prod.n.Load()-killedAt, prod.retries.Load())

	// A projector dies while events flow and comes back.
	waitAcked(total * 2 / 3)
	if err := projectors[0].kill(); err != nil {
		t.Errorf("projector a: %v", err)
	}
	// What it held comes again to b: counted as the consumers see it,
	// messages on their way to it and acks it could not send included.
	killedInFlight := partitionsInFlight(t, c)
	time.Sleep(3 * time.Second)
	projectors[0] = startClusterProjector(t, c, db, "a", &left)

	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d events acked, %d retries", prod.n.Load(), prod.retries.Load())

	checkLogOnce(t, c, prod)
	js, err := jetstream.New(testenv.Connect(t, c.URL(), natsauth.Auditor))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	last := s.CachedInfo().State.LastSeq
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if at, err := query.ProjectorOffset(ctx, db, ""); err == nil && at >= last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the projection did not reach sequence %d within 60s", last)
		}
	}
	for _, p := range projectors {
		if err := p.kill(); err != nil {
			t.Errorf("projector: %v", err)
		}
	}
	t.Logf("in flight: %d at the server kill, %d at the projector kill, %d reported by instances leaving partitions", inFlight, killedInFlight, left.n.Load())
	checkPartitionsReadTheirOwn(t, c, last, inFlight+killedInFlight+uint64(left.n.Load()))
	checkRebuildAndVerify(t, c, db)
}

// checkPartitionsReadTheirOwn: each partition consumer filters exactly to
// its partition's subjects (what keeps it from reading another's events),
// and together they delivered each event of the log once, not once per
// partition (issue 25: partitions in the subject), plus at most once more
// what was in flight (delivered, not acknowledged) where a holder let go.
// What an instance held when it left a partition (killed, released to the
// other, fenced) comes again to the next holder: each instance reports
// how many as it leaves, and for the killed one the consumers' count just
// after the kill adds messages on their way to it and acks it could not
// send. A consumer whose leader's server died may deliver again what was
// not acknowledged then (the consumers' count just before the kill).
// inFlight is their sum. A live holder is never delivered again what it
// holds, however long it takes (projections/inflight.go): before that, a
// holder blocked 5 s in a request while the stream elected a leader, NATS
// delivered its whole window again every ack wait, and the consumers made
// up to 4,065 deliveries for the 2,118 events. Read as the ledger's
// identity reads them for GET /v1/status.
func checkPartitionsReadTheirOwn(t *testing.T, c *natsserver.Cluster, last, inFlight uint64) {
	t.Helper()
	js, err := jetstream.New(testenv.Connect(t, c.URL(), natsauth.Ledger))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := js.Stream(ctx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	n := stream.Partitions(s.CachedInfo().Config)
	if n == 0 || n%clusterPartition != 0 {
		t.Fatalf("the stream has %d partitions, want a multiple of %d", n, clusterPartition)
	}
	var delivered uint64
	for k := range clusterPartition {
		cons, err := js.Consumer(ctx, stream.Name, projections.PartitionName(projections.DefaultName, k, clusterPartition))
		if err != nil {
			t.Fatal(err)
		}
		cfg := cons.CachedInfo().Config
		var want []string
		for j := k; j < n; j += clusterPartition {
			want = append(want, stream.PartitionFilter(j))
		}
		if cfg.FilterSubject != "" || !slices.Equal(cfg.FilterSubjects, want) {
			t.Errorf("partition %d reads %q %v, want %v", k, cfg.FilterSubject, cfg.FilterSubjects, want)
		}
		delivered += cons.CachedInfo().Delivered.Consumer
	}
	t.Logf("the %d partition consumers made %d deliveries for %d events, %d in flight at the kills", clusterPartition, delivered, last, inFlight)
	if delivered > last+inFlight {
		t.Errorf("%d deliveries for %d events and %d in flight at the kills: delivered again what was acknowledged or still held, or read each other's events",
			delivered, last, inFlight)
	}
}

// partitionsInFlight is how many messages the partition consumers have
// delivered and not had acknowledged, read as the ledger's identity.
func partitionsInFlight(t *testing.T, c *natsserver.Cluster) uint64 {
	t.Helper()
	js, err := jetstream.New(testenv.Connect(t, c.URL(), natsauth.Ledger))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for k := range clusterPartition {
		cons, err := js.Consumer(context.Background(), stream.Name, projections.PartitionName(projections.DefaultName, k, clusterPartition))
		if err != nil {
			t.Fatal(err)
		}
		n += uint64(cons.CachedInfo().NumAckPending)
	}
	return n
}

// checkLogOnce: every event a producer was answered 200 for is in the log
// exactly once, at the sequence it was answered with, and no event is in
// the log twice.
func checkLogOnce(t *testing.T, c *natsserver.Cluster, prod *clusterProducer) {
	t.Helper()
	js, err := jetstream.New(testenv.Connect(t, c.URL(), natsauth.Auditor))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]uint64{}
	err = audit.ReadLog(context.Background(), js, 1, "ledger.>", func(m audit.Message) error {
		id := m.Stored.Envelope.ID
		if prev, ok := seen[id]; ok {
			return fmt.Errorf("event %s is in the log twice: sequences %d and %d", id, prev, m.Stored.Seq)
		}
		seen[id] = m.Stored.Seq
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	prod.acked.Range(func(k, v any) bool {
		n++
		if seq, ok := seen[k.(string)]; !ok || seq != v.(uint64) {
			t.Errorf("event %s answered with sequence %d is in the log at %d (found %v)", k, v, seq, ok)
		}
		return true
	})
	if n != len(seen) {
		t.Errorf("%d events acked, %d in the log", n, len(seen))
	}
}

// checkRebuildAndVerify: a fresh single-process rebuild (`ledger replay
// --into`) of the log equals the tables, and `ledger audit verify` passes
// for every pool.
func checkRebuildAndVerify(t *testing.T, c *natsserver.Cluster, db *pgxpool.Pool) {
	t.Helper()
	bin := ledgerBinary(t)
	env := append(os.Environ(), "NATS_URL="+c.URL(), "LEDGER_NATS_CREDS="+testenv.Creds(t, c.URL(), natsauth.Auditor), "DATABASE_URL="+db.Config().ConnString())
	rebuilt := newDB(t)
	cmd := exec.Command(bin, "replay", "--into", rebuilt.Config().ConnString())
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ledger replay --into: %v\n%s", err, out)
	}
	live, err := pgdump.Tables(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgdump.Tables(context.Background(), rebuilt)
	if err != nil {
		t.Fatal(err)
	}
	if d := pgdump.Diff(live, got); d != "" {
		t.Fatalf("the partitioned projection differs from a rebuild at %s", d)
	}
	for i := range clusterPools {
		cmd := exec.Command(bin, "audit", "verify", "--pool", fmt.Sprintf("pool%d", i))
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "ok") {
			t.Errorf("ledger audit verify --pool pool%d: %v\n%s", i, err, out)
		}
	}
}
