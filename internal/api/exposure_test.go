package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/console"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/migrations"
	"github.com/cluster-ledger/ledger/projections"
)

// exposed is a whole ledger (NATS, PostgreSQL, a projector, the API with
// its console) whose log the test reads, and two real identities: a
// planner (plan and append on pool p) and a reader (read on p).
type exposed struct {
	*ledger
	db      *pgxpool.Pool
	reader  string
	logs    *syncBuffer
	natsURL string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func newExposed(t *testing.T, opts ...api.Option) *exposed {
	t.Helper()
	natsURL, dbURL := testenv.NATS(t), testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := migrations.Up(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	pjs, err := jetstream.New(testenv.Connect(t, natsURL, natsauth.Projector))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- projections.New(pjs, db, projections.WithLogger(quietLogger())).Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	planner, pe := mustToken(t, "planner", []auth.Scope{auth.ScopePlan, auth.ScopeAppend}, "p")
	reader, re := mustToken(t, "reader", []auth.Scope{auth.ScopeRead}, "p")
	tokens, err := auth.New(pe, re)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	nc := testenv.Connect(t, natsURL, natsauth.Ledger)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(ctx, js, db, append([]api.Option{api.WithTokens(tokens), api.WithLogger(slog.New(slog.NewTextHandler(logs, nil)))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.Config.RegisterOnShutdown(srv.Shutdown)
	hs.Start()
	t.Cleanup(func() { srv.Shutdown(); hs.Close() })
	return &exposed{ledger: &ledger{t: t, nc: nc, js: js, srv: srv, url: hs.URL, token: planner}, db: db, reader: reader, logs: logs, natsURL: natsURL}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// read GETs path as the reader.
func (e *exposed) read(path string) (*http.Response, []byte) {
	e.t.Helper()
	return send(e.t, http.MethodGet, e.url+path, "", e.reader, nil)
}

// waitDecisions waits until the projection holds n decisions of pool p.
func (e *exposed) waitDecisions(n int) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got int
		if err := e.db.QueryRow(context.Background(), `SELECT count(*) FROM decisions WHERE pool = 'p'`).Scan(&got); err != nil {
			e.t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d decisions projected after 30s, want %d", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The timeline's consumer filter is a path prefix: /team_a is the
// consumer and its descendants, never /teamba/y (which LIKE '/team_a/%'
// matched: '_' is LIKE's any-character) nor /team_ab.
func TestTimelineConsumerFilterIsExactPrefix(t *testing.T) {
	e := newExposed(t)
	e.mustPost("p", []any{
		plan(consumer("/team_a/x"), consumer("/team_a/y"), consumer("/teamba/y"), consumer("/team_ab/z"), consumer("/team%")),
		hostUp("h1", 50),
		demand(map[string]int{"/team_a/x": 5, "/team_a/y": 5, "/teamba/y": 5, "/team_ab/z": 5, "/team%": 5}),
	})
	e.waitDecisions(5)
	consumersOf := func(filter string) []string {
		resp, raw := e.read("/v1/pools/p/timeline?consumer=" + filter)
		if resp.StatusCode != 200 {
			t.Fatalf("timeline consumer=%s: %d %s", filter, resp.StatusCode, raw)
		}
		var tl console.TimelineResponse
		mustUnmarshal(t, raw, &tl)
		var out []string
		for _, d := range tl.Decisions {
			if !slices.Contains(out, d.Consumer) {
				out = append(out, d.Consumer)
			}
		}
		slices.Sort(out)
		return out
	}
	for filter, want := range map[string][]string{
		"/team_a":   {"/team_a/x", "/team_a/y"},
		"/team_a/x": {"/team_a/x"},
		"/team%25":  {"/team%"},
		"/team":     nil,
		"/":         {"/team%", "/team_a/x", "/team_a/y", "/team_ab/z", "/teamba/y"},
	} {
		if got := consumersOf(filter); !slices.Equal(got, want) {
			t.Errorf("consumer=%s: decisions of %v, want %v", filter, got, want)
		}
	}
	resp, raw := e.read("/v1/pools/p/timeline?consumer=/team_a/")
	errorOf(t, "a path with a trailing slash", resp, raw, 400, "bad_request")
}

// Sequence parameters take any unsigned 64-bit number: past 2^31 (an
// int4 parameter once made the driver fail: 503 with its text) and past
// 2^63 (beyond PostgreSQL's bigint) the answer is the page those
// numbers mean; past 2^64-1, or not a number, a 400 that says what is
// wanted.
func TestSequenceParametersAreUnsigned64(t *testing.T) {
	e := newExposed(t)
	setup(e.ledger, "p")
	e.mustPost("p", demand(map[string]int{"/a": 4, "/b": 3}))
	e.waitDecisions(2)

	newest := func(path string) string {
		t.Helper()
		resp, raw := e.read(path)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, raw)
		}
		var tl console.TimelineResponse
		mustUnmarshal(t, raw, &tl)
		if len(tl.Decisions) == 0 {
			t.Fatalf("GET %s: no decisions", path)
		}
		b, _ := json.Marshal(tl.Decisions)
		return string(b)
	}
	all := newest("/v1/pools/p/timeline")
	for _, before := range []string{"2147483648.0", "2147483648.2147483648", "9223372036854775807.0", "9223372036854775808.0",
		"18446744073709551615.0", "18446744073709551615.18446744073709551615", "3.4294967296"} {
		if got := newest("/v1/pools/p/timeline?before=" + before); got != all {
			t.Errorf("before=%s: %s, want every decision %s", before, got, all)
		}
	}
	for _, path := range []string{"/v1/pools/p/as-of?seq=2147483648", "/v1/pools/p/as-of?seq=9223372036854775808", "/v1/pools/p/as-of?seq=18446744073709551615"} {
		resp, raw := e.read(path)
		var a console.AsOfResponse
		if resp.StatusCode != 200 || json.Unmarshal(raw, &a) != nil || a.Seq != 3 {
			t.Errorf("GET %s: %d %s, want the pool after its last event, 3", path, resp.StatusCode, raw)
		}
	}
	resp, raw := e.read("/v1/pools/p/decisions?from_seq=9223372036854775808")
	var page client.DecisionsPage
	if resp.StatusCode != 200 || json.Unmarshal(raw, &page) != nil || len(page.Decisions) != 0 {
		t.Errorf("decisions from 2^63: %d %s, want an empty page", resp.StatusCode, raw)
	}
	resp, raw = e.read("/v1/pools/p/decisions/9223372036854775808/0/explain")
	errorOf(t, "explain past 2^63", resp, raw, 404, "not_found")
	for _, path := range []string{
		"/v1/pools/p/timeline?before=18446744073709551616.0", "/v1/pools/p/timeline?before=1.-1",
		"/v1/pools/p/as-of?seq=18446744073709551616", "/v1/pools/p/as-of?seq=-1",
		"/v1/pools/p/decisions?from_seq=18446744073709551616", "/v1/pools/p/decisions/18446744073709551616/0/explain",
	} {
		resp, raw := e.read(path)
		errorOf(t, path, resp, raw, 400, "bad_request")
		if !strings.Contains(string(raw), "18446744073709551615") {
			t.Errorf("GET %s: %s does not say the range", path, raw)
		}
	}
}

// driverWords are what a PostgreSQL or NATS error says of itself.
var driverWords = []string{"SQLSTATE", "relation", "pgx", "pgconn", "ERROR:", "nats:", "dial tcp", "connection refused", "decisions_hidden", "checkpoints_hidden", "events_hidden"}

// A failing database (its tables gone from under the reads) is answered
// 503 in the ledger's words with a request id; the driver's text is in
// the server's log under that id, never in the body.
func TestErrorsCarryNoDriverText(t *testing.T) {
	e := newExposed(t)
	setup(e.ledger, "p")
	e.mustPost("p", demand(map[string]int{"/a": 4}))
	e.waitDecisions(1)
	exec(t, e.db, `ALTER TABLE decisions RENAME TO decisions_hidden`)
	exec(t, e.db, `ALTER TABLE checkpoints RENAME TO checkpoints_hidden`)
	// Time travel reads the pool's events (its state is the engine's,
	// forked from the log): hidden too.
	exec(t, e.db, `ALTER TABLE events RENAME TO events_hidden`)
	defer exec(t, e.db, `ALTER TABLE decisions_hidden RENAME TO decisions`)
	defer exec(t, e.db, `ALTER TABLE checkpoints_hidden RENAME TO checkpoints`)
	defer exec(t, e.db, `ALTER TABLE events_hidden RENAME TO events`)
	for _, path := range []string{
		"/v1/pools/p/allocations", "/v1/pools/p/decisions", "/v1/pools", "/v1/pools/p",
		"/v1/pools/p/timeline", "/v1/pools/p/timeline?before=2147483648.0", "/v1/pools/p/decisions/3/0/explain",
	} {
		resp, raw := e.read(path)
		var body struct {
			Error, Reason string
			RequestID     string `json:"request_id"`
		}
		if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(raw, &body) != nil || body.Error == "" {
			t.Errorf("GET %s: %d %s, want 503 with an error", path, resp.StatusCode, raw)
			continue
		}
		for _, w := range driverWords {
			if strings.Contains(string(raw), w) {
				t.Errorf("GET %s: the body %s carries the driver's %q", path, raw, w)
			}
		}
		if id := resp.Header.Get(api.RequestIDHeader); id == "" || body.RequestID != id {
			t.Errorf("GET %s: request id %q in the body, %q in the header", path, body.RequestID, id)
		}
		logged := false
		for _, line := range strings.Split(e.logs.String(), "\n") {
			logged = logged || (strings.Contains(line, body.RequestID) && strings.Contains(line, "_hidden") || strings.Contains(line, body.RequestID) && strings.Contains(line, "does not exist"))
		}
		if !logged {
			t.Errorf("GET %s: no log line with request id %s and the driver's error:\n%s", path, body.RequestID, e.logs.String())
		}
	}
}

// Every answer of the server, the console's pages and data first,
// forbids framing (CSP frame-ancestors 'none' and X-Frame-Options DENY).
func TestNoAnswerMayBeFramed(t *testing.T) {
	e := newExposed(t)
	setup(e.ledger, "p")
	e.mustPost("p", demand(map[string]int{"/a": 4}))
	e.waitDecisions(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		path, token string
	}{
		{"/", ""}, {"/console/", ""}, {"/console/index.html", ""}, {"/console/app.js", ""}, {"/console/app.css", ""}, {"/console/nope", ""},
		{"/v1/pools", e.reader}, {"/v1/pools/p", e.reader}, {"/v1/pools/p/as-of?seq=3", e.reader},
		{"/v1/pools/p/timeline", e.reader}, {"/v1/pools/p/decisions/x/0/explain", e.reader}, {"/v1/pools", ""},
		{"/v1/pools/other", e.reader}, {"/v1/pools/p/allocations", e.reader}, {"/v1/status", e.reader}, {"/healthz", ""},
		{"/v1/live?pool=p", e.reader},
	} {
		rq, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+c.path, nil)
		if c.token != "" {
			rq.Header.Set("Authorization", "Bearer "+c.token)
		}
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(rq)
		if err != nil {
			t.Fatalf("GET %s: %v", c.path, err)
		}
		resp.Body.Close() // the live stream: its headers are what counts
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "frame-ancestors 'none'") || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s (%d): CSP %q, X-Frame-Options %q", c.path, resp.StatusCode, csp, resp.Header.Get("X-Frame-Options"))
		}
	}
}
