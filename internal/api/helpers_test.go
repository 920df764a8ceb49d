package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/contract"
	"github.com/cluster-ledger/ledger/internal/natsauth"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestMain doubles as the attacker of TestConnectionFloodDoesNotStopAProducer
// (floodChild), a process of its own as an attacker's would be.
func TestMain(m *testing.M) {
	if floodChild() {
		return
	}
	testenv.Main(m, contract.InstallDefault)
}

// ledger is one api.Server behind httptest, with its own NATS connection
// (as a separate ledger process would have).
type ledger struct {
	t     *testing.T
	nc    *nats.Conn
	js    jetstream.JetStream
	srv   *api.Server
	url   string
	token string // an admin token (every scope, every pool), named admin
}

func newLedger(t *testing.T, natsURL string, opts ...api.Option) *ledger {
	t.Helper()
	// The ledger's own identity: its rights are enough for everything
	// the API does.
	nc := testenv.Connect(t, natsURL, natsauth.Ledger)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	token, tokens := testenv.AdminToken(t)
	srv, err := api.New(ctx, js, nil, append([]api.Option{api.WithPublishTimeout(2 * time.Second), api.WithTokens(tokens)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &ledger{t: t, nc: nc, js: js, srv: srv, url: hs.URL, token: token}
}

// request sends a request with the ledger's token and JSON content type,
// then any header of hdr (an empty value removes the header).
func (l *ledger) request(method, path, body string, hdr map[string]string) (*http.Response, []byte) {
	l.t.Helper()
	return send(l.t, method, l.url+path, body, l.token, hdr)
}

func send(t testing.TB, method, url, body, token string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	rq, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		rq.Header.Set("Authorization", "Bearer "+token)
	}
	if method == http.MethodPost {
		rq.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if v == "" {
			rq.Header.Del(k)
		} else {
			rq.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

// post sends body (marshalled unless it is a string) and decodes the answer.
func (l *ledger) post(pool string, body any) (int, client.AppendResponse, client.ErrorBody) {
	l.t.Helper()
	b, ok := body.(string)
	if !ok {
		raw, err := json.Marshal(body)
		if err != nil {
			l.t.Fatal(err)
		}
		b = string(raw)
	}
	resp, raw := l.request(http.MethodPost, "/v1/pools/"+pool+"/events", b, nil)
	var ok200 client.AppendResponse
	var bad client.ErrorBody
	if resp.StatusCode == http.StatusOK {
		mustUnmarshal(l.t, raw, &ok200)
	} else {
		mustUnmarshal(l.t, raw, &bad)
		if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
			l.t.Errorf("503 without Retry-After: %s", raw)
		}
	}
	return resp.StatusCode, ok200, bad
}

// mustPost posts and fails the test unless the answer is 200.
func (l *ledger) mustPost(pool string, body any) client.AppendResponse {
	l.t.Helper()
	code, res, bad := l.post(pool, body)
	if code != http.StatusOK {
		l.t.Fatalf("POST %s: %d %+v", pool, code, bad)
	}
	return res
}

func mustUnmarshal(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
}

func ev(typ string, data any) map[string]any { return map[string]any{"type": typ, "data": data} }

func withID(m map[string]any, id string) map[string]any { m["id"] = id; return m }

func plan(consumers ...map[string]any) map[string]any {
	return ev("plan", map[string]any{"plan": map[string]any{"consumers": consumers}})
}

func consumer(path string) map[string]any { return map[string]any{"path": path} }

func hostUp(name string, slots int) map[string]any {
	return ev("host_up", map[string]any{"host": name, "slots": slots})
}

func demand(d map[string]int) map[string]any { return ev("demand", map[string]any{"demands": d}) }

func release(c string, slots int) map[string]any {
	return ev("release", map[string]any{"consumer": c, "slots": slots})
}

// setup gives pool a plan (/a, /b, /p/x, /p/y) and one host of 10 slots.
func setup(l *ledger, pool string) {
	l.t.Helper()
	l.mustPost(pool, []any{
		plan(consumer("/a"), consumer("/b"), consumer("/p/x"), consumer("/p/y")),
		hostUp("h1", 10),
	})
}

// storedEvent is a stream message of a pool, decoded.
type storedEvent struct {
	seq     uint64
	subject string
	header  nats.Header
	stored  stream.Stored
}

// poolEvents reads every stored event of pool, in order.
func poolEvents(t *testing.T, js jetstream.JetStream, pool string) []storedEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	var out []storedEvent
	for seq := uint64(1); ; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(stream.PoolFilter(pool)))
		if err != nil {
			if err == jetstream.ErrMsgNotFound || isNotFound(err) {
				return out
			}
			t.Fatal(err)
		}
		sd, err := stream.DecodeRaw(m.Sequence, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		// The subject published (and signed): the stream stores it with
		// the pool's partition (internal/stream tests that form).
		out = append(out, storedEvent{seq: m.Sequence, subject: stream.Published(m.Subject), header: m.Header, stored: sd})
		seq = m.Sequence + 1
	}
}

func isNotFound(err error) bool {
	var je jetstream.JetStreamError
	return errorsAs(err, &je) && je.APIError() != nil && je.APIError().Code == 404
}

// streamMsgs is the number of messages in the stream.
func streamMsgs(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	return testenv.StreamState(t, js).Msgs
}

// fixedClock is a settable clock.
type fixedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fixedClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fixedClock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

func errorsAs(err error, target any) bool { return errors.As(err, target) }
