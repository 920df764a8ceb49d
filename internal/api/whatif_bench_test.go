package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/contract"
	"github.com/cluster-ledger/ledger/internal/gen"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/migrations"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
)

// BenchmarkWhatIf times POST /v1/pools/{pool}/what-if on a 1,500-leaf
// pool, about the largest plan the API takes (events.MaxPlanConsumers,
// parents included) (a 3-level tree, 150 hosts of 20 slots, every leaf with demand;
// with ownership: gen.OwnedBench's), projected with a snapshot every
// 5,000 events: the fork at the snapshot (nothing to replay), and 1,000
// demand events after it (the default fork, now). The question: the plan
// with every share changed, then a demand. The answer is the HTTP
// answer, every consumer's figures before and after (about 3 MB).
func BenchmarkWhatIf(b *testing.B) {
	for _, owned := range []bool{false, true} {
		name := "leaves=1500"
		if owned {
			name += "/ownership"
		}
		b.Run(name, func(b *testing.B) {
			w := newWhatIfBench(b, 1500, owned)
			b.Run("fork-at-snapshot", func(b *testing.B) { w.run(b, w.snapshot) })
			b.Run("replay-1000", func(b *testing.B) { w.run(b, 0) })
		})
	}
}

type whatIfBench struct {
	url, token string
	snapshot   uint64 // the sequence of the pool's snapshot
	body       []byte // the events asked about
}

const (
	benchPool      = "big"
	benchSnapshots = 5000
)

func newWhatIfBench(b *testing.B, leaves int, owned bool) *whatIfBench {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	natsURL := testenv.NATS(b)
	admin := testenv.JetStream(b, natsURL)
	dbURL := testenv.Postgres(b)
	if err := migrations.Up(ctx, dbURL); err != nil {
		b.Fatal(err)
	}
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(db.Close)

	plan, hosts, paths := benchTree(leaves, owned)
	rng := rand.New(rand.NewPCG(1, 2))
	evs := []events.Payload{&events.PlanChange{Plan: plan}}
	evs = append(evs, hosts...)
	all := &events.Demand{Demands: map[string]int64{}}
	for _, l := range paths {
		all.Demands[l] = int64(rng.IntN(5))
	}
	evs = append(evs, all)
	for len(evs) < benchSnapshots+1000 {
		evs = append(evs, &events.Demand{Demands: map[string]int64{paths[rng.IntN(len(paths))]: int64(rng.IntN(7))}})
	}
	// Published as the ledger would (the plan is over the API's limit of
	// 2,048 consumers, which only the engine's bounds the log).
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var last uint64
	for i, p := range evs {
		env, err := events.New(fmt.Sprintf("bench-%d", i), benchPool, "bench", at.Add(time.Duration(i)*time.Second), domain.StampRules(p))
		if err != nil {
			b.Fatal(err)
		}
		data, err := json.Marshal(env)
		if err != nil {
			b.Fatal(err)
		}
		ack, err := admin.Publish(ctx, stream.Subject(benchPool, env.Type), data, jetstream.WithMsgID(env.ID))
		if err != nil {
			b.Fatal(err)
		}
		last = ack.Sequence
	}
	projectBench(b, ctx, natsURL, db, last)
	w := &whatIfBench{}
	if err := db.QueryRow(ctx, `SELECT max(seq) FROM snapshots WHERE pool = $1`, benchPool).Scan(&w.snapshot); err != nil || w.snapshot == 0 || w.snapshot == last {
		b.Fatalf("snapshot at %d (%v), last event %d: want one before the last event", w.snapshot, err, last)
	}

	// The question: every share changed (the shares turned around), then
	// more demand.
	changed := plan
	changed.Consumers = append([]events.Consumer(nil), plan.Consumers...)
	for i := range changed.Consumers {
		share := int64(1 + (len(changed.Consumers)-i)%5)
		changed.Consumers[i].Share = &share
	}
	more := &events.Demand{Demands: map[string]int64{}}
	for _, l := range paths[:100] {
		more.Demands[l] = 8
	}
	var q client.WhatIfRequest
	for _, p := range []events.Payload{&events.PlanChange{Plan: changed}, more} {
		ev, err := client.NewWhatIfEvent(p)
		if err != nil {
			b.Fatal(err)
		}
		q.Events = append(q.Events, ev)
	}
	if w.body, err = json.Marshal(q); err != nil {
		b.Fatal(err)
	}

	js, err := jetstream.New(testenv.Connect(b, natsURL, natsauth.Ledger))
	if err != nil {
		b.Fatal(err)
	}
	token, tokens := testenv.Token(b, "reader", []auth.Scope{auth.ScopeRead}, benchPool)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := api.New(ctx, js, db, api.WithTokens(tokens), api.WithLogger(quiet), api.WithWhatIfLimits(time.Minute, 2))
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	b.Cleanup(hs.Close)
	w.url, w.token = hs.URL+"/v1/pools/"+benchPool+"/what-if", token
	// One answer checked against the contract, the timed ones not (the
	// check of a 3 MB answer would be timed too).
	if _, err := w.ask(http.DefaultClient, 0); err != nil {
		b.Fatal(err)
	}
	return w
}

// ask posts the question forked at atSeq (0: now) and returns the size
// of the answer.
func (w *whatIfBench) ask(hc *http.Client, atSeq uint64) (int, error) {
	body := w.body
	if atSeq > 0 {
		var q map[string]any
		_ = json.Unmarshal(w.body, &q)
		q["at_seq"] = atSeq
		body, _ = json.Marshal(q)
	}
	rq, _ := http.NewRequest(http.MethodPost, w.url, bytes.NewReader(body))
	rq.Header.Set("Authorization", "Bearer "+w.token)
	rq.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(rq)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("what-if: %d %s", resp.StatusCode, raw)
	}
	var res client.WhatIf
	if err := json.Unmarshal(raw, &res); err != nil {
		return 0, err
	}
	if len(res.Decisions) == 0 || res.Appended {
		return 0, fmt.Errorf("what-if: %d decisions, appended %v", len(res.Decisions), res.Appended)
	}
	return len(raw), nil
}

func (w *whatIfBench) run(b *testing.B, atSeq uint64) {
	hc := contract.Unchecked()
	lat := make([]time.Duration, 0, b.N)
	var size int
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		n, err := w.ask(hc, atSeq)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		size = n
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(size)/1e6, "answer-MB")
}

// benchTree is a 3-level tree of n leaves and n/10 hosts of 20 slots:
// the engine benchmarks' shape, with ownership gen.OwnedBench's.
func benchTree(n int, owned bool) (events.Plan, []events.Payload, []string) {
	pol := events.Policy{Reclaim: events.ReclaimShareRatio}
	if owned {
		hosts, cs, leaves := gen.OwnedBench(n)
		return events.Plan{Policy: pol, Consumers: cs}, hosts, leaves
	}
	f := 1
	for f*f*f < n {
		f++
	}
	var cs []events.Consumer
	var leaves []string
	for i := 0; i < f && len(leaves) < n; i++ {
		for j := 0; j < f && len(leaves) < n; j++ {
			for k := 0; k < f && len(leaves) < n; k++ {
				share := int64(1 + (i+j+k)%4)
				path := fmt.Sprintf("/t%02d/m%02d/l%02d", i, j, k)
				cs = append(cs, events.Consumer{Path: path, Share: &share, Priority: int64(k % 3)})
				leaves = append(leaves, path)
			}
		}
	}
	var hosts []events.Payload
	for h := 0; h < max(1, n/10); h++ {
		hosts = append(hosts, &events.HostUp{Host: fmt.Sprintf("h%05d", h), Slots: 20})
	}
	return events.Plan{Policy: pol, Consumers: cs}, hosts, leaves
}

// projectBench runs a projector (snapshots every benchSnapshots events) until
// it has committed seq.
func projectBench(b *testing.B, ctx context.Context, natsURL string, db *pgxpool.Pool, seq uint64) {
	b.Helper()
	js, err := jetstream.New(testenv.Connect(b, natsURL, natsauth.Projector))
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() {
		done <- projections.New(js, db, projections.WithLogger(quiet), projections.WithSnapshotEvery(benchSnapshots)).Run(runCtx)
	}()
	defer func() { stop(); <-done }()
	for {
		got, err := query.ProjectorOffset(ctx, db, "")
		if err != nil {
			b.Fatal(err)
		}
		if got >= seq {
			return
		}
		select {
		case err := <-done:
			done <- err
			b.Fatalf("projector stopped: %v", err)
		case <-ctx.Done():
			b.Fatalf("projector at %d of %d", got, seq)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
