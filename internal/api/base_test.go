package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
)

// apiInstance starts an API server (a process of `ledger serve`: its own
// NATS connection as the ledger's identity, PostgreSQL as ledger_api;
// dbURL "" gives it no database), signing with sg and trusting only sg's
// key, logging to log.
func apiInstance(t *testing.T, natsURL, dbURL string, sg *signing.Signer, log *syncBuffer, opts ...api.Option) *ledger {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var db *pgxpool.Pool
	if dbURL != "" {
		var err error
		if db, err = pgxpool.New(ctx, dbURL); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
	}
	nc := testenv.Connect(t, natsURL, natsauth.Ledger)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	token, admin, err := auth.Generate("admin", auth.Scopes, []string{auth.AllPools})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := api.New(ctx, js, db, append([]api.Option{api.WithTokens(tokens), api.WithSigner(sg),
		api.WithTrustedKeys(signing.NewKeyring(sg.Public())), api.WithLogger(logger)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &ledger{t: t, nc: nc, js: js, srv: srv, url: hs.URL, token: token}
}

// projectAll runs a projector, as its role and trusting sg, until it has
// committed the stream's last sequence, then stops it (a clean stop saves
// every pool's state: saved_states).
func projectAll(t *testing.T, natsURL string, roles testdb.DB, sg *signing.Signer, last uint64) {
	t.Helper()
	db, err := pgxpool.New(context.Background(), roles.Projector)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	js, err := jetstream.New(testenv.Connect(t, natsURL, natsauth.Projector))
	if err != nil {
		t.Fatal(err)
	}
	p := projections.New(js, db, projections.WithTrustedKeys(signing.NewKeyring(sg.Public())),
		projections.WithLogger(slog.New(slog.DiscardHandler)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("projector: %v", err)
		}
	}()
	// A large pool's fold takes tens of seconds when the machine is
	// shared with other tests.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		seq, err := query.ProjectorOffset(context.Background(), db, "")
		if err == nil && seq >= last {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("projector at %d after 3 minutes, want %d (%v)", seq, last, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bigPool appends to pool a plan of `consumers` leaves, `hosts` hosts,
// a demand of every leaf, then `cycles` rounds of every host going down
// and up again, in requests of at most api.MaxBatch events: a pool whose
// fold from its first event costs seconds (each host event moves
// allocations of every leaf). It returns the pool's last sequence.
func bigPool(l *ledger, pool string, consumers, hosts, cycles int) uint64 {
	l.t.Helper()
	var cs []map[string]any
	for i := range consumers {
		cs = append(cs, consumer(fmt.Sprintf("/g%d/c%d", i%8, i)))
	}
	l.mustPost(pool, plan(cs...))
	var evs []any
	for h := range hosts {
		evs = append(evs, hostUp(fmt.Sprintf("h%d", h), consumers/hosts+2))
	}
	l.mustPost(pool, evs)
	evs = nil
	for i := range consumers {
		evs = append(evs, demand(map[string]int{fmt.Sprintf("/g%d/c%d", i%8, i): 1}))
		if len(evs) == api.MaxBatch {
			l.mustPost(pool, evs)
			evs = nil
		}
	}
	var last uint64
	flush := func() {
		if len(evs) > 0 {
			res := l.mustPost(pool, evs)
			last = res.Events[len(res.Events)-1].Seq
			evs = nil
		}
	}
	for c := range cycles {
		for h := range hosts {
			name := fmt.Sprintf("h%d", (h+c)%hosts)
			evs = append(evs, ev("host_down", map[string]any{"host": name}), hostUp(name, consumers/hosts+2))
			if len(evs) >= api.MaxBatch-1 {
				flush()
			}
		}
	}
	flush()
	return last
}

// firstAppend posts body to pool until it is answered 200 (each 503 is
// retried at once), and says how long that took and how many requests.
func firstAppend(l *ledger, pool string, body any, within time.Duration) (took, slowest time.Duration, requests int) {
	l.t.Helper()
	start := time.Now()
	for {
		t0 := time.Now()
		code, _, bad := l.post(pool, body)
		slowest = max(slowest, time.Since(t0))
		requests++
		if code == http.StatusOK {
			return time.Since(start), slowest, requests
		}
		if code != http.StatusServiceUnavailable {
			l.t.Fatalf("append to %s: %d %+v", pool, code, bad)
		}
		if time.Since(start) > within {
			l.t.Fatalf("append to %s: still %d %+v after %v and %d requests", pool, code, bad, time.Since(start), requests)
		}
	}
}

// restartTimeout is the restarted API's request timeout in the tests of
// a large pool: well under the pool's fold from its first event (3 to
// 7 s here), well over its start from the projection's state (0.1 to
// 0.3 s).
const restartTimeout = time.Second

// TestRestartStartsFromProjectionState: a pool of about 6,000 events that
// takes seconds to fold from its first event (here, as after an API
// restart without the projection: several requests of the timeout, each
// answered 503) is appendable at the first request of an API restarted
// over the same stream and database: its view starts from the state the
// projector saved and folds only the events after it. A retried id
// stored before the state and one stored after it are both answered as
// duplicates with their sequences, inside the duplicate window (compared
// by content) and after it (an instance whose clock is past the window:
// the ids the projection lists, checked against the stream); nothing is
// stored twice.
func TestRestartStartsFromProjectionState(t *testing.T) {
	natsURL := testenv.NATS(t)
	roles := testdb.New(t)
	sg := signing.Generate()
	var log syncBuffer
	l := apiInstance(t, natsURL, roles.API, sg, &log, api.WithPublishTimeout(time.Minute))
	bigPool(l, "big", 2000, 100, 20)
	before := l.mustPost("big", withID(demand(map[string]int{"/g1/c1": 1}), "before-state")).Events[0].Seq
	projectAll(t, natsURL, roles, sg, before)
	after := l.mustPost("big", withID(demand(map[string]int{"/g2/c2": 1}), "after-state")).Events[0].Seq
	for range 20 { // events after the saved state, folded from the stream
		l.mustPost("big", ev("host_down", map[string]any{"host": "h7"}))
		l.mustPost("big", hostUp("h7", 22))
	}
	stored := len(poolEvents(t, l.js, "big"))

	// Before: without the projection's state, a restarted API folds the
	// pool from its first event, over several requests.
	old := apiInstance(t, natsURL, "", sg, &log, api.WithPublishTimeout(restartTimeout))
	tookOld, _, reqOld := firstAppend(old, "big", withID(demand(map[string]int{"/g1/c1": 1}), "before-state"), 2*time.Minute)
	if reqOld < 2 {
		t.Fatalf("the fold from the first event fitted one request of %v: the pool is too small for this test", restartTimeout)
	}

	// After: the first request of a restarted API is answered.
	l2 := apiInstance(t, natsURL, roles.API, sg, &log, api.WithPublishTimeout(restartTimeout))
	start := time.Now()
	code, res, bad := l2.post("big", withID(demand(map[string]int{"/g1/c1": 1}), "before-state"))
	took := time.Since(start)
	if code != http.StatusOK {
		t.Fatalf("first append after the restart: %d %+v (log: %s)", code, bad, log.String())
	}
	t.Logf("first successful append after a restart, pool of %d events: %v and %d requests folding from the first event; %v and 1 request from the projection's state",
		stored, tookOld.Round(time.Millisecond), reqOld, took.Round(time.Millisecond))
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "started from the projection's state") {
			t.Log(line)
		}
	}
	if !strings.Contains(log.String(), "started from the projection's state") {
		t.Errorf("the log does not say the view started from the projection's state:\n%s", log.String())
	}
	if e := res.Events[0]; !e.Duplicate || e.Seq != before {
		t.Errorf("retry of before-state: %+v, want a duplicate at %d", e, before)
	}
	if e := l2.mustPost("big", withID(demand(map[string]int{"/g2/c2": 1}), "after-state")).Events[0]; !e.Duplicate || e.Seq != after {
		t.Errorf("retry of after-state: %+v, want a duplicate at %d", e, after)
	}
	if code, _, bad := l2.post("big", withID(demand(map[string]int{"/g2/c2": 2}), "after-state")); code != http.StatusConflict || bad.Reason != api.ReasonIDConflict {
		t.Errorf("after-state again with other content: %d %+v, want 409 %s", code, bad, api.ReasonIDConflict)
	}
	if code, _, bad := l2.post("big", release("/g3/c3", 5)); code != http.StatusUnprocessableEntity || bad.Reason != "release_too_many" {
		t.Errorf("release of more than /g3/c3 holds: %d %+v, want 422 release_too_many", code, bad)
	}
	next := l2.mustPost("big", withID(release("/g3/c3", 1), "new")).Events[0]
	if next.Duplicate || next.Seq != testenv.StreamLast(t, l2.js) {
		t.Errorf("a new event: %+v, want stored last", next)
	}

	// Past the duplicate window the ids of the saved state come from the
	// projection, each checked against the stream when it answers.
	clock := &fixedClock{now: time.Now().Add(stream.DuplicateWindow + time.Minute)}
	l3 := apiInstance(t, natsURL, roles.API, sg, &log, api.WithPublishTimeout(restartTimeout), api.WithClock(clock.Now))
	if e := l3.mustPost("big", withID(demand(map[string]int{"/g1/c1": 1}), "before-state")).Events[0]; !e.Duplicate || e.Seq != before {
		t.Errorf("retry of before-state past the window: %+v, want a duplicate at %d", e, before)
	}
	if e := l3.mustPost("big", withID(demand(map[string]int{"/g2/c2": 1}), "after-state")).Events[0]; !e.Duplicate || e.Seq != after {
		t.Errorf("retry of after-state past the window: %+v, want a duplicate at %d", e, after)
	}
	ids := map[string]int{}
	for _, e := range poolEvents(t, l.js, "big") {
		ids[e.stored.Envelope.ID]++
	}
	for _, id := range []string{"before-state", "after-state", "new"} {
		if ids[id] != 1 {
			t.Errorf("id %s stored %d times", id, ids[id])
		}
	}
}

var foldedUpTo = regexp.MustCompile(`up to sequence (\d+) of (\d+)`)

// TestRebuildContinuesAcrossRequests: a pool whose fold takes several
// times the request timeout (no projection's state to start from) is
// folded over successive requests: each is answered 503 with Retry-After
// within the timeout plus about one event (the deadline is checked per
// event folded), saying how far the fold got, and each continues where
// the one before stopped, until the append is stored.
func TestRebuildContinuesAcrossRequests(t *testing.T) {
	natsURL := testenv.NATS(t)
	sg := signing.Generate()
	var log syncBuffer
	l := apiInstance(t, natsURL, "", sg, &log, api.WithPublishTimeout(time.Minute))
	bigPool(l, "big", 2000, 100, 10)

	// How long a whole fold takes here (a new instance's first append),
	// so that the timeout is a fraction of it on a fast machine as on a
	// loaded one.
	lm := apiInstance(t, natsURL, "", sg, &log, api.WithPublishTimeout(time.Minute))
	start := time.Now()
	last := lm.mustPost("big", demand(map[string]int{"/g1/c1": 1})).Events[0].Seq
	whole := time.Since(start)
	timeout := max(whole/5, 20*time.Millisecond)
	t.Logf("a whole fold took %v: requests of %v", whole.Round(time.Millisecond), timeout)
	l2 := apiInstance(t, natsURL, "", sg, &log, api.WithPublishTimeout(timeout))
	var at []uint64
	for n := 0; ; n++ {
		if n > 100 {
			t.Fatalf("not stored after %d requests; folded up to %v", n, at)
		}
		start = time.Now()
		code, res, bad := l2.post("big", withID(demand(map[string]int{"/g0/c0": 1}), "x"))
		took := time.Since(start)
		if took > timeout+time.Second {
			t.Errorf("request %d took %v, timeout %v", n, took, timeout)
		}
		if code == http.StatusOK {
			if res.Events[0].Seq != last+1 {
				t.Errorf("stored at %d, want %d", res.Events[0].Seq, last+1)
			}
			break
		}
		m := foldedUpTo.FindStringSubmatch(bad.Error)
		if code != http.StatusServiceUnavailable || m == nil {
			t.Fatalf("request %d: %d %+v, want 503 saying how far the fold got", n, code, bad)
		}
		seq, _ := strconv.ParseUint(m[1], 10, 64)
		if len(at) > 0 && seq < at[len(at)-1] {
			t.Errorf("request %d folded up to %d, the one before up to %d: started again?", n, seq, at[len(at)-1])
		}
		at = append(at, seq)
	}
	if len(at) < 2 {
		t.Fatalf("folded in %d requests of %v: the pool is too small for this test", len(at)+1, timeout)
	}
	t.Logf("folded over %d requests of %v: %v", len(at)+1, timeout, at)
}

// TestEvictionKeepsCostlyViews: with room for 3 pools' views, the view of
// a pool that took long to fold stays while many cheap pools are
// appended to after it (least recently used first would have let it go
// at the first new pool), and the bound holds throughout; a pool let go
// is still answered right.
func TestEvictionKeepsCostlyViews(t *testing.T) {
	natsURL := testenv.NATS(t)
	sg := signing.Generate()
	var log syncBuffer
	l := apiInstance(t, natsURL, "", sg, &log, api.WithPublishTimeout(time.Minute))
	bigPool(l, "big", 1000, 50, 4)
	for i := range 8 {
		setup(l, fmt.Sprintf("small%d", i))
	}

	l2 := apiInstance(t, natsURL, "", sg, &log, api.WithPublishTimeout(time.Minute), api.WithResidentPools(3))
	start := time.Now()
	l2.mustPost("big", demand(map[string]int{"/g0/c0": 1}))
	t.Logf("big folded in %v", time.Since(start))
	for round := range 3 {
		for i := range 8 {
			pool := fmt.Sprintf("small%d", i)
			l2.mustPost(pool, withID(demand(map[string]int{"/a": 1}), fmt.Sprintf("%s-%d", pool, round)))
			if n := l2.srv.ResidentPools(); n > 3 {
				t.Fatalf("%d views in memory, want at most 3", n)
			}
			if !l2.srv.Resident("big") {
				t.Fatalf("round %d, after %s: the costly view was let go", round, pool)
			}
		}
	}
	// The small pools went and came back, each folded again: their
	// retried ids are still duplicates.
	for i := range 8 {
		pool := fmt.Sprintf("small%d", i)
		if e := l2.mustPost(pool, withID(demand(map[string]int{"/a": 1}), pool+"-0")).Events[0]; !e.Duplicate {
			t.Errorf("%s: the retried id was stored again: %+v", pool, e)
		}
	}
}

// TestTamperedProjectionStateFallsBack: a restarted API does not use a
// state of the projection that fails its checks (a state_hash that is
// not the state's, a state stored at a sequence that is not its own) nor
// an applied id the stream does not hold: it says so in its log, folds
// the pool from its first event, answers right (a release beyond what a
// leaf holds is refused, a retried id is a duplicate, a new event is
// stored last), and refuses, rather than answer as a duplicate, a new
// event whose id the projection claims falsely. Without any state it
// folds from the first event and says nothing.
func TestTamperedProjectionStateFallsBack(t *testing.T) {
	natsURL := testenv.NATS(t)
	roles := testdb.New(t)
	sg := signing.Generate()
	var log syncBuffer
	l := apiInstance(t, natsURL, roles.API, sg, &log)
	setup(l, "p")
	first := l.mustPost("p", withID(demand(map[string]int{"/a": 4}), "first")).Events[0].Seq
	setup(l, "other")
	otherSeq := l.mustPost("other", demand(map[string]int{"/a": 1})).Events[0].Seq
	last := l.mustPost("p", withID(demand(map[string]int{"/b": 2}), "second")).Events[0].Seq
	projectAll(t, natsURL, roles, sg, last)
	owner, err := pgxpool.New(context.Background(), roles.Owner)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()

	check := func(what string, wantLog string) {
		t.Helper()
		var log syncBuffer
		l := apiInstance(t, natsURL, roles.API, sg, &log)
		if code, _, bad := l.post("p", release("/a", 5)); code != http.StatusUnprocessableEntity || bad.Reason != "release_too_many" {
			t.Errorf("%s: release of more than /a holds: %d %+v, want 422 release_too_many", what, code, bad)
		}
		if e := l.mustPost("p", withID(demand(map[string]int{"/a": 4}), "first")).Events[0]; !e.Duplicate || e.Seq != first {
			t.Errorf("%s: retry of first: %+v, want a duplicate at %d", what, e, first)
		}
		got := log.String()
		if wantLog == "" && strings.Contains(got, "pool view:") {
			t.Errorf("%s: the log says\n%s", what, got)
		}
		if wantLog != "" && (!strings.Contains(got, "not used; folding the pool from its first event") || !strings.Contains(got, wantLog)) {
			t.Errorf("%s: the log does not say the state was not used (%q):\n%s", what, wantLog, got)
		}
	}

	// As projected: the state is used.
	var log0 syncBuffer
	l0 := apiInstance(t, natsURL, roles.API, sg, &log0)
	if e := l0.mustPost("p", withID(demand(map[string]int{"/b": 2}), "second")).Events[0]; !e.Duplicate || e.Seq != last {
		t.Errorf("retry of second: %+v, want a duplicate at %d", e, last)
	}
	if !strings.Contains(log0.String(), "started from the projection's state") {
		t.Fatalf("the untouched state was not used:\n%s", log0.String())
	}

	exec(t, owner, `UPDATE saved_states SET state_hash = '\x00' WHERE pool = 'p'`)
	exec(t, owner, `UPDATE snapshots SET state_hash = '\x00' WHERE pool = 'p'`)
	check("a state_hash that is not the state's", "does not hash to its stored state_hash")

	exec(t, owner, `DELETE FROM snapshots WHERE pool = 'p'`)
	exec(t, owner, `UPDATE saved_states s SET seq = $1, state_hash = (SELECT state_hash FROM checkpoints WHERE pool = 'p') WHERE pool = 'p'`, int64(otherSeq))
	check("a state stored at another pool's event", "at sequence")

	// Put back as projected, but an applied id made up: the retry of the
	// real id is still a duplicate; the made-up id is not.
	exec(t, owner, `UPDATE saved_states s SET seq = $1 WHERE pool = 'p'`, int64(last))
	exec(t, owner, `UPDATE events SET id = 'made-up' WHERE pool = 'p' AND seq = $1`, int64(first))
	var logF syncBuffer
	lf := apiInstance(t, natsURL, roles.API, sg, &logF)
	if e := lf.mustPost("p", withID(demand(map[string]int{"/a": 4}), "first")).Events[0]; !e.Duplicate || e.Seq != first {
		t.Errorf("made-up id: retry of first: %+v, want a duplicate at %d", e, first)
	}
	if code, _, bad := lf.post("p", withID(demand(map[string]int{"/b": 1}), "made-up")); code != http.StatusServiceUnavailable {
		t.Errorf("an id the projection claims falsely: %d %+v, want 503", code, bad)
	}
	if !strings.Contains(logF.String(), "the projection disagrees with the log") {
		t.Errorf("the log does not say the projection disagrees with the log:\n%s", logF.String())
	}
	exec(t, owner, `UPDATE events SET id = 'first' WHERE pool = 'p' AND seq = $1`, int64(first))

	exec(t, owner, `DELETE FROM saved_states WHERE pool = 'p'`)
	check("no state", "")

	ids := map[string]int{}
	for _, e := range poolEvents(t, l.js, "p") {
		ids[e.stored.Envelope.ID]++
	}
	if ids["first"] != 1 || ids["second"] != 1 || ids["made-up"] != 0 {
		t.Errorf("ids stored: %v", ids)
	}
}

// TestStateOfARecreatedStreamIsNotUsed: the projection's states of pools
// of a stream since deleted and made again (its offsets dropped, its
// states left) name sequences that the new
// stream gives to other events: one of the same pool stamped at another
// time, one of another pool. A restarted API uses neither (the log says
// so), folds those pools from their first event in the new stream and
// answers as that log says.
func TestStateOfARecreatedStreamIsNotUsed(t *testing.T) {
	natsURL := testenv.NATS(t)
	roles := testdb.New(t)
	sg := signing.Generate()
	var log syncBuffer
	l := apiInstance(t, natsURL, roles.API, sg, &log)
	setup(l, "p")
	pSeq := l.mustPost("p", demand(map[string]int{"/a": 4})).Events[0].Seq
	setup(l, "r")
	rSeq := l.mustPost("r", demand(map[string]int{"/a": 4})).Events[0].Seq
	projectAll(t, natsURL, roles, sg, rSeq)

	admin, err := jetstream.New(testenv.Connect(t, natsURL, natsauth.Admin))
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteStream(context.Background(), stream.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Ensure(context.Background(), admin); err != nil { // made again, empty
		t.Fatal(err)
	}
	// The projection's offsets go with the old stream (else the API holds
	// appends until the projector heals the stream from them); its states
	// stay.
	owner, err := pgxpool.New(context.Background(), roles.Owner)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	exec(t, owner, `DELETE FROM projector_offsets`)
	var logNew syncBuffer
	l2 := apiInstance(t, natsURL, roles.API, sg, &logNew)
	setup(l2, "q")
	setup(l2, "p") // p's plan at pSeq, stamped now
	l2.mustPost("q", demand(map[string]int{"/a": 1}))
	l2.mustPost("q", demand(map[string]int{"/b": 1})) // q's event at rSeq
	setup(l2, "r")
	if got := poolEvents(t, l2.js, "p"); got[0].seq != pSeq {
		t.Fatalf("p's plan is at %d in the new stream, want %d", got[0].seq, pSeq)
	}
	if got := poolEvents(t, l2.js, "q"); got[len(got)-1].seq != rSeq {
		t.Fatalf("q's last event is at %d in the new stream, want %d", got[len(got)-1].seq, rSeq)
	}

	var log3 syncBuffer
	l3 := apiInstance(t, natsURL, roles.API, sg, &log3)
	for _, pool := range []string{"p", "r"} {
		// The old state had /a holding 4; the new log has no demand.
		if code, _, bad := l3.post(pool, release("/a", 1)); code != http.StatusUnprocessableEntity || bad.Reason != "release_too_many" {
			t.Errorf("pool %s: release of a slot /a does not hold: %d %+v, want 422 release_too_many", pool, code, bad)
		}
		res := l3.mustPost(pool, demand(map[string]int{"/b": 1}))
		if ev := poolEvents(t, l3.js, pool); res.Events[0].Seq != ev[len(ev)-1].seq || len(ev) != 3 {
			t.Errorf("pool %s: stored at %d; its events are %d, the last at %d", pool, res.Events[0].Seq, len(ev), ev[len(ev)-1].seq)
		}
	}
	got := log3.String()
	if strings.Count(got, "not used; folding the pool from its first event") != 2 || !strings.Contains(got, "the stream holds no event of the pool at sequence") ||
		strings.Contains(got, "started from the projection's state") {
		t.Errorf("the log does not say both states were not used:\n%s", got)
	}
}

// TestHungDatabaseDelaysAppendsOnly: a PostgreSQL that accepts
// connections and never answers (a hung server, a partition) costs a
// pool's appends a few requests answered 503 within the timeout while
// the projection's state is looked up, then the view is folded from the
// pool's first event and appends go on.
func TestHungDatabaseDelaysAppendsOnly(t *testing.T) {
	natsURL := testenv.NATS(t)
	sg := signing.Generate()
	var log syncBuffer
	l := apiInstance(t, natsURL, "", sg, &log)
	setup(l, "p")
	first := l.mustPost("p", withID(demand(map[string]int{"/a": 4}), "first")).Events[0].Seq

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	const timeout = 300 * time.Millisecond
	var logHung syncBuffer
	hung := apiInstance(t, natsURL, "postgres://ledger_api@"+ln.Addr().String()+"/ledger?sslmode=disable", sg, &logHung, api.WithPublishTimeout(timeout))
	requests := 0
	for {
		start := time.Now()
		code, res, bad := hung.post("p", withID(demand(map[string]int{"/a": 4}), "first"))
		// pgx gives a query whose context ends a second more to take
		// the cancel (its DeadlineDelay) before it closes the connection.
		if took := time.Since(start); took > timeout+2*time.Second {
			t.Errorf("request %d took %v, timeout %v", requests, took, timeout)
		}
		requests++
		if code == http.StatusOK {
			if e := res.Events[0]; !e.Duplicate || e.Seq != first {
				t.Errorf("retry of first: %+v, want a duplicate at %d", e, first)
			}
			break
		}
		if code != http.StatusServiceUnavailable || requests > 10 {
			t.Fatalf("request %d: %d %+v", requests, code, bad)
		}
	}
	if requests != 4 {
		t.Errorf("stored at request %d, want 4 (3 looking the state up, then the fold)", requests)
	}
	if !strings.Contains(logHung.String(), "the projection's state was not read within 3 requests") {
		t.Errorf("the log does not say the state was given up:\n%s", logHung.String())
	}
}
