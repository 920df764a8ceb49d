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
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/api"
)

// Client talks to one ledger.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends token as the bearer token of every request (the
// LEDGER_TOKEN line of `ledger dev`, or one from `ledger token add`).
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc (for example with a TLS configuration trusting
// a private CA).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client of the ledger at baseURL (http://host:port).
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: &http.Client{Timeout: time.Minute}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// ErrNoLedger is returned at once, without retrying, when nothing
// listens at the ledger's address: a wrong LEDGER_URL or a ledger that is
// not running does not become a 30-second wait.
var ErrNoLedger = errors.New("no ledger listening")

// Error is an answer other than 200.
type Error struct {
	Status     int
	RetryAfter time.Duration
	api.ErrorResponse
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%d %s: %s", e.Status, e.Reason, e.ErrorResponse.Error)
	if e.Index != nil {
		msg += fmt.Sprintf(" (event %d)", *e.Index)
	}
	if e.Status == http.StatusUnauthorized {
		msg += " (set LEDGER_TOKEN or --ledger-token: `ledger dev` prints one)"
	}
	return msg
}

// Refused reports whether the ledger refused the request as invalid (4xx):
// sending it again will not help.
func (e *Error) Refused() bool { return e.Status >= 400 && e.Status < 500 }

// IsRefused reports whether err is a refusal of the request.
func IsRefused(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Refused()
}

// Event builds an event request from a payload.
func Event(p events.Payload, id, producer string) (api.EventRequest, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return api.EventRequest{}, err
	}
	return api.EventRequest{ID: id, Type: string(p.EventType()), Producer: producer, Data: data}, nil
}

// NewID returns a random event id (128 bits, hex).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Append sends events (one is sent as an object, more as an array) and
// returns where they are in the log. Events without an id get one here,
// so that Append can retry: while the ledger answers 503 (NATS down,
// busy) or cannot be reached, it waits and sends the same events again
// until ctx ends.
func (c *Client) Append(ctx context.Context, pool string, evs ...api.EventRequest) ([]api.Appended, error) {
	if len(evs) == 0 {
		return nil, errors.New("no events")
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
	var res api.EventsResponse
	if err := c.retry(ctx, func() error { return c.post(ctx, "/v1/pools/"+url.PathEscape(pool)+"/events", b, &res) }); err != nil {
		return nil, err
	}
	return res.Events, nil
}

func withIDs(evs []api.EventRequest) []api.EventRequest {
	out := make([]api.EventRequest, len(evs))
	for i, e := range evs {
		if e.ID == "" {
			e.ID = NewID()
		}
		out[i] = e
	}
	return out
}

// retry calls f until it succeeds, is refused, or ctx ends. A refused
// connection is not retried (ErrNoLedger); a ledger answering 503 or a
// connection lost midway are.
func (c *Client) retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		var e *Error
		switch {
		case err == nil:
			return nil
		case errors.As(err, &e) && e.Refused():
			return err
		case errors.Is(err, ErrNoLedger):
			return err
		case ctx.Err() != nil:
			return err
		}
		wait := time.Second
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

func (c *Client) post(ctx context.Context, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req, out)
}

// Get reads a JSON document from the API (path with query).
func (c *Client) Get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	return c.do(req, out)
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
		return json.Unmarshal(raw, out)
	}
	e := &Error{Status: resp.StatusCode}
	if json.Unmarshal(raw, &e.ErrorResponse) != nil || e.Reason == "" {
		e.ErrorResponse = api.ErrorResponse{Error: strings.TrimSpace(string(raw)), Reason: http.StatusText(resp.StatusCode)}
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}
