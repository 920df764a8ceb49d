package projections

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// NATS requests from the projector's loops.
//
// A request about the stream or a consumer (its info, a consumer made,
// reset or unpinned, the stream leader's message get) is answered by
// that stream's or consumer's leader. While it elects one (its server
// died, restarted or stepped down), or when the connection is cut with
// the request on its way, no answer ever comes, and the request waits
// out its timeout: nats.go's default, 5 s. A partition's loop waited
// that long with nothing folded while its feed filled up, and every
// partition rebuilt at a take-over behind the heal lock, held across
// such a request (TestPartitionsGoOnWhileTheStreamElectsALeader:
// partitions stalled 4.9-6.3 s after the stream leader's server was
// shut down, whose leadership moved within milliseconds).
//
// So every such request carries a deadline: requestTimeout at first (an
// answer takes milliseconds; one that has not come in a second was
// lost), doubled after each request of the projector that timed out in
// a row, up to maxRequestTimeout (nats.go's default), so that a server
// slow to answer, not silent, is waited for as before. A request the
// projector cannot go on without is asked again with backoff (retry:
// 100 ms, doubling, up to 5 s); one that only keeps a quiet partition's
// offset moving (advanceQuiet, watchStall) is asked again at the next
// idle spell. The heal lock is taken only to heal a stream found behind,
// never across a request of a stream that is not. The partition's
// in-progress acks (inflight.go) and the other partitions run beside
// the loop and never wait for it (decision 258).
const (
	requestTimeout    = time.Second
	maxRequestTimeout = 5 * time.Second
)

// request runs one NATS request f of p with p's request timeout.
func request[T any](ctx context.Context, p *Projector, f func(context.Context) (T, error)) (T, error) {
	wait := min(requestTimeout<<min(p.requestsTimedOut.Load(), 3), maxRequestTimeout)
	rctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	v, err := f(rctx)
	if err != nil && rctx.Err() != nil && ctx.Err() == nil { // its own deadline, not the caller's end
		p.requestsTimedOut.Add(1)
	} else {
		p.requestsTimedOut.Store(0) // answered
	}
	return v, err
}

// errConsumerRefused: NATS refused the projector's identity a request
// about its durable consumer (the name is not one the identity may
// manage).
var errConsumerRefused = errors.New("NATS refuses this identity the consumer")

// consumerRefused turns err, a failed request about the consumer name,
// into one saying why when the server refused it to the identity: such a
// request is never answered (nats.go reports the refusal apart, as the
// connection's last error) and only timed out, so a projector started
// with a --name or --partitions its NATS identity was not made for
// retried "delete consumer X: context deadline exceeded" forever
// (decision 506). It still retries (a reloaded server configuration lets
// it on), saying why at each attempt.
func (p *Projector) consumerRefused(err error, name string) error {
	if err == nil {
		return nil
	}
	last := p.js.Conn().LastError()
	if !errors.Is(last, nats.ErrPermissionViolation) || !strings.Contains(last.Error(), "."+stream.Name+"."+name+`"`) {
		return err
	}
	return fmt.Errorf("%w %s (%v): the projector's NATS identity may manage only the consumers of the projector name and the "+
		"partition counts it was made for (ledger nats init --projector-name, --max-partitions; ledger dev: name %q, up to %d partitions): "+
		"start with those, or write the NATS configuration again for this --name and --partitions and reload nats-server (README, NATS identities)",
		errConsumerRefused, name, last, natsauth.DefaultLayout.Name, natsauth.DefaultLayout.MaxPartitions)
}
