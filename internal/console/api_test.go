package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	events_ "github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/console"
	"github.com/cluster-ledger/ledger/internal/stream"
)

func slicesSort(s []string) { slices.Sort(s) }

// getJSON GETs u with the bearer token tok ("" for none) and decodes a
// 200 answer into v.
func getJSON(t *testing.T, u, tok string, v any) {
	t.Helper()
	status, body := get(t, u, tok)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", u, err, body)
	}
}

func get(t *testing.T, u, tok string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// TestDataBehindTheHookAssetsNot: the page loads without a token; every
// data endpoint goes through the read middleware.
func TestDataBehindTheHookAssetsNot(t *testing.T) {
	const tok = "tok"
	s := newService(t, api.WithReadMiddleware(requireToken(tok)))
	loadSeed001(t, s, "p")
	for _, path := range []string{"/console/", "/console/app.js", "/console/app.css"} {
		if status, body := get(t, s.url+path, ""); status != http.StatusOK || len(body) == 0 {
			t.Errorf("GET %s without a token: %d", path, status)
		}
	}
	if status, _ := get(t, s.url+"/", ""); status != http.StatusOK { // redirected to the console
		t.Errorf("GET / answered %d", status)
	}
	var d console.TimelineResponse
	getJSON(t, s.url+"/v1/pools/p/timeline?kind=reclaim", tok, &d)
	if len(d.Decisions) == 0 {
		t.Fatal("no reclaim in seed 001's timeline")
	}
	for _, path := range []string{"/v1/pools", "/v1/pools/p", "/v1/pools/p/as-of?seq=1", "/v1/pools/p/timeline",
		fmt.Sprintf("/v1/pools/p/decisions/%d/%d/explain", d.Decisions[0].EventSeq, d.Decisions[0].Ordinal), "/v1/live"} {
		if status, _ := get(t, s.url+path, ""); status != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d, want 401", path, status)
		}
		if status, _ := get(t, s.url+path, "wrong"); status != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d, want 401", path, status)
		}
	}
}

func TestEndpoints(t *testing.T) {
	s := newService(t)
	other := newService(t, api.WithHaltedPools(func(context.Context) (map[string]string, error) {
		return map[string]string{"stopped": "event 7 refused by the projector"}, nil
	}))
	other.send(t, "stopped", &events_.HostUp{Host: "h", Slots: 1})
	last := other.send(t, "running", &events_.HostUp{Host: "h", Slots: 1})[0]
	other.waitProjected(t, "running", last)
	var halted console.PoolsResponse
	getJSON(t, other.url+"/v1/pools", "", &halted)
	if len(halted.Pools) != 2 || halted.Pools[0].Pool != "running" || *halted.Pools[0].Halted || !*halted.Pools[1].Halted ||
		halted.Pools[1].HaltedReason != "event 7 refused by the projector" {
		t.Errorf("pools with a halted hook: %+v", halted.Pools)
	}

	step1, step2 := loadSeed001(t, s, "p")

	var pools console.PoolsResponse
	getJSON(t, s.url+"/v1/pools", "", &pools)
	if len(pools.Pools) != 1 {
		t.Fatalf("pools %+v", pools)
	}
	p := pools.Pools[0]
	if p.Pool != "p" || p.Seq != step2 || p.Capacity != 100 || p.HostsUp != 2 || p.HostsDown != 0 || p.Consumers != 4 || p.Leaves != 3 ||
		p.Allocated != 100 || p.Demand != 600 || p.LastType != "demand" || p.Lag == nil || *p.Lag != 0 || p.RulesVersion == nil || (p.Halted != nil && *p.Halted) {
		t.Errorf("pool summary %+v", p)
	}

	var pool console.PoolResponse
	getJSON(t, s.url+"/v1/pools/p", "", &pool)
	got := map[string]string{}
	for _, c := range pool.Consumers {
		got[c.Path] = fmt.Sprintf("%d/%d/%d/%d", c.Allocated, *c.Target, *c.Planned, c.Demand)
	}
	want := map[string]string{"/A": "20/20/20/100", "/B": "80/80/80/500", "/B/B1": "80/80/20/500", "/B/B2": "0/0/60/0"}
	if !maps.Equal(got, want) {
		t.Errorf("consumers (allocated/target/planned/demand) %v, want %v", got, want)
	}
	if pool.Policy.Reclaim != "share_ratio" || len(pool.Hosts) != 2 || pool.Hosts[0].Name != "h1" || len(pool.Hosts[0].Holders) == 0 {
		t.Errorf("pool %+v", pool)
	}

	var a console.AsOfResponse
	getJSON(t, s.url+fmt.Sprintf("/v1/pools/p/as-of?seq=%d", step2+1000), "", &a)
	if a.Seq != step2 || a.Next != nil || a.Prev == nil || *a.Prev != step1 || a.Event == nil || a.Event.Type != "demand" {
		t.Errorf("as of beyond the end: seq %d prev %v next %v event %+v", a.Seq, a.Prev, a.Next, a.Event)
	}
	at := a.Event.Time
	a = console.AsOfResponse{}
	getJSON(t, s.url+"/v1/pools/p/as-of?time="+url.QueryEscape(at.Format(time.RFC3339Nano)), "", &a)
	if a.Seq != step2 {
		t.Errorf("as of the time of %d: seq %d", step2, a.Seq)
	}
	a = console.AsOfResponse{}
	getJSON(t, s.url+"/v1/pools/p/as-of?time=2000-01-01T00:00:00Z", "", &a)
	if a.Seq != 0 || a.Event != nil || len(a.Consumers) != 0 || len(a.Hosts) != 0 || a.Next == nil || *a.Next != a.First {
		t.Errorf("as of before the first event: %+v", a)
	}

	// Timeline: filters and pages.
	var tl console.TimelineResponse
	getJSON(t, s.url+"/v1/pools/p/timeline?consumer=/A&kind=reclaim", "", &tl)
	if len(tl.Decisions) != 2 || tl.Before != "" {
		t.Fatalf("reclaims touching /A: %+v", tl)
	}
	for _, d := range tl.Decisions {
		if d.Kind != "reclaim" || d.FromConsumer != "/A" || d.Consumer != "/B/B1" || d.EventSeq != step2 || d.Rule != "share_ratio.reclaim" {
			t.Errorf("decision %+v", d)
		}
	}
	tl = console.TimelineResponse{}
	getJSON(t, s.url+"/v1/pools/p/timeline?consumer=/B", "", &tl) // a parent: its leaves' decisions
	if len(tl.Decisions) != 2 {
		t.Errorf("decisions under /B: %d, want 2", len(tl.Decisions))
	}
	tl = console.TimelineResponse{}
	getJSON(t, s.url+"/v1/pools/p/timeline?rule=share_ratio.grant&limit=1", "", &tl)
	var seen []string
	for page := 0; ; page++ {
		for _, d := range tl.Decisions {
			seen = append(seen, fmt.Sprintf("%d.%d", d.EventSeq, d.Ordinal))
		}
		if tl.Before == "" || page > 10 {
			break
		}
		before := tl.Before
		tl = console.TimelineResponse{}
		getJSON(t, s.url+"/v1/pools/p/timeline?rule=share_ratio.grant&limit=1&before="+before, "", &tl)
	}
	if w := []string{fmt.Sprintf("%d.1", step1), fmt.Sprintf("%d.0", step1)}; !slices.Equal(seen, w) {
		t.Errorf("grants paged one by one: %v, want %v", seen, w)
	}

	var x console.ExplainResponse
	getJSON(t, s.url+fmt.Sprintf("/v1/pools/p/decisions/%d/0/explain", step2), "", &x)
	if !strings.Contains(x.Decision, "reclaimed 60 slots from /A on h1 [share_ratio.reclaim]") || !strings.Contains(x.Story, "/B/B1 in pool p at sequence") {
		t.Errorf("explain %+v", x)
	}
}

func TestBadRequestsAnswerWhy(t *testing.T) {
	s := newService(t)
	loadSeed001(t, s, "p")
	for path, want := range map[string]int{
		"/v1/pools/nope":             404,
		"/v1/pools/nope/as-of?seq=1": 404,
		"/v1/pools/a.b":              400,
		"/v1/pools/p/as-of":          400,
		"/v1/pools/p/as-of?seq=x":    400,
		"/v1/pools/p/as-of?seq=1&time=2026-01-01T00:00:00Z": 400,
		"/v1/pools/p/as-of?time=yesterday":                  400,
		"/v1/pools/p/timeline?limit=0":                      400,
		"/v1/pools/p/timeline?limit=100000":                 400,
		"/v1/pools/p/timeline?before=3":                     400,
		"/v1/pools/p/timeline?consumer=A":                   400,
		"/v1/pools/p/decisions/x/0/explain":                 400,
		"/v1/pools/p/decisions/1/99/explain":                404,
		"/v1/live?pool=a.b":                                 400,
	} {
		status, body := get(t, s.url+path, "")
		var e console.ErrorResponse
		if status != want || json.Unmarshal(body, &e) != nil || e.Error == "" || e.Reason == "" {
			t.Errorf("GET %s: %d %s, want %d with a reason", path, status, body, want)
		}
	}
}

// TestLiveStream: a stream opened on a pool gets its checkpoint at once,
// then every new one; shutting the server down ends it.
func TestLiveStream(t *testing.T) {
	s := newService(t)
	_, step2 := loadSeed001(t, s, "p")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/v1/live?pool=p", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := make(chan console.LiveEvent, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev console.LiveEvent
				if json.Unmarshal([]byte(data), &ev) == nil {
					events <- ev
				}
			}
		}
	}()
	next := func() console.LiveEvent {
		select {
		case ev := <-events:
			return ev
		case <-time.After(2 * time.Second):
			t.Fatal("no live event within 2s")
		}
		return console.LiveEvent{}
	}
	if ev := next(); ev.Pool != "p" || ev.Seq != step2 {
		t.Errorf("first event %+v, want p at %d", ev, step2)
	}
	seq := s.send(t, "p", &events_.Demand{Demands: map[string]int64{"/B/B2": 10}})[0]
	if ev := next(); ev.Pool != "p" || ev.Seq != seq {
		t.Errorf("event %+v, want p at %d", ev, seq)
	}
	s.shutdown()
	select {
	case _, open := <-events:
		if open {
			t.Error("an event after shutdown")
		}
	case <-time.After(5 * time.Second):
		t.Error("the stream is still open after the server shut down")
	}
}

// TestExplainAsTheLedger: "explain this decision" answers through the
// HTTP endpoint with a read token for the pool, the server connected as
// the ledger's identity (which may hold no consumer), and leaves no
// consumer behind; flooded by that token (many requests at once), the
// consumers on the stream stay the projector's one throughout.
func TestExplainAsTheLedger(t *testing.T) {
	s := newService(t)
	_, step2 := loadSeed001(t, s, "p")
	u := s.url + fmt.Sprintf("/v1/pools/p/decisions/%d/0/explain", step2)
	var x console.ExplainResponse
	getJSON(t, u, s.readToken, &x)
	if !strings.Contains(x.Decision, "reclaimed 60 slots from /A on h1 [share_ratio.reclaim]") {
		t.Fatalf("explain with a read token: %+v", x)
	}
	consumers := func() int {
		st, err := s.js.Stream(context.Background(), stream.Name)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().State.Consumers
	}
	if n := consumers(); n != 1 {
		t.Fatalf("%d consumers after one explain, want the projector's 1", n)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	stop := make(chan struct{})
	most := 0
	go func() { // watch the count while the flood lasts
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if n := consumers(); n > most {
					most = n
				}
			}
		}
	}()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				code, _ := get(t, u, s.readToken)
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	if codes[200] == 0 {
		t.Errorf("no explain answered during the flood: %v", codes)
	}
	for code := range codes {
		if code != 200 && code != 429 && code != 503 {
			t.Errorf("explain flood answered %d (%v)", code, codes)
		}
	}
	if n := consumers(); n != 1 || most > 1 {
		t.Errorf("consumers: %d after the flood, at most %d during it; want the projector's 1", n, most)
	}
}

// TestTimelineFilterHostileText: a timeline filter PostgreSQL cannot take
// as text (a NUL, bytes that are not UTF-8, an overlong encoding) or
// longer than any kind or rule is the client's mistake: 400 bad_request
// naming the parameter, asked with the read token of a person at the
// console; before, such a filter reached PostgreSQL and was answered 503
// database_failed, "PostgreSQL unavailable?", with Retry-After (decision
// 426). A well-formed filter that matches nothing is still 200.
func TestTimelineFilterHostileText(t *testing.T) {
	s := newService(t)
	loadSeed001(t, s, "p")
	for _, q := range []string{"kind=%00", "rule=%00", "consumer=/A%00", "kind=%ff", "rule=%ff", "consumer=/%ff", "rule=%c0%80",
		"kind=re%0aclaim", "rule=" + strings.Repeat("a", 129)} {
		status, body := get(t, s.url+"/v1/pools/p/timeline?"+q, s.readToken)
		name, _, _ := strings.Cut(q, "=")
		if status != http.StatusBadRequest || !strings.Contains(string(body), `"bad_request"`) || !strings.Contains(string(body), name+` \"`) {
			t.Errorf("timeline?%s: %d %s, want 400 bad_request naming %s", q, status, body, name)
		}
	}
	for _, q := range []string{"kind=nothing", "rule=share_ratio.none", "consumer=/nobody", "rule=" + strings.Repeat("a", 128)} {
		var tl console.TimelineResponse
		getJSON(t, s.url+"/v1/pools/p/timeline?"+q, s.readToken, &tl)
		if len(tl.Decisions) != 0 {
			t.Errorf("timeline?%s: %d decisions, want none", q, len(tl.Decisions))
		}
	}
}
