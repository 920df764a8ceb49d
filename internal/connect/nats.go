package connect

import (
	"context"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/redact"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// NATS connects to url and waits until the first connection is made,
// within the Waiter's bound. The connection then reconnects forever,
// logging each loss and recovery. extra adds options (the identity:
// natsauth.Option).
func (w *Waiter) NATS(ctx context.Context, url string, extra ...nats.Option) (*nats.Conn, error) {
	var mu sync.Mutex
	var last error // why the last connection attempt failed
	opts := append([]nats.Option{
		nats.Name(w.name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			mu.Lock()
			last = err
			mu.Unlock()
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: closed on purpose
				w.log.Warn(w.name+": NATS disconnected; reconnecting", "addr", redact.Conn(url), "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			w.log.Info(w.name+": NATS reconnected", "addr", c.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			w.log.Error(w.name+": NATS error", "err", err) // e.g. a permission violation
		}),
	}, extra...)
	nc, err := nats.Connect(url, opts...)
	if err != nil { // a malformed URL or option: waiting will not help
		return nil, fmt.Errorf("NATS %s: %w", redact.Conn(url), err)
	}
	// The connection retries in the background (every ReconnectWait);
	// this only watches it, often, so the service starts as soon as NATS
	// answers.
	err = w.retry(ctx, "NATS", url, func(context.Context) error {
		if nc.IsConnected() {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case last != nil:
			return last
		case nc.LastError() != nil:
			return nc.LastError()
		}
		return errNotYet
	}, func(time.Duration) time.Duration { return 50 * time.Millisecond })
	if err != nil {
		nc.Close()
		return nil, err
	}
	w.log.Info(w.name+": NATS connected", "addr", nc.ConnectedUrlRedacted())
	return nc, nil
}
