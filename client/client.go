package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

// Client talks to one ledger. It is safe for concurrent use.
type Client struct {
	base     string
	token    string
	hc       *http.Client
	failFast bool
	wait     time.Duration
	// misconfigured says why no request can be sent (ErrMisconfigured),
	// or is nil.
	misconfigured error
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends token as the bearer token of every request (the
// LEDGER_TOKEN line of `ledger dev`, or one from `ledger token add`).
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc (for example with a TLS configuration trusting
// a private CA). Its Timeout bounds each attempt; the context of each
// call bounds the whole call, retries included.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetryWait sets how long to wait before sending a request again
// when the ledger's answer gives no Retry-After (default one second).
func WithRetryWait(d time.Duration) Option { return func(c *Client) { c.wait = d } }

// FailFastWhenDown returns ErrNoLedger at once, without retrying, when
// nothing listens at the ledger's address: what a command line wants (a
// wrong LEDGER_URL is not a wait). By default a refused connection is
// retried like a 503, since a ledger restarting refuses connections for
// a moment.
func FailFastWhenDown() Option { return func(c *Client) { c.failFast = true } }

// New returns a client of the ledger at baseURL (http://host:port).
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: &http.Client{Timeout: time.Minute}, wait: time.Second}
	for _, o := range opts {
		o(c)
	}
	c.misconfigured = checkSendable(c.base, c.token)
	return c
}

// NewEvent returns the event of a payload (events.Demand, events.Release,
// events.PlanChange, events.HostUp, events.HostDown) with a new random id.
func NewEvent(p events.Payload) (Event, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return Event{}, err
	}
	return Event{ID: NewID(), Type: string(p.EventType()), Data: data}, nil
}

// WithID returns the event with the given id: a producer that keeps its
// own ids (a job's id, say) makes its retries idempotent across restarts.
func (e Event) WithID(id string) Event { e.ID = id; return e }

// NewID returns a random event id (128 bits, hex).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Append sends events to pool and returns where each is in the log, in
// order: one event as an object, more as an array, which the ledger
// validates as a whole and appends atomically (all or none, contiguous).
// Events without an id get one here, and the request is encoded once:
// while the ledger answers 503 or cannot be reached, Append waits and
// sends the same bytes again until ctx ends, and the ledger stores each
// id once. A refusal (4xx) is returned at once as an *Error.
func (c *Client) Append(ctx context.Context, pool string, evs ...Event) ([]Appended, error) {
	if len(evs) == 0 {
		return nil, errors.New("append: no events")
	}
	evs = withIDs(evs)
	var body any = evs
	if len(evs) == 1 {
		body = evs[0]
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	var res AppendResponse
	if err := c.call(ctx, http.MethodPost, poolPath(pool, "events"), b, &res); err != nil {
		return nil, err
	}
	return res.Events, nil
}

func withIDs(evs []Event) []Event {
	out := make([]Event, len(evs))
	for i, e := range evs {
		if e.ID == "" {
			e.ID = NewID()
		}
		out[i] = e
	}
	return out
}

// Allocations reads a pool's projected state: every consumer's demand,
// shares and allocation, and the slots of each leaf on each host.
func (c *Client) Allocations(ctx context.Context, pool string) (*Allocations, error) {
	var a Allocations
	if err := c.call(ctx, http.MethodGet, poolPath(pool, "allocations"), nil, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// WaitProjected waits until the projection of pool holds the event at
// seq (an Appended's Seq) and returns the pool's allocations then; ctx
// bounds the wait. The projection follows the log within milliseconds.
func (c *Client) WaitProjected(ctx context.Context, pool string, seq uint64) (*Allocations, error) {
	for {
		a, err := c.Allocations(ctx, pool)
		if err != nil {
			return nil, err
		}
		if a.Seq >= seq {
			return a, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("pool %s is projected up to %d, not yet %d: %w", pool, a.Seq, seq, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Decisions reads a page of a pool's decisions, from those of the event
// at sequence fromSeq on (0: the first), at most limit of them (0: the
// ledger's default, 1000). A page never ends inside an event's
// decisions.
func (c *Client) Decisions(ctx context.Context, pool string, fromSeq uint64, limit int) (*DecisionsPage, error) {
	q := url.Values{}
	if fromSeq > 0 {
		q.Set("from_seq", strconv.FormatUint(fromSeq, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := poolPath(pool, "decisions")
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var page DecisionsPage
	if err := c.call(ctx, http.MethodGet, path, nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// AllDecisions iterates over a pool's decisions from those of the event
// at fromSeq on, reading page after page; an error ends the iteration.
func (c *Client) AllDecisions(ctx context.Context, pool string, fromSeq uint64) iter.Seq2[Decision, error] {
	return func(yield func(Decision, error) bool) {
		for {
			page, err := c.Decisions(ctx, pool, fromSeq, 0)
			if err != nil {
				yield(Decision{}, err)
				return
			}
			for _, d := range page.Decisions {
				if !yield(d, nil) {
					return
				}
			}
			if page.NextFromSeq == nil {
				return
			}
			fromSeq = *page.NextFromSeq
		}
	}
}

// Get reads the JSON document at path (with its query) into out, in one
// request, without retrying: for the endpoints this package has no
// method for (the console's, /v1/status, /healthz, /v1/openapi.json),
// whose 503 may be the answer itself (/healthz says "down" with one).
func (c *Client) Get(ctx context.Context, path string, out any) error {
	req, err := c.request(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	return c.do(req, out)
}

func poolPath(pool, what string) string { return "/v1/pools/" + url.PathEscape(pool) + "/" + what }

// call sends a request until it is answered (see retry) and decodes a 200
// answer into out.
func (c *Client) call(ctx context.Context, method, path string, body []byte, out any) error {
	return c.retry(ctx, func() error {
		req, err := c.request(ctx, method, path, body)
		if err != nil {
			return err
		}
		return c.do(req, out)
	})
}

// checkSendable says why no request to base with token could ever be
// sent, or nil: net/http refuses such a request before any I/O, the same
// way at every attempt.
func checkSendable(base, token string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		shown := base
		if at := strings.LastIndex(base, "@"); at >= 0 {
			// What comes before it may be a password the URL does not
			// mark as one (user:password@host, without a scheme).
			shown = "..." + base[at:]
		}
		return fmt.Errorf("%w: the ledger's address %q is not an http:// or https:// URL (want http://host:port)", ErrMisconfigured, shown)
	}
	for _, r := range token {
		// net/http's rule for a header value: no control character but
		// the tab.
		if (r < 0x20 && r != '\t') || r == 0x7f {
			return fmt.Errorf("%w: the token holds a control character (%U; a line end left from the file it was read from?)", ErrMisconfigured, r)
		}
	}
	return nil
}

func (c *Client) request(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	if c.misconfigured != nil {
		return nil, c.misconfigured
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMisconfigured, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// retry calls f until it succeeds, is refused (4xx), or ctx ends. A ledger
// answering 5xx, 429 (the token over its limits) or 408 (the body arrived
// too slowly: nothing was stored), a connection lost
// midway and (unless FailFastWhenDown) a connection refused are retried
// after Retry-After, or the retry wait. A request that cannot be sent
// (ErrMisconfigured) is not: it would fail the same way until ctx ends.
func (c *Client) retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		var e *Error
		switch {
		case err == nil:
			return nil
		case errors.As(err, &e) && e.Refused():
			return err
		case c.failFast && errors.Is(err, ErrNoLedger), errors.Is(err, ErrMisconfigured):
			return err
		case ctx.Err() != nil:
			return err
		}
		wait := c.wait
		if errors.As(err, &e) && e.RetryAfter > 0 {
			wait = e.RetryAfter
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		case <-time.After(wait):
		}
	}
}

func (c *Client) do(req *http.Request, out any) error {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%w at %s (connection refused): is the ledger running, and is LEDGER_URL right?", ErrNoLedger, c.base)
	}
	if err != nil {
		return fmt.Errorf("ledger at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("ledger at %s: %w", c.base, err)
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("ledger at %s: %s %s: the answer: %w", c.base, req.Method, req.URL.Path, err)
		}
		return nil
	}
	e := &Error{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	var body ErrorBody
	if json.Unmarshal(raw, &body) == nil && body.Reason != "" {
		e.Code, e.Message, e.Index = Code(body.Reason), body.Error, body.Index
	} else {
		e.Code, e.Message = Code(http.StatusText(resp.StatusCode)), strings.TrimSpace(string(raw))
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}
