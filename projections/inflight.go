package projections

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A partition consumer's ack wait is one pinned TTL (partitionAckWait):
// what a dead holder had in flight comes again as NATS unpins it. A live
// holder can hold a message longer than that without being slow to fold
// it: behind a batch, a rebuild of the partition's pools (takeOver), a
// NATS request that waits out its timeout while the stream elects a
// leader (advanceQuiet, watchStall), a PostgreSQL retry. Measured in
// TestClusterSurvivesLeaderAndProjectorLoss: the holder of a partition
// blocked 5 s in a stream info request after the stream leader's server
// died, and NATS delivered everything it held again every TTL, to the
// same instance, up to 3,691 deliveries for a 2,118-event log.
//
// So the instance tells NATS it is still working on what it holds: each
// message delivered to it and not yet acknowledged (AckAll, after its
// commit) gets a work-in-progress ack (+WPI, which restarts its ack
// wait; replicated with the consumer's state) once it has been held for
// half the ack wait, and again every half ack wait after that. The feed
// takes every message from the client as it comes (its buffer holds the
// consumer's MaxAckPending), so nothing waits unseen in the client's
// buffer. An instance that dies or leaves the partition stops sending
// them: its messages come again one ack wait later, as before. Messages
// acknowledged within half the ack wait, the usual case, cost nothing.

// inFlight is what a partition's holder was delivered and has not
// acknowledged yet, by stream sequence.
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

// maxAckPending is the consumers' MaxAckPending: how many messages may be
// delivered and not acknowledged at once.
func (p *Projector) maxAckPending() int { return 4 * p.cfg.batchSize }
