package test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/testenv"
)

// scalePools is how many pools TestTenThousandPools creates.
const scalePools = 10_000

// TestTenThousandPools runs `ledger dev` as a site with thousands of pools
// does, with the identities it prints: a provisioning tool creates 10,000
// pools through the API (a plan, a host and some demand each), the service
// is restarted, and then:
//
//   - the restart takes seconds (the projector rebuilds no pool: each one's
//     state was saved at the stop);
//   - an append to any pool, picked at random, is projected within seconds;
//   - the JetStream consumers come back to their steady count (the
//     projector's own), none left behind by reading pools;
//   - the memory of the process (API, projector, embedded NATS) grows by a
//     bounded amount per idle pool, measured from its Go heap;
//   - the pools list pages through all of them.
func TestTenThousandPools(t *testing.T) {
	// JetStream syncs in the background here (a crash could lose the last
	// second): what is measured is thousands of pools, not the disk's
	// synced writes per second, which bound appends at about 50 a second
	// on this machine whatever the number of pools.
	d := newDeployment(t, "--nats-sync", "interval:1s")
	monitoring := d.addToken(t, "monitoring", "metrics") // read at the next start
	d.stop(t)
	d.start(t)
	js, db, _ := d.auditor(t)
	ctx := context.Background()
	// The steady count: the projector's durable consumer, once it is
	// there, and nothing else while idle.
	steady := 0
	for deadline := time.Now().Add(30 * time.Second); steady == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		steady = consumerCount(t, js)
	}
	if steady != 1 {
		t.Fatalf("%d consumers on the stream of an idle ledger dev, want the projector's one", steady)
	}
	base := heapInUse(t, d, monitoring)

	// 10,000 pools, 16 requests at a time, as a provisioning tool would.
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= scalePools {
					return
				}
				// One event a request: an array is appended as JetStream's
				// atomic batch, which a single server stores through a
				// file store of its own per batch (nats-server 2.15):
				// about 40 a second, whatever the ledger does.
				for _, ev := range []string{
					`{"type":"plan","data":{"plan":{"consumers":[{"path":"/batch","priority":1},{"path":"/web","priority":3}]}}}`,
					fmt.Sprintf(`{"type":"host_up","data":{"host":"h1","slots":%d}}`, 8+i%9),
					fmt.Sprintf(`{"type":"demand","data":{"demands":{"/batch":%d,"/web":%d}}}`, i%13, i%5),
				} {
					if _, err := d.appendEvents(scalePool(i), ev); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	created := time.Since(start)
	last := testenv.StreamLast(t, js)
	waitProjectedThrough(t, db, last, 3*time.Minute)
	projected := time.Since(start)
	var pools int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM checkpoints`).Scan(&pools); err != nil || pools < scalePools {
		t.Fatalf("%d pools projected (%v), want %d", pools, err, scalePools)
	}
	full := heapInUse(t, d, monitoring)
	waitConsumers(t, js, steady)

	// The restart.
	stopAt := time.Now()
	d.stop(t)
	stopped := time.Since(stopAt)
	startAt := time.Now()
	d.start(t)
	ready := time.Since(startAt)
	resumed := d.waitLog(t, "projector: resumed", 60*time.Second)
	resumedAfter := time.Since(startAt)
	if !strings.Contains(resumed, "rebuilt_now=0") {
		t.Errorf("the start after a clean stop rebuilt pools: %s", resumed)
	}
	js, db, _ = d.auditor(t)
	idle := heapInUse(t, d, monitoring)

	// An append to any pool is projected within seconds.
	rng := rand.New(rand.NewPCG(10, 20))
	var lags []time.Duration
	for range 30 {
		pool := scalePool(rng.IntN(scalePools))
		at := time.Now()
		seq, err := d.appendEvents(pool, fmt.Sprintf(`{"type":"demand","data":{"demands":{"/batch":%d}}}`, rng.IntN(20)))
		if err != nil {
			t.Fatal(err)
		}
		d.waitProjected(t, pool, seq, 10*time.Second)
		lags = append(lags, time.Since(at))
	}
	slices.Sort(lags)
	if worst := lags[len(lags)-1]; worst > 5*time.Second {
		t.Errorf("an append to a pool after the restart took %s to be projected, want seconds", worst)
	}
	waitConsumers(t, js, steady)

	// Every pool, a page at a time.
	seen, after := 0, ""
	for {
		var page struct {
			Pools []struct {
				Pool string `json:"pool"`
			} `json:"pools"`
			After string `json:"after"`
		}
		if err := d.get(d.reader, "/v1/pools?limit=1000&after="+after, &page); err != nil {
			t.Fatal(err)
		}
		seen += len(page.Pools)
		if page.After == "" {
			break
		}
		after = page.After
	}
	if seen != scalePools+2 && seen != scalePools {
		t.Errorf("the pools list pages through %d pools, want %d", seen, scalePools)
	}

	perPool := func(heap int64) float64 { return float64(heap-base) / scalePools }
	t.Logf("%d pools: created through the API in %s (%.0f events/s), projected in %s; stop %s, start %s (API ready), projector resumed %s after the start; "+
		"first append to a random pool after the restart projected in %s (median), %s (worst); "+
		"Go heap in use: %s before, %s with the pools created (%.0f bytes a pool), %s after the restart (%.0f bytes an idle pool); "+
		"JetStream consumers: %d steady",
		scalePools, created.Round(time.Millisecond), 3*scalePools/created.Seconds(), projected.Round(time.Millisecond),
		stopped.Round(time.Millisecond), ready.Round(time.Millisecond), resumedAfter.Round(time.Millisecond), lags[len(lags)/2].Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond),
		mib(base), mib(full), perPool(full), mib(idle), perPool(idle), steady)
	// Bounded: what an idle pool keeps in this process after a restart
	// (names and committed sequences, NATS's index of its subjects).
	// Measured 2.0-4.4 KB on a loaded 2-core machine, the pool's gauges
	// included (every pool has them since 10,000 are labelled; the
	// collector's timing moves it): the bound is about twice that.
	if per := perPool(idle); per > 8192 {
		t.Errorf("an idle pool costs %.0f bytes of heap after a restart, want at most 8 KiB", per)
	}
	// Once created, a pool's view and state are resident in the API and
	// the projector (at most 1,024 of each), and the heap holds the
	// garbage of creating them until the collector runs: the same build
	// measured 13.0, 14.5 and 16.5 KB a pool in three runs, the session's
	// base 16.0 KB; the bound is above that noise.
	if per := perPool(full); per > 20480 {
		t.Errorf("a pool costs %.0f bytes of heap once created, want at most 20 KiB", per)
	}
}

func scalePool(i int) string { return fmt.Sprintf("site-%05d", i) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// waitConsumers waits until the stream's consumers are back to steady.
func waitConsumers(t *testing.T, js jetstream.JetStream, steady int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := consumerCount(t, js)
		if n <= steady {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d consumers on the stream 30s later, want the steady %d", n, steady)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitProjectedThrough waits until every event up to seq is projected.
func waitProjectedThrough(t *testing.T, db *pgxpool.Pool, seq uint64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var at int64
		err := db.QueryRow(context.Background(), `SELECT coalesce(max(stream_seq), 0) FROM projector_offsets`).Scan(&at)
		var pending int
		if err == nil {
			err = db.QueryRow(context.Background(), `SELECT count(*) FROM pending_events`).Scan(&pending)
		}
		if err == nil && uint64(at) >= seq && pending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not projected through %d within %s (at %d, %d pending, %v)", seq, within, at, pending, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// heapInUse is the Go heap in use of the `ledger dev` process, from its
// /metrics as a monitoring system with a metrics token reads it, after
// the process has been idle a moment.
func heapInUse(t *testing.T, d *deployment, token string) int64 {
	t.Helper()
	time.Sleep(time.Second)
	var best int64 = -1
	for range 4 { // the smallest of a few reads: the least garbage
		rq, _ := http.NewRequest(http.MethodGet, d.url()+"/metrics", nil)
		rq.Header.Set("Authorization", "Bearer "+token)
		resp, err := d.client.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err == nil && (best < 0 || int64(f) < best) {
					best = int64(f)
				}
			}
		}
		resp.Body.Close()
		time.Sleep(250 * time.Millisecond)
	}
	if best < 0 {
		t.Fatalf("no go_memstats_heap_inuse_bytes in %s/metrics", d.url())
	}
	return best
}
