package contract

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Transport wraps rt (nil: http.DefaultTransport) so that c checks every
// answer it brings. An event stream is checked on its head only.
func (c *Checker) Transport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return roundTripper{c: c, rt: rt}
}

type roundTripper struct {
	c  *Checker
	rt http.RoundTripper
}

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.c.Check(req, resp.StatusCode, resp.Header, nil)
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxChecked))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("contract: read the answer: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if req.Method != http.MethodHead {
		t.c.Check(req, resp.StatusCode, resp.Header, body)
	}
	return resp, nil
}

// unchecked is http.DefaultTransport as it was before InstallDefault.
var unchecked = http.DefaultTransport

// Unchecked is a client whose answers are not checked: for what is no
// answer of the API (a handler a test mounts itself, the TLS layer's
// answer to plain HTTP).
func Unchecked() *http.Client { return &http.Client{Transport: unchecked} }

// InstallDefault makes http.DefaultTransport check every answer it
// brings (every http.Get, http.DefaultClient, and client with no
// transport of its own, in this test binary), and returns the checker.
// For testenv.Main: its cleanup fails the binary on a violation.
func InstallDefault() (cleanup func() error, err error) {
	c, err := New()
	if err != nil {
		return nil, err
	}
	prev := http.DefaultTransport
	http.DefaultTransport = c.Transport(prev)
	return func() error {
		http.DefaultTransport = prev
		return c.Err()
	}, nil
}
