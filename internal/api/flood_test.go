package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/metrics"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// served is the API as `ledger serve` runs it (api.Serve: its listener,
// connection bounds and timeouts), with a planner's, a producer's and a
// Prometheus token.
type served struct {
	url                        string
	natsURL                    string
	planner, producer, scraper string
}

func serve(t *testing.T, conns api.ConnLimits, opts ...api.Option) *served {
	t.Helper()
	planner, pe := mustToken(t, "planner", []auth.Scope{auth.ScopePlan}, "p")
	producer, re := mustToken(t, "scheduler", []auth.Scope{auth.ScopeAppend}, "p")
	scraper, me := mustToken(t, "prometheus", []auth.Scope{auth.ScopeMetrics}, auth.AllPools)
	tokens, err := auth.New(pe, re, me)
	if err != nil {
		t.Fatal(err)
	}
	natsURL, dbURL := testenv.NATS(t), testenv.Postgres(t)
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- api.Serve(ctx, api.ServeConfig{HTTPAddr: "127.0.0.1:0", NATSURL: natsURL, NATSCreds: testenv.Creds(t, natsURL, natsauth.Ledger),
			DatabaseURL: dbURL, Migrate: true, Conns: conns, Logger: slog.New(slog.DiscardHandler),
			Options: append([]api.Option{api.WithTokens(tokens), api.WithMetrics(metrics.New())}, opts...),
			Ready:   func(a string) { ready <- a }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case a := <-ready:
		s := &served{url: "http://" + a, natsURL: natsURL, planner: planner, producer: producer, scraper: scraper}
		c := client.New(s.url, client.WithToken(planner))
		plan, _ := client.NewEvent(&events.PlanChange{Plan: events.Plan{Consumers: []events.Consumer{{Path: "/a"}, {Path: "/b"}}}})
		host, _ := client.NewEvent(&events.HostUp{Host: "h1", Slots: 1000})
		if _, err := c.Append(context.Background(), "p", plan, host); err != nil {
			t.Fatal(err)
		}
		return s
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the API did not start within 60s")
	}
	return nil
}

// The attacker runs in a process of its own (the test binary again, as
// floodChild), as it would: its connections' descriptors and goroutines
// are not the server's.
const (
	floodAddrEnv  = "LEDGER_TEST_FLOOD_ADDR"
	floodConnsEnv = "LEDGER_TEST_FLOOD_CONNS"
)

// startFlood starts the attacker process holding n connections to addr.
func startFlood(t *testing.T, addr string, n int) *osexec.Cmd {
	t.Helper()
	cmd := osexec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), floodAddrEnv+"="+addr, floodConnsEnv+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // closed by the test's end: the flood stops
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// floodChild is the attacker when the test binary is started as one: it
// holds the connections until its stdin closes, then exits.
func floodChild() bool {
	addr := os.Getenv(floodAddrEnv)
	if addr == "" {
		return false
	}
	n, _ := strconv.Atoi(os.Getenv(floodConnsEnv))
	stop := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	flood(addr, n, stop)
	return true
}

// flood holds n connections to addr open without a token until stop, each
// opened again a second after the server closes it (as slowloris tools
// hold their connections), in one of three ways: silent (connect and send
// nothing), keep-alive (a request without a token, then idle) and
// slowloris (headers one byte every half second). An attacker that
// reconnects as fast as the CPU allows is a CPU flood, which no bound on
// connections turns away: that takes a limit on connection attempts per
// source in front of the server (README, "HTTP limits").
func flood(addr string, n int, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for {
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err == nil {
					hold(c, i%3, stop)
					c.Close()
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
				}
			}
		})
	}
	wg.Wait()
}

// hold keeps c busy in its way until the server closes it or stop.
func hold(c net.Conn, way int, stop <-chan struct{}) {
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-stop:
			c.Close()
		case <-done:
		}
	}()
	switch way {
	case 1: // a request without a token, then idle on keep-alive
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: ledger\r\nConnection: keep-alive\r\n\r\n")
		_, _ = io.Copy(io.Discard, c) // until the server closes it
	case 2: // slowloris: one header byte every half second
		fmt.Fprintf(c, "GET /v1/pools HTTP/1.1\r\nHost: ledger\r\n")
		for {
			if _, err := c.Write([]byte("X")); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	default: // silent
		_, _ = c.Read(make([]byte, 1))
	}
}

// appendLatencies appends n demands one after the other as the producer
// does: on its keep-alive connection, and every fifth on a new one. A
// new connection may meet the flood before its first request is read: if
// the server closes it for a newer one, the producer sends again on
// another, as the client library does with a connection lost midway
// (same id: stored once). It returns each append's latency, retries
// included, and how many were sent again.
func (s *served) appendLatencies(t *testing.T, n int) (out []time.Duration, resent int) {
	t.Helper()
	keep := &http.Client{Timeout: 30 * time.Second}
	fresh := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range n {
		hc := keep
		if i%5 == 4 {
			hc = fresh
		}
		body := fmt.Sprintf(`{"id":"d-%d-%s","type":"demand","data":{"demands":{"/a":%d,"/b":%d}}}`, i, client.NewID(), i%40, i%25)
		start := time.Now()
		for try := 0; ; try++ {
			rq, _ := http.NewRequest(http.MethodPost, s.url+"/v1/pools/p/events", strings.NewReader(body))
			rq.Header.Set("Authorization", "Bearer "+s.producer)
			rq.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(rq)
			if err != nil {
				if try < 5 && hc == fresh {
					resent++
					continue
				}
				t.Fatalf("append %d: %v", i, err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("append %d: %d %s", i, resp.StatusCode, raw)
			}
			break
		}
		out = append(out, time.Since(start))
	}
	return out, resent
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

// A flood of connections without a token (thousands: silent, idle
// keep-alive after a request, slowloris headers), more than the server's
// connection budget, while a producer with a token appends: its appends
// stay within their usual latency (a bound asserted), the flood holds at
// most the unauthenticated share of the budget (the oldest are closed),
// and NATS, whose connections the budget leaves out, still takes a new
// client.
func TestConnectionFloodDoesNotStopAProducer(t *testing.T) {
	const budget, unauth, floodConns = 1200, 600, 3000
	s := serve(t, api.ConnLimits{Max: budget, Unauthenticated: unauth})
	addr := strings.TrimPrefix(s.url, "http://")
	quiet, _ := s.appendLatencies(t, 100)
	baseP50, baseP99 := quantile(quiet, .5), quantile(quiet, .99)

	startFlood(t, addr, floodConns)
	// At full strength: the server holds its share of the flood's
	// connections and closes the oldest for the newest.
	deadline := time.Now().Add(60 * time.Second)
	for {
		fams := scrapeMetrics(t, s.url, s.scraper)
		if fams[`ledger_http_connections{state="unauthenticated"}`] >= unauth*9/10 && fams["ledger_http_connections_evicted_total"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the flood did not reach the server's unauthenticated bound in 60s: %v unauthenticated, %v evicted",
				fams[`ledger_http_connections{state="unauthenticated"}`], fams["ledger_http_connections_evicted_total"])
		}
		time.Sleep(100 * time.Millisecond)
	}
	loud, resent := s.appendLatencies(t, 200)
	p50, p99 := quantile(loud, .5), quantile(loud, .99)
	// The producer's bound: its usual latency, with room for the two
	// cores the attacker's process shares with it (and with whatever else
	// the machine runs).
	bound := max(20*baseP99, time.Second)
	t.Logf("appends without flood: p50 %v p99 %v; with %d flood connections: p50 %v p99 %v max %v (bound %v); %d of 40 on new connections sent again",
		baseP50, baseP99, floodConns, p50, p99, slices.Max(loud), bound, resent)
	if p99 > bound {
		t.Errorf("under the flood the producer's p99 is %v, want at most %v", p99, bound)
	}

	// NATS, outside the HTTP budget, takes a new client.
	nc, err := nats.Connect(s.natsURL, nats.Timeout(5*time.Second), mustNkey(t, s.natsURL))
	if err != nil {
		t.Errorf("NATS refused a new client during the HTTP flood: %v", err)
	} else {
		nc.Close()
	}

	// The server's own account: the flood held at most its share, and
	// the oldest of it were closed for the newest.
	fams := scrapeMetrics(t, s.url, s.scraper)
	open := fams["ledger_http_connections{state=\"unauthenticated\"}"]
	evicted := fams["ledger_http_connections_evicted_total"]
	t.Logf("server: %v unauthenticated connections open (at most %d), %v closed to make room", open, unauth, evicted)
	if open > unauth || evicted == 0 {
		t.Errorf("unauthenticated connections %v (bound %d), evicted %v (want some: the flood exceeds the bound)", open, unauth, evicted)
	}
	if m := fams["ledger_http_connections_max"]; m != budget {
		t.Errorf("ledger_http_connections_max %v, want %d", m, budget)
	}
}

// mustNkey is the auditor's identity (any identity NATS knows will do).
func mustNkey(t *testing.T, url string) nats.Option {
	t.Helper()
	o, err := natsauth.Option(testenv.Creds(t, url, natsauth.Auditor))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// scrapeMetrics reads /metrics in the text format into series -> value.
func scrapeMetrics(t *testing.T, base, token string) map[string]float64 {
	t.Helper()
	rq, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	rq.Header.Set("Authorization", "Bearer "+token)
	rq.Header.Set("Accept", "text/plain")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[i+1:], &v); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// One token cannot hold the connections every other client needs (an
// outside attack: a read token for one pool kept 17,788 authenticated
// idle connections open and every producer's append timed out). Past
// TokenLimits.Conns, a connection the token authenticates is answered
// and closed; the producer's appends go on.
func TestOneTokenCannotHoldTheConnections(t *testing.T) {
	const budget, unauth, perToken, flood = 600, 300, 20, 500
	limits := api.DefaultTokenLimits
	limits.Rate, limits.Conns = 0, perToken
	s := serve(t, api.ConnLimits{Max: budget, Unauthenticated: unauth}, api.WithTokenLimits(limits))
	addr := strings.TrimPrefix(s.url, "http://")
	closed := 0
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range flood {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		// A request with the token (it lacks the read scope: 403, after
		// the token is known), then the connection kept idle.
		fmt.Fprintf(c, "GET /v1/pools/p/allocations HTTP/1.1\r\nHost: ledger\r\nAuthorization: Bearer %s\r\n\r\n", s.scraper)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("the token's request: %v", err)
		}
		resp.Body.Close()
		if resp.Close {
			closed++
		}
	}
	fams := scrapeMetrics(t, s.url, s.scraper)
	authed := fams[`ledger_http_connections{state="authenticated"}`]
	t.Logf("%d of %d connections of one token closed after their answer; %v authenticated connections open", closed, flood, authed)
	if closed < flood-perToken || authed > perToken+5 {
		t.Fatalf("one token holds %v authenticated connections (bound %d); %d of %d closed after their answer", authed, perToken, closed, flood)
	}
	lat, _ := s.appendLatencies(t, 50)
	if p99 := quantile(lat, .99); p99 > 5*time.Second {
		t.Errorf("the producer's appends beside the token's connections: p99 %v", p99)
	}
}
