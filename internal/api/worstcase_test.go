package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/natsauth"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/projections"
)

// worstPlan is a plan at every limit of events/limits.go at once:
// MaxPlanConsumers consumers counting implied parents, every path
// MaxPathLen bytes long and MaxPathDepth deep, every field set.
func worstPlan(t *testing.T) (plan []byte, leaves []string) {
	t.Helper()
	seg := func(prefix string, i int) string { // 15 bytes
		s := fmt.Sprintf("%s%d", prefix, i)
		return s + strings.Repeat("x", 15-len(s))
	}
	chain := ""
	var parents []string
	for d := range events.MaxPathDepth - 1 {
		chain += "/" + seg("p", d)
		parents = append(parents, chain)
	}
	nLeaves := events.MaxPlanConsumers - len(parents)
	type consumer = map[string]any
	var cs []consumer
	full := func(path string, share int) consumer {
		return consumer{"path": path, "share": share, "priority": int64(1) << 40, "max": "100%",
			"borrow_limit": int64(1) << 40, "reclaim_grace": "24h0m0s", "lend_grace": "24h0m0s"}
	}
	for _, p := range parents {
		cs = append(cs, full(p, 1))
	}
	for i := range nLeaves {
		path := chain + "/" + seg("l", i)
		if len(path) != events.MaxPathLen || strings.Count(path, "/") != events.MaxPathDepth {
			t.Fatalf("leaf path %q: %d bytes, depth %d", path, len(path), strings.Count(path, "/"))
		}
		cs = append(cs, full(path, 2000))
		leaves = append(leaves, path)
	}
	b, err := json.Marshal(map[string]any{"type": "plan", "data": map[string]any{
		"plan": map[string]any{"policy": map[string]any{"reclaim": "share_ratio", "enforcement": "leaf"}, "consumers": cs}}})
	if err != nil {
		t.Fatal(err)
	}
	return b, leaves
}

// A plan at every limit at once is accepted, appended, folded and
// projected on the real stack (NATS, PostgreSQL, projector) in bounded
// time, while another pool's events, appended right behind it, keep being
// projected. The figures are logged (about 0.1 s to append, 0.3 s to
// project here); the bounds are generous because `go test ./...` runs
// packages side by side on two cores, and what they catch is work out of
// proportion to the input (before the limits such a plan took 11 s and
// 12 GB). Speed itself is measured by `make bench`.
// worstBound bounds each step of TestWorstCasePlan.
const worstBound = 5 * time.Second

func TestWorstCasePlan(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	natsURL, roles := testenv.NATS(t), testdb.New(t)
	pdb := testdb.Pool(t, roles.Projector)
	// The API and the projector with their own identities, NATS and
	// PostgreSQL.
	js, _ := jetstream.New(testenv.Connect(t, natsURL, natsauth.Ledger))
	pjs, _ := jetstream.New(testenv.Connect(t, natsURL, natsauth.Projector))
	db, err := pgxpool.New(ctx, roles.API)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	token, tokens := testenv.AdminToken(t)
	srv, err := api.New(ctx, js, db, api.WithTokens(tokens))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		if err := projections.New(pjs, pdb, projections.WithLogger(quiet)).Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("projector: %v", err)
		}
	})

	post := func(pool string, body []byte) (time.Duration, client.AppendResponse) {
		t.Helper()
		start := time.Now()
		resp, raw := send(t, http.MethodPost, hs.URL+"/v1/pools/"+pool+"/events", string(body), token, nil)
		took := time.Since(start)
		if resp.StatusCode != 200 {
			t.Fatalf("POST %d bytes: %d %.300s", len(body), resp.StatusCode, raw)
		}
		var res client.AppendResponse
		mustUnmarshal(t, raw, &res)
		return took, res
	}
	// The pool has hosts first, so the plan has slots to share.
	var hosts []string
	for i := range 64 {
		hosts = append(hosts, fmt.Sprintf(`{"type":"host_up","data":{"host":"%s%d","slots":1000}}`, strings.Repeat("h", events.MaxHostNameLen-3), i))
	}
	post("worst", []byte("["+strings.Join(hosts, ",")+"]"))
	post("other", []byte(`[{"type":"plan","data":{"plan":{"consumers":[{"path":"/a"},{"path":"/b"}]}}},{"type":"host_up","data":{"host":"o1","slots":8}}]`))
	plan, leaves := worstPlan(t)
	start := time.Now()
	took, res := post("worst", plan)
	// Another pool's events right behind the worst plan.
	otherAt := time.Now()
	_, other := post("other", []byte(`{"type":"demand","data":{"demands":{"/a":3,"/b":5}}}`))
	t.Logf("plan at every limit: %d bytes, appended in %v", len(plan), took)
	if took > worstBound {
		t.Errorf("appending the plan took %v, want under %v", took, worstBound)
	}
	waitProjected := func(seq uint64) time.Duration {
		for {
			var last uint64
			_ = db.QueryRow(ctx, `SELECT last_seq FROM checkpoints WHERE pool = 'worst'`).Scan(&last)
			if last >= seq {
				return time.Since(start)
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("projector at %d after 30s, want %d", last, seq)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	projected := waitProjected(res.Events[0].Seq) - took
	t.Logf("plan projected %v after its append", projected)
	if projected > worstBound {
		t.Errorf("projecting the plan took %v, want under %v", projected, worstBound)
	}
	for {
		// One statement, so one snapshot: read apart, a commit between the
		// two reads shows the new checkpoint beside the old allocation.
		var held int64
		var last uint64
		_ = db.QueryRow(ctx, `SELECT
			(SELECT coalesce(sum(allocated), 0) FROM consumer_state WHERE pool = 'other' AND leaf),
			coalesce((SELECT last_seq FROM checkpoints WHERE pool = 'other'), 0)`).Scan(&held, &last)
		if last >= other.Events[0].Seq {
			if held != 8 {
				t.Errorf("the other pool holds %d slots after its demand, want 8", held)
			}
			break
		}
		if wait := time.Since(otherAt); wait > worstBound {
			t.Fatalf("the other pool's demand, appended behind the worst plan, is not projected after %v", wait)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("the other pool's demand projected %v after its append", time.Since(otherAt))
	// Then demand on every leaf, in one event: 64,000 slots granted over
	// 2,033 leaves and 64 hosts.
	demands := map[string]int{}
	for _, l := range leaves {
		demands[l] = 40
	}
	body, _ := json.Marshal(map[string]any{"type": "demand", "data": map[string]any{"demands": demands}})
	start = time.Now()
	took, res = post("worst", body)
	projected = waitProjected(res.Events[0].Seq) - took
	t.Logf("demand on every leaf: %d bytes, appended in %v, projected %v later", len(body), took, projected)
	if took > worstBound || projected > worstBound {
		t.Errorf("demand on every leaf: appended in %v, projected %v later; want each under %v", took, projected, worstBound)
	}
	var rows int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM consumer_state WHERE pool = 'worst'`).Scan(&rows); err != nil || rows != events.MaxPlanConsumers {
		t.Errorf("consumer_state holds %d rows (%v), want %d", rows, err, events.MaxPlanConsumers)
	}
}
