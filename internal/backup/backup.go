package backup

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// Format names the file format in its header line.
const Format = "ledger-stream-backup/1"

// Errors; match with errors.Is.
var (
	// ErrNotEmpty: Restore needs an empty (or missing) stream.
	ErrNotEmpty = errors.New("backup: the LEDGER stream is not empty")
	// ErrBadFile: the file is not a backup, or is damaged.
	ErrBadFile = errors.New("backup: not a valid backup file")
	// ErrSequence: a restored message did not land at its sequence.
	ErrSequence = errors.New("backup: restored sequence differs")
)

// keptHeaders are the headers of an event worth keeping; the others
// (atomic batch and expectation headers) were instructions to the server
// when the event was appended.
var keptHeaders = []string{jetstream.MsgIDHeader, signing.HeaderKeyID, signing.HeaderSignature}

type header struct {
	Format   string    `json:"format"`
	Stream   string    `json:"stream"`
	FirstSeq uint64    `json:"first_seq"`
	LastSeq  uint64    `json:"last_seq"`
	Taken    time.Time `json:"taken"`
}

type line struct {
	Seq     uint64            `json:"seq"`
	Subject string            `json:"subject"`
	Headers map[string]string `json:"headers,omitempty"`
	Data    []byte            `json:"data"`
}

// Stats sums up a backup or restore.
type Stats struct {
	Messages uint64
	LastSeq  uint64
}

// Write copies every message of the stream stored when it starts to w.
func Write(ctx context.Context, js jetstream.JetStream, w io.Writer) (Stats, error) {
	s, err := js.Stream(ctx, stream.Name)
	if err != nil {
		return Stats{}, fmt.Errorf("open stream %s: %w", stream.Name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return Stats{}, err
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	st := info.State
	if err := enc.Encode(header{Format: Format, Stream: stream.Name, FirstSeq: st.FirstSeq, LastSeq: st.LastSeq, Taken: time.Now().UTC()}); err != nil {
		return Stats{}, err
	}
	var stats Stats
	if st.Msgs > 0 {
		// Direct gets (stream.Read): the auditor's identity holds no
		// consumer.
		err := stream.Read(ctx, js.Conn(), "", st.FirstSeq, st.LastSeq, func(m stream.Msg) error {
			l := line{Seq: m.Seq, Subject: m.Subject, Data: m.Data}
			for _, k := range keptHeaders {
				if v := m.Header.Get(k); v != "" {
					if l.Headers == nil {
						l.Headers = map[string]string{}
					}
					l.Headers[k] = v
				}
			}
			if err := enc.Encode(l); err != nil {
				return err
			}
			stats.Messages++
			stats.LastSeq = l.Seq
			return nil
		})
		if err != nil {
			return stats, fmt.Errorf("read stream after %d: %w", stats.LastSeq, err)
		}
	}
	return stats, bw.Flush()
}

// Restore publishes the messages of a backup into the stream, creating
// it when missing; the stream must hold no message. Each message must be
// stored at its original sequence.
func Restore(ctx context.Context, js jetstream.JetStream, r io.Reader) (Stats, error) {
	s, err := stream.Ensure(ctx, js)
	if err != nil {
		return Stats{}, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return Stats{}, err
	}
	if info.State.Msgs > 0 || info.State.LastSeq > 0 {
		return Stats{}, fmt.Errorf("%w: it holds sequences %d to %d; restore into a fresh server", ErrNotEmpty, info.State.FirstSeq, info.State.LastSeq)
	}
	dec := json.NewDecoder(bufio.NewReader(r))
	var h header
	if err := dec.Decode(&h); err != nil || h.Format != Format {
		return Stats{}, fmt.Errorf("%w: header %+v: %v", ErrBadFile, h, err)
	}
	var stats Stats
	for {
		var l line
		err := dec.Decode(&l)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return stats, fmt.Errorf("%w: after sequence %d: %w", ErrBadFile, stats.LastSeq, err)
		}
		if l.Seq != stats.LastSeq+1 && !(stats.LastSeq == 0 && l.Seq == h.FirstSeq) {
			return stats, fmt.Errorf("%w: sequence %d follows %d", ErrBadFile, l.Seq, stats.LastSeq)
		}
		m := nats.NewMsg(l.Subject)
		m.Data = l.Data
		for k, v := range l.Headers {
			m.Header.Set(k, v)
		}
		// The id is kept for reference, not deduplication: a message
		// is restored even if a message with its id was published
		// within the window (that is the backup's own history).
		m.Header.Del(jetstream.MsgIDHeader)
		if id := l.Headers[jetstream.MsgIDHeader]; id != "" {
			m.Header.Set("Ledger-Msg-Id", id)
		}
		// A refused publish (an identity without the right) gets no
		// answer: bound the wait.
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ack, err := js.PublishMsg(pctx, m, jetstream.WithExpectLastSequence(stats.LastSeq))
		cancel()
		if err != nil {
			return stats, fmt.Errorf("restore sequence %d: %w", l.Seq, err)
		}
		if ack.Sequence != l.Seq {
			return stats, fmt.Errorf("%w: message %d stored at %d", ErrSequence, l.Seq, ack.Sequence)
		}
		stats.Messages++
		stats.LastSeq = l.Seq
	}
	if stats.LastSeq != h.LastSeq {
		return stats, fmt.Errorf("%w: the header promises sequences up to %d, the file ends at %d (truncated?)", ErrBadFile, h.LastSeq, stats.LastSeq)
	}
	return stats, nil
}
