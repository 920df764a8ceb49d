package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// Reading the log.
//
// Every reader of the ledger (audit, replay, backup, explain, the API's
// catch-up of a pool, the projector's rebuild of a pool, its healing
// and its gap filling) reads a range of the stream with Read: JetStream
// direct gets in batches (nats-server 2.11+), answered by the stream's
// servers from their store. A read creates no consumer, so it leaves
// nothing behind whatever happens to the reader, and no number of readers
// can fill the server's consumer limit (docs/decisions.md 120). The only
// consumers on the stream are the projector's durables.
//
// On a replicated stream any current replica may answer a direct get, and
// a follower can trail the leader by a few messages: a batch that ends
// before the range does is confirmed with one message get, which the
// stream leader answers (Read then asks again until a replica has it).

// Msg is one message of the stream as it is stored.
type Msg struct {
	Seq     uint64
	Subject string
	// Header is the message's header as published (nil when it had
	// none): the direct get's own headers are removed.
	Header nats.Header
	Data   []byte
	// Time is when the stream stored it.
	Time time.Time
}

// Direct get subjects and headers.
const (
	directGetSubject = "$JS.API.DIRECT.GET." + Name
	msgGetSubject    = "$JS.API.STREAM.MSG.GET." + Name
	hdrStatus        = "Status"
	hdrDescription   = "Description"
	hdrStream        = "Nats-Stream"
	hdrSubject       = "Nats-Subject"
	hdrSequence      = "Nats-Sequence"
	hdrTimeStamp     = "Nats-Time-Stamp"
	hdrNumPending    = "Nats-Num-Pending"
	hdrLastSequence  = "Nats-Last-Sequence"
)

// Bounds of one direct get batch: a reader holds at most one batch being
// received and one being handed over, whatever the size of the range.
const (
	readBatch    = 1024
	readMaxBytes = 4 << 20
	// readWait bounds the wait for the next message of a batch (a
	// server's answer comes in milliseconds; a server lost mid-batch is
	// asked again).
	readWait = 5 * time.Second
	// readTries bounds how often one batch is asked for again (a lost
	// server, a follower behind the leader) before Read gives up.
	readTries = 60
)

// everything is the filter that matches every subject the stream stores.
const everything = "ledger.>"

// ErrNoDirect: no server answers direct gets on the stream (its
// allow_direct is off: a stream made before this release).
var ErrNoDirect = errors.New("stream LEDGER does not answer direct gets (allow_direct is off): run `ledger nats setup` with the admin identity once (`ledger dev` does it at start)")

// ErrRead: the stream could not be read (a bad answer, or none in time).
var ErrRead = errors.New("read stream " + Name)

// Read calls fn for every message of the stream whose subject matches
// filter ("" for every message) with a sequence from from to to
// (inclusive), in order, and returns fn's first error. It creates no
// consumer. to is normally the stream's last sequence (LastSeq) or a
// committed sequence: messages after it are not passed.
func Read(ctx context.Context, nc *nats.Conn, filter string, from, to uint64, fn func(Msg) error) error {
	if from < 1 {
		from = 1
	}
	if from > to {
		return nil
	}
	if filter == everything {
		// The stream captures only ledger subjects (Config), so this
		// filter is no filter, and without one the server reads each
		// message without matching its subject and counts what remains
		// of a batch from its state instead of a walk of the subjects
		// (a quarter of its work for a direct get): the same messages.
		filter = ""
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r, err := newReader(nc, filter, to)
	if err != nil {
		return err
	}
	defer r.close()
	batches := make(chan []Msg, 1)
	errc := make(chan error, 1)
	go func() {
		defer close(batches)
		errc <- r.run(ctx, from, batches)
	}()
	for b := range batches {
		for _, m := range b {
			if err := fn(m); err != nil {
				cancel()
				for range batches {
				}
				return err
			}
		}
	}
	return <-errc
}

type reader struct {
	nc     *nats.Conn
	filter string
	to     uint64
	inbox  string
	sub    *nats.Subscription
	req    atomic.Uint64
}

func newReader(nc *nats.Conn, filter string, to uint64) (*reader, error) {
	r := &reader{nc: nc, filter: filter, to: to, inbox: nc.NewInbox()}
	sub, err := nc.SubscribeSync(r.inbox + ".*")
	if err != nil {
		return nil, fmt.Errorf("%w: subscribe to the answers: %w", ErrRead, err)
	}
	r.sub = sub
	return r, nil
}

func (r *reader) close() { _ = r.sub.Unsubscribe() }

// run asks for batches from from on, sends what they hold to out, and
// returns when the range is read.
func (r *reader) run(ctx context.Context, from uint64, out chan<- []Msg) error {
	pos := from
	tries := 0
	for pos <= r.to {
		msgs, more, err := r.batch(ctx, pos)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, ErrNoDirect) || tries >= readTries {
				return err
			}
			tries++
			if err := pause(ctx, tries); err != nil {
				return err
			}
			continue
		}
		if len(msgs) > 0 {
			tries = 0
			pos = msgs[len(msgs)-1].Seq + 1
			select {
			case out <- msgs:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if more || pos > r.to {
			continue
		}
		// The answering server holds nothing more up to r.to: ask the
		// leader whether it does (a follower may trail it).
		next, err := r.leaderNext(ctx, pos)
		if err != nil {
			return err
		}
		if next == 0 || next > r.to {
			return nil
		}
		if tries >= readTries {
			return fmt.Errorf("%w: the stream leader holds message %d but the servers answering direct gets do not have it yet", ErrRead, next)
		}
		tries++
		if err := pause(ctx, tries); err != nil {
			return err
		}
	}
	return nil
}

func pause(ctx context.Context, tries int) error {
	t := time.NewTimer(min(time.Duration(tries)*20*time.Millisecond, 500*time.Millisecond))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type directGetRequest struct {
	Seq      uint64 `json:"seq"`
	NextFor  string `json:"next_by_subj,omitempty"`
	Batch    int    `json:"batch"`
	MaxBytes int    `json:"max_bytes"`
}

// batch asks for one batch from pos and collects it. more says that the
// answering server holds more matching messages after the batch.
func (r *reader) batch(ctx context.Context, pos uint64) (msgs []Msg, more bool, err error) {
	n := r.req.Add(1)
	reply := r.inbox + "." + strconv.FormatUint(n, 10)
	size := uint64(readBatch)
	if r.to-pos+1 < size {
		size = r.to - pos + 1
	}
	req, _ := json.Marshal(directGetRequest{Seq: pos, NextFor: r.filter, Batch: int(size), MaxBytes: readMaxBytes})
	if err := r.nc.PublishMsg(&nats.Msg{Subject: directGetSubject, Reply: reply, Data: req}); err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrRead, err)
	}
	// One deadline for the batch, moved on with every message: a
	// context per message cost as much as reading the message did.
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	wait := time.AfterFunc(readWait, func() { cancel(context.DeadlineExceeded) })
	defer wait.Stop()
	for {
		m, err := r.sub.NextMsgWithContext(wctx)
		if err != nil && ctx.Err() == nil && context.Cause(wctx) != nil {
			err = context.Cause(wctx) // no message within readWait
		}
		wait.Reset(readWait)
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, false, ErrNoDirect
		}
		if err != nil {
			return nil, false, fmt.Errorf("%w from %d: %w", ErrRead, pos, err)
		}
		if m.Subject != reply {
			continue // the rest of an earlier batch
		}
		if status := m.Header.Get(hdrStatus); status != "" && len(m.Data) == 0 {
			switch status {
			case "204": // end of the batch
				np, _ := strconv.ParseUint(m.Header.Get(hdrNumPending), 10, 64)
				return msgs, np > 0, nil
			case "404": // nothing at or after pos
				return msgs, false, nil
			case "503":
				return nil, false, ErrNoDirect
			default:
				return nil, false, fmt.Errorf("%w from %d: %s %s", ErrRead, pos, status, m.Header.Get(hdrDescription))
			}
		}
		sm, err := decodeDirect(m)
		if err != nil {
			return nil, false, err
		}
		if sm.Seq > r.to {
			// Past the range: what remains of the batch is ignored.
			return msgs, false, nil
		}
		msgs = append(msgs, sm)
		if sm.Seq == r.to {
			return msgs, false, nil
		}
	}
}

// decodeDirect turns a direct get answer into the message as stored.
func decodeDirect(m *nats.Msg) (Msg, error) {
	seq, err := strconv.ParseUint(m.Header.Get(hdrSequence), 10, 64)
	if err != nil {
		return Msg{}, fmt.Errorf("%w: an answer without a sequence (%q)", ErrRead, m.Header.Get(hdrSequence))
	}
	ts, err := time.Parse(time.RFC3339Nano, m.Header.Get(hdrTimeStamp))
	if err != nil {
		return Msg{}, fmt.Errorf("%w: message %d: bad time stamp: %w", ErrRead, seq, err)
	}
	subject := m.Header.Get(hdrSubject)
	if subject == "" {
		return Msg{}, fmt.Errorf("%w: message %d without a subject", ErrRead, seq)
	}
	h := m.Header
	for _, k := range []string{hdrStream, hdrSubject, hdrSequence, hdrTimeStamp, hdrNumPending, hdrLastSequence} {
		h.Del(k)
	}
	if len(h) == 0 {
		h = nil
	}
	return Msg{Seq: seq, Subject: subject, Header: h, Data: m.Data, Time: ts}, nil
}

// msgGetRequest and msgGetResponse are the stream leader's message get
// ($JS.API.STREAM.MSG.GET), which followers never answer.
type msgGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
}

type msgGetResponse struct {
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error,omitempty"`
	Message *struct {
		Subject string    `json:"subject"`
		Seq     uint64    `json:"seq"`
		Header  []byte    `json:"hdrs,omitempty"`
		Data    []byte    `json:"data,omitempty"`
		Time    time.Time `json:"time"`
	} `json:"message,omitempty"`
}

// errCodeNoMessage is JetStream's error code for "no message found".
const errCodeNoMessage = 10037

// leaderGet asks the stream leader for one message; ok is false when
// there is none.
func leaderGet(ctx context.Context, nc *nats.Conn, req msgGetRequest) (Msg, bool, error) {
	body, _ := json.Marshal(req)
	wctx, cancel := context.WithTimeout(ctx, readWait)
	defer cancel()
	m, err := nc.RequestWithContext(wctx, msgGetSubject, body)
	if err != nil {
		return Msg{}, false, fmt.Errorf("%w: message get: %w", ErrRead, err)
	}
	var resp msgGetResponse
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return Msg{}, false, fmt.Errorf("%w: message get: %w", ErrRead, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrCode == errCodeNoMessage {
			return Msg{}, false, nil
		}
		return Msg{}, false, fmt.Errorf("%w: message get: %s (%d)", ErrRead, resp.Error.Description, resp.Error.ErrCode)
	}
	if resp.Message == nil {
		return Msg{}, false, fmt.Errorf("%w: message get: empty answer", ErrRead)
	}
	out := Msg{Seq: resp.Message.Seq, Subject: resp.Message.Subject, Data: resp.Message.Data, Time: resp.Message.Time}
	if len(resp.Message.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Header)
		if err != nil {
			return Msg{}, false, fmt.Errorf("%w: message %d: %w", ErrRead, out.Seq, err)
		}
		out.Header = h
	}
	return out, true, nil
}

// leaderNext is the sequence of the first message at or after pos that
// matches the reader's filter, as the stream leader knows it (0: none).
func (r *reader) leaderNext(ctx context.Context, pos uint64) (uint64, error) {
	m, ok, err := leaderGet(ctx, r.nc, msgGetRequest{Seq: pos, NextFor: r.filter})
	if err != nil || !ok {
		return 0, err
	}
	return m.Seq, nil
}

// Last returns the last message whose subject matches filter (a pool's
// filter, or "ledger.>"), as the stream leader holds it; ok is false when
// there is none. Unlike a direct get, its answer is never behind an
// append that was acknowledged.
func Last(ctx context.Context, nc *nats.Conn, filter string) (m Msg, ok bool, err error) {
	return leaderGet(ctx, nc, msgGetRequest{LastFor: filter})
}

// Next returns the first message at or after seq whose subject matches
// filter, as the stream leader holds it; ok is false when there is none.
func Next(ctx context.Context, nc *nats.Conn, seq uint64, filter string) (m Msg, ok bool, err error) {
	return leaderGet(ctx, nc, msgGetRequest{Seq: seq, NextFor: filter})
}

// LastSeq is the stream's last sequence, from the stream leader's info.
func LastSeq(ctx context.Context, nc *nats.Conn) (uint64, error) {
	wctx, cancel := context.WithTimeout(ctx, readWait)
	defer cancel()
	m, err := nc.RequestWithContext(wctx, "$JS.API.STREAM.INFO."+Name, nil)
	if err != nil {
		return 0, fmt.Errorf("stream info: %w", err)
	}
	var resp struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error,omitempty"`
		State struct {
			LastSeq uint64 `json:"last_seq"`
		} `json:"state"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return 0, fmt.Errorf("stream info: %w", err)
	}
	if resp.Error != nil {
		return 0, fmt.Errorf("stream info: %s", resp.Error.Description)
	}
	return resp.State.LastSeq, nil
}
