package projections

import (
	"context"
	"runtime"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// Decoding and authenticating ahead of the fold.
//
// Checking an event's Ed25519 signature costs tens of microseconds, ten
// times what folding it does: one at a time in the fold's goroutine it
// would cap every signed reader at one core's verify rate. A fold is
// sequential per pool, but decoding a stored message and checking its
// signature depend on nothing before it, so every reader (the projector's
// batches, its rebuilds and catch-ups, replay and audit, the API's
// catch-up) decodes and authenticates a run of messages over all the
// cores first (DecodeAll, ReadDecoded), then folds them in order. What is
// checked, and how, is Authenticate's, unchanged: the same function on
// the same bytes, only sooner and side by side.

// Decoded is a stored message decoded and authenticated ahead of its
// fold.
type Decoded struct {
	stream.Msg
	// Pool and Stored are DecodeMessage's, Stored.Gate set by
	// Authenticate; OK is false for a subject that names no pool.
	Pool   string
	Stored stream.Stored
	OK     bool
	// Passed: the reader did not want the message (another partition's
	// pool), so it was neither decoded nor authenticated.
	Passed bool
	// Delivery is the consumer's delivery sequence of a fetched
	// message delivered for the first time; 0 for a redelivery and for
	// a message read from the stream.
	Delivery uint64
	// Err is Authenticate's error: the historical keys could not be read
	// (signing.ErrHistory), so the event is neither accepted nor refused;
	// the reader must not fold it, and reads it again later.
	Err error
}

// Decode decodes m and checks its signature against keys (nil: none
// checked), as the fold's gate does; want (nil: every message) passes
// over the messages a reader has no use for.
func Decode(keys *signing.Keyring, want func(subject string) bool, m stream.Msg) Decoded {
	if want != nil && !want(m.Subject) {
		return Decoded{Msg: m, Passed: true}
	}
	pool, st, ok := DecodeMessage(m.Seq, m.Subject, m.Time, m.Data)
	err := Authenticate(keys, &st, m.Subject, m.Header, m.Data)
	st.Predecode() // the payload too, here rather than in the fold
	return Decoded{Msg: m, Pool: pool, Stored: st, OK: ok, Err: err}
}

// parallelFrom is the run of messages from which decoding without
// signatures is worth spreading over the cores (a decode is about a
// microsecond; a signature check tens of them).
const parallelFrom = 256

// DecodeAll is Decode of every message of msgs into out (len(out) ==
// len(msgs)), over the cores.
func DecodeAll(keys *signing.Keyring, want func(string) bool, msgs []stream.Msg, out []Decoded) {
	workers := runtime.GOMAXPROCS(0)
	if keys == nil && len(msgs) < parallelFrom {
		workers = 1
	}
	workers = min(workers, len(msgs))
	if workers <= 1 {
		for i := range msgs {
			out[i] = Decode(keys, want, msgs[i])
		}
		return
	}
	var wg sync.WaitGroup
	per := (len(msgs) + workers - 1) / workers
	for lo := 0; lo < len(msgs); lo += per {
		hi := min(lo+per, len(msgs))
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				out[i] = Decode(keys, want, msgs[i])
			}
		})
	}
	wg.Wait()
}

// decodeChunk is how many messages ReadDecoded hands a worker at once.
const decodeChunk = 256

// ReadDecoded reads the stream's messages matching filter from sequence
// from to to (stream.Read: direct gets, no consumer) and calls fn with
// each, decoded and authenticated against keys, in order. Decoding and
// checking signatures run ahead of fn, a chunk per core at a time, while
// fn folds; at most a few chunks per core are held. fn's first error
// ends the read and is returned.
func ReadDecoded(ctx context.Context, nc *nats.Conn, keys *signing.Keyring, want func(string) bool, filter string, from, to uint64, fn func(*Decoded) error) error {
	if from < 1 {
		from = 1
	}
	if from > to {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type job struct {
		msgs []stream.Msg
		out  []Decoded
		done chan struct{}
	}
	workers := runtime.GOMAXPROCS(0)
	ordered := make(chan *job, 2*workers) // in the stream's order, for fn
	work := make(chan *job, 2*workers)    // the same jobs, for the workers
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range work {
				for i := range j.msgs {
					j.out[i] = Decode(keys, want, j.msgs[i])
				}
				close(j.done)
			}
		})
	}
	readErr := make(chan error, 1)
	go func() {
		defer close(ordered)
		defer close(work)
		var msgs []stream.Msg
		send := func() error {
			j := &job{msgs: msgs, out: make([]Decoded, len(msgs)), done: make(chan struct{})}
			msgs = nil
			select { // ordered first: a job is waited for only once it is queued for a worker
			case ordered <- j:
			case <-ctx.Done():
				return ctx.Err()
			}
			work <- j // a worker takes it, or one that finished does: never blocked for good
			return nil
		}
		err := stream.Read(ctx, nc, filter, from, to, func(m stream.Msg) error {
			msgs = append(msgs, m)
			if len(msgs) == decodeChunk {
				return send()
			}
			return nil
		})
		if err == nil && len(msgs) > 0 {
			err = send()
		}
		readErr <- err
	}()
	var ferr error
	for j := range ordered {
		<-j.done
		if ferr != nil {
			continue // drain: the reader and the workers stop on the cancel
		}
		for i := range j.out {
			if ferr = fn(&j.out[i]); ferr != nil {
				cancel()
				break
			}
		}
	}
	wg.Wait()
	if err := <-readErr; ferr == nil {
		return err
	}
	return ferr
}
