package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/events"
)

// A client whose address or token can never be sent (LEDGER_URL without
// its scheme, a token read from a file with a CRLF line end) fails at
// once with ErrMisconfigured, naming what is wrong, and appends nothing:
// retrying the same bytes cannot help, so a producer must not wait out
// its context (forever, with context.Background) for it. The producer's
// own token, against the running ledger of this package's tests.
func TestMisconfiguredClientFailsAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const pool = "misconfigured-client"
	setUp(ctx, pool)
	hostPort := strings.TrimPrefix(ledgerURL, "http://")
	cases := []struct {
		name, url, token, says string
	}{
		{"no scheme, an IP address", hostPort, producerToken, "not an http:// or https:// URL"},
		{"no scheme, a host name", "localhost:" + hostPort[strings.LastIndex(hostPort, ":")+1:], producerToken, "not an http:// or https:// URL"},
		{"another scheme", "ftp://" + hostPort, producerToken, "not an http:// or https:// URL"},
		{"a password without a scheme", "user:secret-password@" + hostPort, producerToken, `"...@` + hostPort + `" is not an http:// or https:// URL`},
		{"a bad escape", ledgerURL + "/%zz", producerToken, "not an http:// or https:// URL"},
		{"a CRLF line end on the token", ledgerURL, producerToken + "\r\n", "control character"},
		{"a CR on the token", ledgerURL, producerToken + "\r", "control character"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := client.New(tc.url, client.WithToken(tc.token))
			ev, err := client.NewEvent(&events.Demand{Demands: map[string]int64{"/eng/dev": 3}})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = c.Append(ctx, pool, ev)
			took := time.Since(start)
			if !errors.Is(err, client.ErrMisconfigured) {
				t.Fatalf("Append: %v, want ErrMisconfigured", err)
			}
			if took > 2*time.Second {
				t.Errorf("Append took %v to fail: it retried what cannot be sent", took)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if strings.Contains(err.Error(), producerToken) || strings.Contains(err.Error(), "secret-password") {
				t.Errorf("error %q shows a secret", err)
			}
			// Reads fail the same way, and at once.
			start = time.Now()
			if _, err := c.Allocations(ctx, pool); !errors.Is(err, client.ErrMisconfigured) || time.Since(start) > 2*time.Second {
				t.Errorf("Allocations: %v after %v, want ErrMisconfigured at once", err, time.Since(start))
			}
		})
	}
	// Nothing was appended: the pool holds the plan and the host only,
	// and no demand.
	reader := client.New(ledgerURL, client.WithToken(readerToken))
	a, err := reader.Allocations(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range a.Consumers {
		if c.Demand != 0 {
			t.Errorf("%s has demand %d: a misconfigured client appended", c.Path, c.Demand)
		}
	}
	// A well-configured client still gets through.
	if _, err := client.New(ledgerURL, client.WithToken(producerToken)).Append(ctx, pool, mustEvent(t, &events.Demand{Demands: map[string]int64{"/eng/dev": 3}})); err != nil {
		t.Fatal(err)
	}
}

func mustEvent(t *testing.T, p events.Payload) client.Event {
	t.Helper()
	ev, err := client.NewEvent(p)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}
