package connect

import (
	"context"
	"errors"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/redact"
	"log/slog"
	"time"
)

// DefaultWait is how long a service waits at start for its servers.
const DefaultWait = 2 * time.Minute

// ErrUnreachable means a server did not answer within the bound.
var ErrUnreachable = errors.New("not reachable")

// errNotYet is a wait's answer before any attempt has failed: nothing
// to report yet.
var errNotYet = errors.New("no attempt has finished yet")

// Backoff between attempts: from first, doubling up to most. A line is
// logged on the first failure and then at most every logEvery.
const (
	first    = 200 * time.Millisecond
	most     = 5 * time.Second
	logEvery = 5 * time.Second
	// attempt bounds one try (a ping, a JetStream call).
	attempt = 5 * time.Second
)

// Waiter connects a service to its servers. All its waits share one bound,
// counted from New: the service gets that long to find everything it
// needs.
type Waiter struct {
	name     string
	log      *slog.Logger
	wait     time.Duration
	deadline time.Time // zero: no bound
}

// New returns a Waiter for the service name (the prefix of its log
// lines) that gives up after wait; wait 0 waits until ctx ends.
func New(name string, log *slog.Logger, wait time.Duration) *Waiter {
	if log == nil {
		log = slog.Default()
	}
	w := &Waiter{name: name, log: log, wait: wait}
	if wait > 0 {
		w.deadline = time.Now().Add(wait)
	}
	return w
}

// Retry calls f until it succeeds, backing off from 200ms to 5s and
// logging while it fails. It gives up when the bound passes (an error
// matching ErrUnreachable and wrapping f's last error) or ctx ends (an
// error wrapping ctx.Err()). what names the server, addr its address
// (passwords are redacted from the log and the error).
func (w *Waiter) Retry(ctx context.Context, what, addr string, f func(context.Context) error) error {
	return w.retry(ctx, what, addr, f, func(d time.Duration) time.Duration { return min(2*d, most) })
}

// retry is Retry with the next delay computed by next from the last.
func (w *Waiter) retry(ctx context.Context, what, addr string, f func(context.Context) error, next func(time.Duration) time.Duration) error {
	start, delay := time.Now(), first
	var logged time.Time
	for {
		actx, cancel := w.attemptContext(ctx)
		err := f(actx)
		cancel()
		if err == nil {
			if !logged.IsZero() {
				w.log.Info(w.name+": "+what+" reachable", "addr", redact.Conn(addr), "waited", since(start))
			}
			return nil
		}
		if ctx.Err() != nil {
			return w.stopped(ctx, what, addr, err)
		}
		if w.expired() {
			return w.giveUp(what, addr, err)
		}
		if time.Since(logged) >= logEvery && !errors.Is(err, errNotYet) {
			w.waiting(what, addr, start, err)
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return w.stopped(ctx, what, addr, err)
		case <-time.After(w.capped(delay)):
		}
		delay = next(delay)
	}
}

func (w *Waiter) attemptContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := attempt
	if !w.deadline.IsZero() {
		d = min(d, max(time.Until(w.deadline), 10*time.Millisecond))
	}
	return context.WithTimeout(ctx, d)
}

// capped shortens a delay that would sleep past the bound, so the last
// attempt is made at the bound rather than skipped.
func (w *Waiter) capped(d time.Duration) time.Duration {
	if w.deadline.IsZero() {
		return d
	}
	return max(min(d, time.Until(w.deadline)), 0)
}

func (w *Waiter) expired() bool {
	return !w.deadline.IsZero() && !time.Now().Before(w.deadline)
}

// waiting is the progress line: what is awaited, where, for how long
// already, until when, and why the last attempt failed.
func (w *Waiter) waiting(what, addr string, start time.Time, err error) {
	limit := "none (until stopped)"
	if w.wait > 0 {
		limit = w.wait.String()
	}
	w.log.Warn(w.name+": "+what+" not reachable yet; waiting",
		"addr", redact.Conn(addr), "waited", since(start), "limit", limit, "err", redact.Error(err, addr))
}

func (w *Waiter) giveUp(what, addr string, err error) error {
	return fmt.Errorf("%s %s: %w after %v: %w", what, redact.Conn(addr), ErrUnreachable, w.wait, redact.Error(err, addr))
}

func (w *Waiter) stopped(ctx context.Context, what, addr string, err error) error {
	return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), redact.Error(err, addr))
}

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }
