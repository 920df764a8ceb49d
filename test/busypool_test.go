package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/internal/testservice"
	"github.com/cluster-ledger/ledger/projections/query"
)

// busyLimitPool sets up a pool at the plan's limits: 2,048 consumers (32
// groups of 63 leaves) on 4,000 hosts of 4 slots.
func busyLimitPool(t *testing.T, ctx context.Context, s *testservice.Service, pool string) []string {
	t.Helper()
	var consumers []events.Consumer
	var leaves []string
	for g := range 32 {
		consumers = append(consumers, events.Consumer{Path: fmt.Sprintf("/g%02d", g)})
		for l := range 63 {
			p := fmt.Sprintf("/g%02d/l%02d", g, l)
			consumers = append(consumers, events.Consumer{Path: p})
			leaves = append(leaves, p)
		}
	}
	planner := s.Client(testservice.Planner)
	if _, err := planner.Append(ctx, pool, mustEvent(t, "", &events.PlanChange{Plan: events.Plan{Consumers: consumers}})); err != nil {
		t.Fatalf("plan of %s: %v", pool, err)
	}
	var hosts []client.Event
	for h := range 4000 {
		hosts = append(hosts, mustEvent(t, "", &events.HostUp{Host: fmt.Sprintf("h%04d", h), Slots: 4}))
		if len(hosts) == 500 {
			if _, err := planner.Append(ctx, pool, hosts...); err != nil {
				t.Fatalf("hosts of %s: %v", pool, err)
			}
			hosts = hosts[:0]
		}
	}
	return leaves
}

// lagProbe appends to the small pools at a steady rate and measures each
// append's time from its POST to its being visible in the projection
// (the pool's checkpoint at or past its sequence), read by one poller.
type lagProbe struct {
	mu      sync.Mutex
	waiting map[string]probeWait // pool -> the append it waits for
	lags    []time.Duration
	posts   []time.Duration // the POSTs' own time
	after   []time.Duration // from the POST's answer to visible
	on      atomic.Bool     // record lags
}

type probeWait struct {
	seq    uint64
	at     time.Time // the POST sent
	stored time.Time // its answer received
}

func (lp *lagProbe) run(ctx context.Context, t *testing.T, s *testservice.Service, pools []string, every time.Duration) *sync.WaitGroup {
	lp.waiting = map[string]probeWait{}
	producer := s.Client(testservice.Producer)
	var wg sync.WaitGroup
	for i, pool := range pools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// staggered over the period
			select {
			case <-ctx.Done():
				return
			case <-time.After(every * time.Duration(i) / time.Duration(len(pools))):
			}
			tick := time.NewTicker(every)
			defer tick.Stop()
			for n := 0; ; n++ {
				lp.mu.Lock()
				_, busy := lp.waiting[pool]
				lp.mu.Unlock()
				if !busy {
					at := time.Now()
					ap, err := producer.Append(ctx, pool, mustEvent(t, "", &events.Demand{Demands: map[string]int64{"/a": int64(n % 5), "/b": int64(n % 3)}}))
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("append to %s: %v", pool, err)
						}
						return
					}
					lp.mu.Lock()
					lp.waiting[pool] = probeWait{seq: ap[0].Seq, at: at, stored: time.Now()}
					if lp.on.Load() {
						lp.posts = append(lp.posts, time.Since(at))
					}
					lp.mu.Unlock()
				}
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // the poller: one query for every pool waiting
		defer wg.Done()
		for ctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
			lp.mu.Lock()
			names := make([]string, 0, len(lp.waiting))
			for p := range lp.waiting {
				names = append(names, p)
			}
			lp.mu.Unlock()
			if len(names) == 0 {
				continue
			}
			seqs, err := query.ProjectedSeqs(ctx, s.DB, names)
			if err != nil {
				continue
			}
			now := time.Now()
			lp.mu.Lock()
			for p, w := range lp.waiting {
				if seqs[p] >= w.seq {
					if lp.on.Load() {
						lp.lags = append(lp.lags, now.Sub(w.at))
						lp.after = append(lp.after, now.Sub(w.stored))
					}
					delete(lp.waiting, p)
				}
			}
			lp.mu.Unlock()
		}
	}()
	return &wg
}

// take returns the lags and the POSTs' times recorded since the last
// take, sorted.
func (lp *lagProbe) take() (lags, posts, after []time.Duration) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	lags, posts, after = lp.lags, lp.posts, lp.after
	lp.lags, lp.posts, lp.after = nil, nil, nil
	slices.Sort(lags)
	slices.Sort(posts)
	slices.Sort(after)
	return lags, posts, after
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(float64(len(ds))*p))].Round(time.Millisecond)
}

// TestBusyPoolAtTheLimitsLeavesOthersAlone: under the identities of the
// deployment (appends with the append token, as a scheduler holds it),
// hundreds of small pools each append a demand every second; their
// events' time from POST to visible in the projection is measured with
// the projector quiet, then while one pool at the plan's limits (2,048
// consumers, 4,000 hosts) takes demand events naming every leaf back to
// back (thousands of decisions each). The busy pool's trouble stays its
// own: the small pools' median stays within a bound of the quiet figure,
// and the busy pool still progresses: every event it took is projected in
// the end and audit verify finds the projection equal to the log.
func TestBusyPoolAtTheLimitsLeavesOthersAlone(t *testing.T) {
	signer := signing.Generate()
	s := testservice.Start(t, testservice.Config{Signer: signer})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const smallPools = 200
	var small []string
	planner := s.Client(testservice.Planner)
	for i := range smallPools {
		pool := fmt.Sprintf("s%03d", i)
		small = append(small, pool)
		_, err := planner.Append(ctx, pool, mustEvent(t, "", &events.PlanChange{Plan: events.Plan{Consumers: []events.Consumer{{Path: "/a"}, {Path: "/b"}}}}),
			mustEvent(t, "", &events.HostUp{Host: "h", Slots: 8}))
		if err != nil {
			t.Fatal(err)
		}
	}
	leaves := busyLimitPool(t, ctx, s, "busy")
	last, err := s.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitProjected(ctx, "busy", last); err != nil {
		t.Fatal(err)
	}

	pctx, stopProbe := context.WithCancel(ctx)
	lp := &lagProbe{}
	probes := lp.run(pctx, t, s, small, time.Second)
	time.Sleep(3 * time.Second) // every pool has appended once
	lp.on.Store(true)
	time.Sleep(10 * time.Second)
	quiet, quietPosts, quietAfter := lp.take()

	// The busy pool: demand events naming every leaf, back to back.
	bctx, stopBusy := context.WithCancel(ctx)
	var busyLast atomic.Uint64
	var busyN atomic.Int64
	busyDone := make(chan struct{})
	go func() {
		defer close(busyDone)
		producer := s.Client(testservice.Producer)
		r := rand.New(rand.NewPCG(1, 2))
		for bctx.Err() == nil {
			d := map[string]int64{}
			for _, l := range leaves {
				d[l] = int64(r.IntN(14))
			}
			ap, err := producer.Append(bctx, "busy", mustEvent(t, "", &events.Demand{Demands: d}))
			if err != nil {
				if bctx.Err() == nil {
					t.Errorf("busy append: %v", err)
				}
				return
			}
			busyLast.Store(ap[0].Seq)
			busyN.Add(1)
		}
	}()
	busyFrom, _ := query.ProjectedSeq(ctx, s.DB, "busy")
	began := time.Now()
	time.Sleep(3 * time.Second)
	_, _, _ = lp.take()
	time.Sleep(20 * time.Second)
	loaded, loadedPosts, loadedAfter := lp.take()
	stopBusy()
	<-busyDone
	appended := busyN.Load()
	projectedBusy, err := query.ProjectedSeq(ctx, s.DB, "busy")
	if err != nil {
		t.Fatal(err)
	}
	var busyProjected int
	if err := s.DB.QueryRow(ctx, `SELECT count(*) FROM events WHERE pool = 'busy' AND seq > $1 AND seq <= $2`, busyFrom, projectedBusy).Scan(&busyProjected); err != nil {
		t.Fatal(err)
	}
	busyTook := time.Since(began)
	stopProbe()
	probes.Wait()

	var decisions, evs int
	if err := s.DB.QueryRow(ctx, `SELECT count(*), count(DISTINCT event_seq) FROM decisions WHERE pool = 'busy' AND event_seq > $1`, busyFrom).Scan(&decisions, &evs); err != nil {
		t.Fatal(err)
	}
	t.Logf("quiet: %d small-pool events, POST to visible p50 %s, p99 %s (the POST alone p50 %s, p99 %s; its answer to visible p50 %s, p99 %s)",
		len(quiet), pct(quiet, 0.5), pct(quiet, 0.99), pct(quietPosts, 0.5), pct(quietPosts, 0.99), pct(quietAfter, 0.5), pct(quietAfter, 0.99))
	t.Logf("with the busy pool: %d small-pool events, p50 %s, p99 %s (the POST alone p50 %s, p99 %s; its answer to visible p50 %s, p99 %s)",
		len(loaded), pct(loaded, 0.5), pct(loaded, 0.99), pct(loadedPosts, 0.5), pct(loadedPosts, 0.99), pct(loadedAfter, 0.5), pct(loadedAfter, 0.99))
	t.Logf("busy pool: %d events appended in %s, %d projected meanwhile (%.1f/s), %d decisions in %d events (%d each)",
		appended, busyTook.Round(time.Second), busyProjected, float64(busyProjected)/busyTook.Seconds(), decisions, evs, decisions/max(evs, 1))

	// The busy pool progresses: every event it took is projected.
	if err := s.WaitProjected(ctx, "busy", busyLast.Load()); err != nil {
		t.Fatal(err)
	}
	// The small pools' last appends (cut short by the probe's end) may
	// still be set aside for a batch or two.
	for {
		var left int
		if err := s.DB.QueryRow(ctx, `SELECT count(*) FROM pending_events`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d events still set aside once caught up", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := audit.Verify(ctx, testenv.As(t, s.JS, natsauth.Auditor), s.DB, signing.NewKeyring(signer.Public()), 1, "", nil); err != nil {
		t.Fatalf("audit verify: %v", err)
	}
	if len(quiet) < smallPools || len(loaded) < smallPools {
		t.Fatalf("measured %d quiet and %d loaded events: too few", len(quiet), len(loaded))
	}
	// The bounds: ten times the quiet figure of the same run, and no less
	// than a floor, because on the shared 2-core machine the quiet figure
	// itself moves from 10 to 60 ms (POST to visible) between runs, and
	// the busy pool's appends take the API a core of their own (the POST
	// alone goes from 3-7 ms to 130-200 ms p50, before this fix as after:
	// the API folds each of them to check it). The floors are four
	// batches' work (1 s) for POST to visible and two (500 ms) from the
	// POST's answer, the projector's part. Measured here: 380-550 ms and
	// 170-270 ms with the busy pool charged its writes (decision 504);
	// 2.5-5.3 s and 2.3-4.6 s before, when every batch carried one of its
	// events' 12,000 rows.
	if bound := max(10*pct(quiet, 0.5), time.Second); pct(loaded, 0.5) > bound {
		t.Errorf("with the busy pool the small pools' events are visible %s (p50) after their POST, want at most %s (quiet: %s)", pct(loaded, 0.5), bound, pct(quiet, 0.5))
	}
	if bound := max(10*pct(quietAfter, 0.5), 500*time.Millisecond); pct(loadedAfter, 0.5) > bound {
		t.Errorf("with the busy pool the small pools' events are visible %s (p50) after the POST's answer, want at most %s (quiet: %s)", pct(loadedAfter, 0.5), bound, pct(quietAfter, 0.5))
	}
	if busyProjected < 2 {
		t.Errorf("the busy pool projected %d events in %s while the small pools went on: it does not progress", busyProjected, busyTook.Round(time.Second))
	}
}
