package api_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/contract"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// One token past its requests a second is answered 429 rate_limited with
// Retry-After; another token is not held back; the client library waits
// for Retry-After and sends again.
func TestTokenRateLimit(t *testing.T) {
	producer, pe := mustToken(t, "scheduler", []auth.Scope{auth.ScopeAppend, auth.ScopePlan}, "p")
	other, oe := mustToken(t, "reporter", []auth.Scope{auth.ScopeRead}, auth.AllPools)
	tokens, err := auth.New(pe, oe)
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger(t, testenv.NATS(t), api.WithTokens(tokens), api.WithTokenLimits(api.TokenLimits{Rate: 2, Burst: 3}))
	l.token = producer
	setup(l, "p") // 1 request
	ok := 0
	var limited *http.Response
	var raw []byte
	for range 5 {
		resp, body := l.request(http.MethodPost, "/v1/pools/p/events", `{"type":"demand","data":{"demands":{"/a":1}}}`, nil)
		if resp.StatusCode == 200 {
			ok++
			continue
		}
		limited, raw = resp, body
		break
	}
	if limited == nil {
		t.Fatalf("%d appends in a row all answered 200 at 2/s with a burst of 3", ok)
	}
	errorOf(t, "over the rate", limited, raw, http.StatusTooManyRequests, api.ReasonRateLimited)
	if s, err := strconv.Atoi(limited.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("429 with Retry-After %q", limited.Header.Get("Retry-After"))
	}
	if resp, body := send(t, http.MethodGet, l.url+"/v1/status", "", other, nil); resp.StatusCode != 200 {
		t.Errorf("another token while the first is limited: %d %s", resp.StatusCode, body)
	}
	// The client library waits and sends again: three appends at 2/s.
	c := client.New(l.url, client.WithToken(producer))
	start := time.Now()
	for i := range 3 {
		ev, _ := client.NewEvent(&events.Demand{Demands: map[string]int64{"/a": int64(i)}})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := c.Append(ctx, "p", ev)
		cancel()
		if err != nil {
			t.Fatalf("client append %d over the rate: %v", i, err)
		}
	}
	t.Logf("three appends through the client at 2/s after the burst: %v", time.Since(start).Round(time.Millisecond))
}

// One token's requests in progress and live streams are bounded; another
// token's are not taken by them.
func TestTokenConcurrencyAndStreams(t *testing.T) {
	e := newExposed(t, api.WithTokenLimits(api.TokenLimits{Concurrent: 2, Streams: 1}))
	setup(e.ledger, "p")
	release := make(chan struct{})
	var entered sync.WaitGroup
	e.srv.HandleRead("GET /test/slow/{pool}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Done()
		<-release
	}))
	var done sync.WaitGroup
	for range 2 {
		entered.Add(1)
		// The test's own route is no part of the API: its answer is not
		// checked against the contract (contract.Unchecked).
		done.Go(func() {
			rq, _ := http.NewRequest(http.MethodGet, e.url+"/test/slow/p", nil)
			rq.Header.Set("Authorization", "Bearer "+e.reader)
			if resp, err := contract.Unchecked().Do(rq); err == nil {
				resp.Body.Close()
			}
		})
	}
	entered.Wait()
	resp, raw := e.read("/v1/pools/p/allocations")
	errorOf(t, "a third request in progress", resp, raw, http.StatusTooManyRequests, api.ReasonTooManyRequests)
	if resp.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	if resp, raw := e.request(http.MethodPost, "/v1/pools/p/events", `{"type":"demand","data":{"demands":{"/a":1}}}`, nil); resp.StatusCode != 200 {
		t.Errorf("the planner's append while the reader is at its bound: %d %s", resp.StatusCode, raw)
	}
	close(release)
	done.Wait()
	if resp, raw := e.read("/v1/pools/p/allocations"); resp.StatusCode != 200 {
		t.Errorf("once the two ended: %d %s", resp.StatusCode, raw)
	}

	// Live streams: one open; a second is refused; requests go on.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rq, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/v1/live?pool=p", nil)
	rq.Header.Set("Authorization", "Bearer "+e.reader)
	live, err := http.DefaultClient.Do(rq)
	if err != nil || live.StatusCode != 200 {
		t.Fatalf("a live stream: %v %v", err, live)
	}
	defer live.Body.Close()
	resp, raw = e.read("/v1/live?pool=p")
	errorOf(t, "a second live stream", resp, raw, http.StatusTooManyRequests, api.ReasonTooManyStreams)
	if resp, raw := e.read("/v1/pools/p/allocations"); resp.StatusCode != 200 {
		t.Errorf("a request while the stream is open: %d %s", resp.StatusCode, raw)
	}
}

// A request without a valid token is answered with Connection: close (no
// idle keep-alive connection for it to hold); one with a token is not.
func TestNoKeepAliveWithoutAToken(t *testing.T) {
	l := newLedger(t, testenv.NATS(t))
	for _, c := range []struct {
		path, token string
		closes      bool
	}{
		{"/healthz", "", true},
		{"/v1/status", "", true},
		{"/v1/status", "ldg_unknown", true},
		{"/v1/status", l.token, false},
	} {
		resp, _ := send(t, http.MethodGet, l.url+c.path, "", c.token, nil)
		if resp.Close != c.closes {
			t.Errorf("GET %s (token %v): Connection: close %v, want %v", c.path, c.token != "", resp.Close, c.closes)
		}
	}
}
