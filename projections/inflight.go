package projections

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A consumer's ack wait bounds how long a message may be held before
// NATS delivers it again. A live projector can hold a message longer
// than that without being slow to fold it. Partitioned, the ack wait is
// one pinned TTL (partitionAckWait): what a dead holder had in flight
// comes again as NATS unpins it, and a holder is held up behind a batch,
// a rebuild of the partition's pools (takeOver), a NATS request that
// waits out its timeout while the stream elects a leader, a PostgreSQL
// retry. Measured in TestClusterSurvivesLeaderAndProjectorLoss: the
// holder of a partition blocked 5 s in a stream info request after the
// stream leader's server died, and NATS delivered everything it held
// again every TTL, to the same instance, up to 3,691 deliveries for a
// 2,118-event log. Unpartitioned, the ack wait is 30 s: a batch whose
// commit PostgreSQL holds longer (a lock, a slow disk, an outage the
// writer retries through), or a pool's fold that takes that long, was
// delivered again at the next fetch to the projector still working on
// it (TestSlowFoldNotDeliveredAgain: the 20 messages of the held batch;
// TestSlowCommitNotDeliveredAgain: what waited on the commits).
//
// So the projector tells NATS it is still working on what it holds: each
// message delivered to it and not yet acknowledged (AckAll, after its
// commit) gets a work-in-progress ack (+WPI, which restarts its ack
// wait; replicated with the consumer's state) once it has been held for
// half the ack wait, and again every half ack wait after that. A
// partition's feed takes every message from the client as it comes (its
// buffer holds the consumer's MaxAckPending), so nothing waits unseen in
// the client's buffer; the unpartitioned projector's fetches return what
// they were delivered at once. A projector that dies or leaves a
// partition stops sending them: its messages come again one ack wait
// later, as before. Messages acknowledged within half the ack wait, the
// usual case, cost nothing. One implementation for both (decision 257).

// inFlight is what a projector (a partition's holder, or the
// unpartitioned projector) was delivered and has not acknowledged yet,
// by stream sequence.
type inFlight struct {
	ackWait time.Duration

	mu    sync.Mutex
	msgs  map[uint64]heldMsg
	acked uint64 // the highest stream sequence this instance acknowledged (AckAll)
}

type heldMsg struct {
	m       jetstream.Msg
	touched time.Time // delivered, or last told in progress
}

func newInFlight(ackWait time.Duration) *inFlight {
	return &inFlight{ackWait: ackWait, msgs: map[uint64]heldMsg{}}
}

// add records a message delivered to this instance (a redelivery
// replaces the earlier delivery of its sequence).
func (f *inFlight) add(m jetstream.Msg, now time.Time) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq := md.Sequence.Stream; seq > f.acked {
		f.msgs[seq] = heldMsg{m: m, touched: now}
	}
}

// ackedTo forgets every message up to seq: acknowledged (AckAll).
func (f *inFlight) ackedTo(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq <= f.acked {
		return
	}
	f.acked = seq
	for s := range f.msgs {
		if s <= seq {
			delete(f.msgs, s)
		}
	}
}

// reset forgets every message held: the consumer was made again, and
// delivers them again after the committed sequence (resetConsumer).
func (f *inFlight) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.msgs)
}

// drop forgets messages the fold let go unacknowledged (read from the
// stream again later): NATS may deliver them again.
func (f *inFlight) drop(msgs []jetstream.Msg) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range msgs {
		if md, err := m.Metadata(); err == nil {
			if h, ok := f.msgs[md.Sequence.Stream]; ok && h.m == m {
				delete(f.msgs, md.Sequence.Stream)
			}
		}
	}
}

// due returns the messages held for half the ack wait since they were
// delivered or last told in progress, and marks them told at now.
func (f *inFlight) due(now time.Time) []jetstream.Msg {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []jetstream.Msg
	for s, h := range f.msgs {
		if now.Sub(h.touched) >= f.ackWait/2 {
			out = append(out, h.m)
			h.touched = now
			f.msgs[s] = h
		}
	}
	return out
}

// held is how many messages are held.
func (f *inFlight) held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.msgs)
}

// keepAlive tells NATS, every quarter ack wait until done closes, that
// the messages held for half an ack wait are still being worked on.
func (f *inFlight) keepAlive(done <-chan struct{}) {
	t := time.NewTicker(max(f.ackWait/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			for _, m := range f.due(now) {
				_ = m.InProgress() // lost: the message comes again, and is skipped if folded
			}
		}
	}
}

// keepInFlightAlive gives the unpartitioned projector what it holds
// (p.inflight) and keeps it alive until the returned stop is called.
func (p *Projector) keepInFlightAlive() (stop func()) {
	p.inflight = newInFlight(p.cfg.ackWait)
	done, kept := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(kept)
		p.inflight.keepAlive(done)
	}()
	return func() { close(done); <-kept }
}

// maxAckPending is the consumers' MaxAckPending: how many messages may be
// delivered and not acknowledged at once: the batches the writer holds
// (three, pipeline.go) and the messages carried over and read ahead
// (fair.go readAhead). A fetch past it is not answered.
func (p *Projector) maxAckPending() int { return (3 + readAheadBatches) * p.cfg.batchSize }
