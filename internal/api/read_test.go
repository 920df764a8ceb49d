package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/natsauth"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// readServer is an API (connected as its role) over a migrated database
// holding rows as the projector would write them (db: the projector's
// role).
func readServer(t *testing.T, opts ...api.Option) (string, *pgxpool.Pool) {
	t.Helper()
	base, roles, _ := readServerAs(t, opts...)
	return base, testdb.Pool(t, roles.Projector)
}

// readServerAs is readServer with the database's roles and the API's own
// pool.
func readServerAs(t *testing.T, opts ...api.Option) (string, testdb.DB, *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	roles := testdb.New(t)
	apiDB := testdb.Pool(t, roles.API)
	js, _ := jetstream.New(testenv.Connect(t, testenv.NATS(t), natsauth.Ledger))
	token, tokens := testenv.Token(t, "reader", []auth.Scope{auth.ScopeRead}, auth.AllPools)
	srv, err := api.New(ctx, js, apiDB, append([]api.Option{api.WithTokens(tokens)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(withToken(srv, token))
	t.Cleanup(hs.Close)
	return hs.URL, roles, apiDB
}

// withToken adds the bearer token to every request that has none, so the
// read tests can use plain URLs.
func withToken(h http.Handler, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" && r.Header.Get("X-No-Token") == "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		h.ServeHTTP(w, r)
	})
}

func exec(t *testing.T, db *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func getJSON(t *testing.T, u string, v any) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}

func TestAllocations(t *testing.T) {
	base, db := readServer(t)
	exec(t, db, `INSERT INTO checkpoints (pool, last_seq, state_hash, chain_hash) VALUES ('p', 7, '\x00', '\x00')`)
	exec(t, db, `INSERT INTO consumer_state VALUES
		('p', '/a', true, 4, 4, 5, 5, 4, 0, NULL, 7),
		('p', '/b', false, 9, 9, 5, 5, 6, 1, 3, 6),
		('q', '/a', true, 1, 1, 1, 1, 1, 0, NULL, 2)`)
	exec(t, db, `INSERT INTO allocations VALUES ('p', '/a', 'h2', 1), ('p', '/a', 'h1', 3), ('q', '/a', 'h1', 1)`)

	var res client.Allocations
	if code := getJSON(t, base+"/v1/pools/p/allocations", &res); code != 200 {
		t.Fatalf("status %d", code)
	}
	three := int64(3)
	want := client.Allocations{Pool: "p", Seq: 7,
		Consumers: []client.ConsumerState{
			{Path: "/a", Leaf: true, Demand: 4, Effective: 4, Planned: 5, Target: 5, Allocated: 4},
			{Path: "/b", Demand: 9, Effective: 9, Planned: 5, Target: 5, Allocated: 6, Borrowed: 1, WaitingSince: &three},
		},
		HostsAllocations: []client.HostAllocation{{Consumer: "/a", Host: "h1", Slots: 3}, {Consumer: "/a", Host: "h2", Slots: 1}},
	}
	if fmt.Sprintf("%+v", jsonOf(t, res)) != fmt.Sprintf("%+v", jsonOf(t, want)) {
		t.Errorf("got  %s\nwant %s", jsonOf(t, res), jsonOf(t, want))
	}
	var empty client.Allocations
	if code := getJSON(t, base+"/v1/pools/none/allocations", &empty); code != 200 || empty.Seq != 0 || len(empty.Consumers) != 0 {
		t.Errorf("unknown pool: %d %+v", code, empty)
	}
}

func jsonOf(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDecisionsPages(t *testing.T) {
	base, db := readServer(t)
	// Event 3: two decisions; event 5: three; event 6: one.
	exec(t, db, `INSERT INTO decisions VALUES
		('p', 3, 0, 'grant', '/a', NULL, 'h1', 2, 'priority.entitled', NULL),
		('p', 3, 1, 'grant', '/b', NULL, 'h1', 1, 'priority.borrow', NULL),
		('p', 5, 0, 'reclaim', '/a', '/b', 'h1', 1, 'priority.reclaim', '2026-01-01T00:00:30Z'),
		('p', 5, 1, 'reclaim', '/a', '/b', 'h2', 1, 'priority.reclaim', '2026-01-01T00:00:30Z'),
		('p', 5, 2, 'grant', '/c', NULL, 'h2', 1, 'priority.entitled', NULL),
		('p', 6, 0, 'release', '/a', NULL, 'h1', 1, 'release.finished', NULL),
		('q', 4, 0, 'grant', '/a', NULL, 'h1', 1, 'priority.entitled', NULL)`)

	var all client.DecisionsPage
	getJSON(t, base+"/v1/pools/p/decisions", &all)
	if len(all.Decisions) != 6 || all.NextFromSeq != nil {
		t.Fatalf("all decisions: %s", jsonOf(t, all))
	}
	d := all.Decisions[2]
	if d.EventSeq != 5 || d.Ordinal != 0 || d.Kind != "reclaim" || d.FromConsumer != "/b" || d.Rule != "priority.reclaim" ||
		d.Deadline == nil || !d.Deadline.Equal(time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)) {
		t.Errorf("reclaim row %+v", d)
	}
	// A page never ends inside an event.
	var page client.DecisionsPage
	getJSON(t, base+"/v1/pools/p/decisions?limit=4", &page)
	if len(page.Decisions) != 2 || page.NextFromSeq == nil || *page.NextFromSeq != 5 {
		t.Errorf("limit 4: %s, want event 3 and next_from_seq 5", jsonOf(t, page))
	}
	// An event larger than the limit comes whole.
	page = client.DecisionsPage{}
	getJSON(t, base+"/v1/pools/p/decisions?from_seq=4&limit=2", &page)
	if len(page.Decisions) != 3 || page.NextFromSeq == nil || *page.NextFromSeq != 6 {
		t.Errorf("from 4 limit 2: %s, want event 5 whole and next_from_seq 6", jsonOf(t, page))
	}
	page = client.DecisionsPage{}
	getJSON(t, base+"/v1/pools/p/decisions?from_seq=6", &page)
	if len(page.Decisions) != 1 || page.NextFromSeq != nil {
		t.Errorf("from 6: %s", jsonOf(t, page))
	}
	var bad client.ErrorBody
	if code := getJSON(t, base+"/v1/pools/p/decisions?limit=0", &bad); code != 400 || bad.Reason != "bad_request" {
		t.Errorf("limit=0: %d %+v", code, bad)
	}
}

// /healthz is liveness and leaves PostgreSQL out; /readyz says it is gone.
func TestHealthz(t *testing.T) {
	base, _, db := readServerAs(t)
	var h api.HealthResponse
	if code := getJSON(t, base+"/healthz", &h); code != 200 || h.NATS != "ok" || h.Stream != "ok" || h.Status != "ok" {
		t.Errorf("healthy: %d %+v", code, h)
	}
	db.Close()
	pastProbeCache()
	if code := getJSON(t, base+"/healthz", &h); code != 200 || h.Status != "ok" {
		t.Errorf("PostgreSQL closed: /healthz %d %+v, want 200 (appends do not need it)", code, h)
	}
	var r api.ReadyResponse
	if code := getJSON(t, base+"/readyz", &r); code != 503 || r.Postgres != "down" || r.Status != "not ready" {
		t.Errorf("PostgreSQL closed: /readyz %d %+v, want 503 not ready", code, r)
	}
}
