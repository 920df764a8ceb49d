package backup

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// Format names the file format in its header line. Version 2 adds the
// signing keys in force; Restore still reads version 1 (FormatV1).
const Format = "ledger-stream-backup/2"

// FormatV1 is the format of backups without keys.
const FormatV1 = "ledger-stream-backup/1"

// Errors; match with errors.Is.
var (
	// ErrNotEmpty: Restore needs an empty (or missing) stream, or one
	// holding only the start of the same backup.
	ErrNotEmpty = errors.New("backup: the LEDGER stream is not empty")
	// ErrBadFile: the file is not a backup, or is damaged.
	ErrBadFile = errors.New("backup: not a valid backup file")
	// ErrSequence: a restored message did not land at its sequence.
	ErrSequence = errors.New("backup: restored sequence differs")
	// ErrUnauthenticated: an event of the backup is not signed by a key
	// the backup names (edited, or unsigned): nothing was restored.
	ErrUnauthenticated = errors.New("backup: an event is not signed by the backup's keys")
	// ErrUntrustedKey: the backup names a key the keys Restore was told
	// to expect do not hold (RestoreOptions.Keys): whoever could write
	// the file could have re-signed edited events with a key of their
	// own and named it. Nothing was restored.
	ErrUntrustedKey = errors.New("backup: signed by a key the deployment it comes from did not trust")
	// ErrNoKeys: a backup needs the signing keys in force (Write), or a
	// format-1 backup the keys that signed it (Restore).
	ErrNoKeys = errors.New("backup: no signing keys")
	// ErrKeysUnchecked: restore was given neither the keys of the
	// deployment the backup comes from nor leave to trust the keys the
	// backup names itself.
	ErrKeysUnchecked = errors.New("backup: its signing keys are not checked")
)

// restoredIDHeader carries a restored message's event id (Nats-Msg-Id is
// the server's deduplication, which a restore must not trigger).
const restoredIDHeader = "Ledger-Msg-Id"

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
	Keys     []Key     `json:"keys,omitempty"`
}

// Key is a signing public key in force when the backup was taken, by its
// key id: one of the deployment's trusted keys (UpTo 0: it may have
// signed any event of the backup), or a historical key of a log the
// deployment was itself restored from, trusted up to UpTo.
type Key struct {
	ID        string `json:"id"`
	PublicKey []byte `json:"public_key"` // the raw Ed25519 key (base64 in the file)
	UpTo      uint64 `json:"up_to,omitempty"`
}

type line struct {
	Seq     uint64            `json:"seq"`
	Subject string            `json:"subject"`
	Headers map[string]string `json:"headers,omitempty"`
	Data    []byte            `json:"data"`
}

// Unauthenticated is an event no key of the backup signed.
type Unauthenticated struct {
	Seq     uint64
	Subject string
	ID      string // the event's id (Nats-Msg-Id), when it has one
	Reason  string
}

// Stats sums up a backup or restore.
type Stats struct {
	Messages uint64
	LastSeq  uint64
	// Resumed is the last sequence a Restore found already restored (a
	// restore that stopped and was run again), 0 when it began afresh.
	Resumed uint64
	// Keys are the backup's keys; Signed counts the events each signed.
	Keys   []Key
	Signed map[string]uint64
	// Unauthenticated lists the events no key of the backup signed.
	Unauthenticated []Unauthenticated
}

// Write copies every message of the stream stored when it starts to w,
// with the signing keys in force: keys (the deployment's trusted keys)
// and the historical keys the stream records (it was restored). Events
// no key signed are copied too (the backup is the log as it is) and
// listed in Stats.Unauthenticated. progress, when not nil, is called after
// each message written with its sequence and the last to write.
func Write(ctx context.Context, js jetstream.JetStream, w io.Writer, keys *signing.Keyring, progress func(seq, last uint64)) (Stats, error) {
	if keys == nil {
		return Stats{}, fmt.Errorf("%w: a backup carries the keys a new deployment needs to trust it (the trusted keys file)", ErrNoKeys)
	}
	s, err := js.Stream(ctx, stream.Name)
	if err != nil {
		return Stats{}, fmt.Errorf("open stream %s: %w", stream.Name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return Stats{}, err
	}
	history, err := stream.History(ctx, js)
	if err != nil {
		return Stats{}, err
	}
	if err := keys.AddHistory(history); err != nil {
		return Stats{}, err
	}
	st := info.State
	stats := Stats{Keys: keysOf(keys.Public(), history), Signed: map[string]uint64{}}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(header{Format: Format, Stream: stream.Name, FirstSeq: st.FirstSeq, LastSeq: st.LastSeq,
		Taken: time.Now().UTC(), Keys: stats.Keys}); err != nil {
		return Stats{}, err
	}
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
			if err := stats.check(keys, l); err != nil {
				return err
			}
			if err := enc.Encode(l); err != nil {
				return err
			}
			stats.Messages++
			stats.LastSeq = l.Seq
			if progress != nil {
				progress(l.Seq, st.LastSeq)
			}
			return nil
		})
		if err != nil {
			return stats, fmt.Errorf("read stream after %d: %w", stats.LastSeq, err)
		}
	}
	return stats, bw.Flush()
}

// keysOf lists own keys (no bound) and historical ones, by id.
func keysOf(own map[string]ed25519.PublicKey, history map[string]signing.Historical) []Key {
	var out []Key
	for id, k := range own {
		out = append(out, Key{ID: id, PublicKey: k})
	}
	for id, h := range history {
		if _, ok := own[id]; !ok {
			out = append(out, Key{ID: id, PublicKey: h.Key, UpTo: h.UpTo})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// check verifies l's signature with keys, counting it for its key or
// listing it as unauthenticated.
func (s *Stats) check(keys *signing.Keyring, l line) error {
	h := nats.Header{}
	for k, v := range l.Headers {
		h.Set(k, v)
	}
	err := keys.VerifyAt(l.Seq, stream.Published(l.Subject), h, l.Data) // signed as published, stored with its partition
	switch {
	case err == nil:
		s.Signed[h.Get(signing.HeaderKeyID)]++
	case errors.Is(err, signing.ErrHistory):
		return err
	default:
		s.Unauthenticated = append(s.Unauthenticated, Unauthenticated{Seq: l.Seq, Subject: l.Subject, ID: h.Get(jetstream.MsgIDHeader), Reason: err.Error()})
	}
	return nil
}

// RestoreOptions say what Restore may trust.
type RestoreOptions struct {
	// AllowUnauthenticated restores a backup holding events no key of it
	// signed (an event published around the ledger and refused as
	// unauthenticated where the backup was taken is such an event): the
	// projectors refuse them again. Without it Restore refuses the backup
	// and restores nothing.
	AllowUnauthenticated bool
	// Keys are the keys of the deployment the backup comes from (its
	// trusted keys file, kept apart from the backups): a format-1 backup
	// (it names none) is verified with them; a format-2 backup must name
	// no key they lack (ErrUntrustedKey), so an edited backup re-signed
	// with another key and naming it is refused. Nil: a format-2 backup
	// is verified with the keys it names only with TrustBackupKeys.
	Keys *signing.Keyring
	// TrustBackupKeys verifies a format-2 backup with the keys it names
	// when Keys is nil. Without it, and without Keys, Restore refuses
	// (ErrKeysUnchecked): whoever could write the backup file could have
	// edited its events and signed them again with a key of their own.
	TrustBackupKeys bool
	// Progress, when not nil, is called after each message restored (or
	// found already restored), with its sequence and the backup's last.
	Progress func(seq, last uint64)
}

// Restore publishes the messages of a backup into the stream, creating
// it when missing; the stream must hold no message, or the backup's first
// messages as an earlier Restore published them (it goes on after them,
// Stats.Resumed). It first reads the
// whole backup and verifies every event's signature with the backup's
// keys, refusing (ErrUnauthenticated, naming the first sequence) a
// backup holding an event they did not sign unless
// opts.AllowUnauthenticated; then it records the backup's keys in the
// stream as historical keys, trusted for the restored sequences only (a
// new deployment's projectors and auditors, with keys of their own,
// thus trust the restored events and nothing else signed by the old
// keys), and publishes each message at its original sequence.
func Restore(ctx context.Context, js jetstream.JetStream, r io.ReadSeeker, opts RestoreOptions) (Stats, error) {
	h, keys, err := readHeader(r, opts)
	if err != nil {
		return Stats{}, err
	}
	// Every event verified before anything is published.
	stats := Stats{Keys: h.Keys, Signed: map[string]uint64{}}
	err = eachLine(r, h, func(l line) error {
		if err := stats.check(keys, l); err != nil {
			return err
		}
		stats.Messages++
		stats.LastSeq = l.Seq
		return nil
	})
	if err != nil {
		return stats, err
	}
	if u := stats.Unauthenticated; len(u) > 0 && !opts.AllowUnauthenticated {
		return stats, fmt.Errorf("%w: sequence %d (%s, id %q): %s; %d event(s) of %d not signed by the backup's keys: the backup was altered, or holds events published around the ledger; nothing restored (--allow-unauthenticated restores them as they are, and the projectors refuse them)",
			ErrUnauthenticated, u[0].Seq, u[0].Subject, u[0].ID, u[0].Reason, len(u), stats.Messages)
	}

	s, err := stream.Ensure(ctx, js)
	if err != nil {
		return stats, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return stats, err
	}
	// A stream holding the start of this backup, and nothing else, is a
	// restore that stopped (killed, a lost connection): it goes on after
	// what is there, once every message there is found equal to the
	// backup's (decision 422). Anything else is another log.
	there := info.State
	if there.Msgs > 0 || there.LastSeq > 0 {
		if there.FirstSeq != max(h.FirstSeq, 1) || there.LastSeq > h.LastSeq || there.Msgs != there.LastSeq-there.FirstSeq+1 {
			return stats, fmt.Errorf("%w: it holds sequences %d to %d (%d messages), not the start of this backup (sequences %d to %d); restore into a fresh server", ErrNotEmpty, there.FirstSeq, there.LastSeq, there.Msgs, h.FirstSeq, h.LastSeq)
		}
		stats.Resumed = there.LastSeq
		// Every message there is compared with the backup's before
		// anything changes: the keys recorded below are trusted up to
		// the backup's last sequence, so recording them for another
		// log's stream, refused only afterwards, left that stream
		// trusting this backup's keys for sequences it has not stored yet.
		if err := sameStart(ctx, js, r, opts, there); err != nil {
			return stats, err
		}
	}
	// The keys first: a projector folding the restored events as they
	// arrive looks their key up in the stream when it meets it.
	history := map[string]signing.Historical{}
	for _, k := range h.Keys {
		upTo := h.LastSeq
		if k.UpTo > 0 {
			upTo = min(k.UpTo, h.LastSeq)
		}
		history[k.ID] = signing.Historical{Key: ed25519.PublicKey(k.PublicKey), UpTo: upTo}
	}
	if err := stream.RecordHistory(ctx, js, history); err != nil {
		return stats, err
	}

	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return stats, err
	}
	if _, _, err := readHeader(r, opts); err != nil {
		return stats, err
	}
	var published uint64
	unauthenticated := map[uint64]bool{}
	for _, u := range stats.Unauthenticated {
		unauthenticated[u.Seq] = true
	}
	err = eachLine(r, h, func(l line) error {
		// The file is read a second time: each line is verified again
		// with the same keys, so that a backup written meanwhile (its
		// file edited between the two reads) publishes nothing the
		// first read did not verify.
		again := Stats{Signed: map[string]uint64{}}
		if err := again.check(keys, l); err != nil {
			return err
		}
		if len(again.Unauthenticated) > 0 && !unauthenticated[l.Seq] {
			return fmt.Errorf("%w: sequence %d (%s): %s, yet it was verified moments before: the backup file changed during the restore; restored up to sequence %d, run it again once the file is left alone",
				ErrUnauthenticated, l.Seq, l.Subject, again.Unauthenticated[0].Reason, published)
		}
		if _, err := stream.PoolOf(l.Subject); err != nil {
			// The stream stores events only (ledger.<pool>.<type>): a
			// message an older stream took on another subject has no place.
			return fmt.Errorf("restore sequence %d: %w", l.Seq, err)
		}
		if l.Seq <= stats.Resumed {
			// Found equal to the backup's by sameStart.
			published = l.Seq
			if opts.Progress != nil {
				opts.Progress(l.Seq, h.LastSeq)
			}
			return nil
		}
		// Published as the ledger published it: the stream stores it
		// with the partition of its own count (a backup taken from a
		// stream of another count, or of none, restores the same).
		m := nats.NewMsg(stream.Published(l.Subject))
		m.Data = l.Data
		for k, v := range l.Headers {
			m.Header.Set(k, v)
		}
		// The id is kept for reference, not deduplication: a message
		// is restored even if a message with its id was published
		// within the window (that is the backup's own history).
		m.Header.Del(jetstream.MsgIDHeader)
		if id := l.Headers[jetstream.MsgIDHeader]; id != "" {
			m.Header.Set(restoredIDHeader, id)
		}
		// A refused publish (an identity without the right) gets no
		// answer: bound the wait.
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ack, err := js.PublishMsg(pctx, m, jetstream.WithExpectLastSequence(published))
		cancel()
		if err != nil {
			return fmt.Errorf("restore sequence %d: %w", l.Seq, err)
		}
		if ack.Sequence != l.Seq {
			return fmt.Errorf("%w: message %d stored at %d", ErrSequence, l.Seq, ack.Sequence)
		}
		published = l.Seq
		if opts.Progress != nil {
			opts.Progress(l.Seq, h.LastSeq)
		}
		return nil
	})
	return stats, err
}

// errSameStart ends sameStart's reading of the file once past what the
// stream holds.
var errSameStart = errors.New("the stream's messages compared")

// sameStart compares every message the stream holds (there: sequences 1
// to there.LastSeq) with the backup's line of its sequence, reading r
// from its start; r is left anywhere.
func sameStart(ctx context.Context, js jetstream.JetStream, r io.ReadSeeker, opts RestoreOptions, there jetstream.StreamState) error {
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return err
	}
	h, _, err := readHeader(r, opts)
	if err != nil {
		return err
	}
	held := make(chan stream.Msg, 64)
	readErr := make(chan error, 1)
	rctx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	go func() {
		defer close(held)
		readErr <- stream.Read(rctx, js.Conn(), "", there.FirstSeq, there.LastSeq, func(m stream.Msg) error {
			select {
			case held <- m:
				return nil
			case <-rctx.Done():
				return rctx.Err()
			}
		})
	}()
	err = eachLine(r, h, func(l line) error {
		if l.Seq > there.LastSeq {
			return errSameStart
		}
		m, ok := <-held
		if !ok {
			return fmt.Errorf("restore: read the stream's sequence %d: %w", l.Seq, errors.Join(<-readErr, io.ErrUnexpectedEOF))
		}
		if why := differs(m, l); why != "" {
			return fmt.Errorf("%w: it holds sequences %d to %d, and its sequence %d is not the backup's (%s): another log; nothing was changed; restore into a fresh server", ErrNotEmpty, there.FirstSeq, there.LastSeq, l.Seq, why)
		}
		return nil
	})
	if errors.Is(err, errSameStart) {
		return nil
	}
	return err
}

// differs says how the stream's message m differs from the backup's line
// l ("" when it is the same event, as Restore publishes it: same
// sequence, pool and type, body, signature and event id).
func differs(m stream.Msg, l line) string {
	switch {
	case m.Seq != l.Seq:
		return fmt.Sprintf("the stream gave sequence %d", m.Seq)
	case stream.Published(m.Subject) != stream.Published(l.Subject):
		return fmt.Sprintf("subject %s, the backup's %s", stream.Published(m.Subject), stream.Published(l.Subject))
	case !bytes.Equal(m.Data, l.Data):
		return "another body"
	case m.Header.Get(signing.HeaderKeyID) != l.Headers[signing.HeaderKeyID] || m.Header.Get(signing.HeaderSignature) != l.Headers[signing.HeaderSignature]:
		return "another signature"
	case m.Header.Get(restoredIDHeader) != l.Headers[jetstream.MsgIDHeader]:
		return fmt.Sprintf("event id %q, the backup's %q", m.Header.Get(restoredIDHeader), l.Headers[jetstream.MsgIDHeader])
	}
	return ""
}

// readHeader reads the header line and the keyring the backup's events
// are verified with.
func readHeader(r io.Reader, opts RestoreOptions) (header, *signing.Keyring, error) {
	br := bufio.NewReader(r)
	first, err := br.ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return header{}, nil, fmt.Errorf("%w: %w", ErrBadFile, err)
	}
	var h header
	if err := json.Unmarshal(first, &h); err != nil || (h.Format != Format && h.Format != FormatV1) {
		// The line is not quoted: a file given by mistake may be a
		// secret (an nkey seed, a password file: decision 429).
		what := fmt.Sprintf("its format is %q", truncate([]byte(h.Format)))
		if err != nil {
			what = "it is not a JSON object"
		}
		return header{}, nil, fmt.Errorf("%w: its first line (%d bytes) is not the header of a backup (%s; a backup begins with {\"format\":%q)", ErrBadFile, len(first), what, Format)
	}
	keys := signing.NewKeyring()
	switch {
	case h.Format == FormatV1 && opts.Keys != nil:
		for id, k := range opts.Keys.Public() {
			h.Keys = append(h.Keys, Key{ID: id, PublicKey: k})
		}
	case h.Format == FormatV1 && !opts.AllowUnauthenticated:
		return header{}, nil, fmt.Errorf("%w: a backup of format %s names none: give the keys that signed it (the trusted keys file of the deployment it comes from)", ErrNoKeys, FormatV1)
	}
	own, history := []ed25519.PublicKey{}, map[string]signing.Historical{}
	for _, k := range h.Keys {
		if len(k.PublicKey) != ed25519.PublicKeySize || signing.KeyID(k.PublicKey) != k.ID {
			return header{}, nil, fmt.Errorf("%w: key %q is not an Ed25519 key of that id", ErrBadFile, k.ID)
		}
		if k.UpTo == 0 {
			own = append(own, k.PublicKey)
		} else {
			history[k.ID] = signing.Historical{Key: k.PublicKey, UpTo: k.UpTo}
		}
	}
	if h.Format != FormatV1 && opts.Keys == nil && !opts.TrustBackupKeys {
		return header{}, nil, fmt.Errorf("%w: the backup names the key(s) %s; nothing restored: give the trusted keys file of the deployment it comes from (kept apart from the backups) to check them, or, knowing that whoever could write the backup could have edited its events and signed them again with a key of their own, trust the keys it names",
			ErrKeysUnchecked, strings.Join(KeyIDs(h.Keys), ", "))
	}
	if h.Format != FormatV1 && opts.Keys != nil {
		expected := opts.Keys.Public()
		for _, k := range h.Keys {
			if pub, ok := expected[k.ID]; !ok || !pub.Equal(ed25519.PublicKey(k.PublicKey)) {
				if k.UpTo > 0 {
					// The deployment was itself restored: the log's first
					// part was signed by the deployment it came from, whose
					// keys the operator vouches for too (decision 425).
					return header{}, nil, fmt.Errorf("%w: the backup names key %s as the key of a log the deployment was itself restored from (it signed sequences up to %d), which the given trusted keys do not hold; nothing restored: give, with the trusted keys of the deployment the backup comes from, those of the deployment that log came from (one file: PEM files may be concatenated)", ErrUntrustedKey, k.ID, k.UpTo)
				}
				return header{}, nil, fmt.Errorf("%w: the backup names key %s, which the given trusted keys do not hold: "+
					"its events may have been edited and signed again with it; nothing restored (check the backup, and that --trusted-keys are the keys of the deployment it comes from)", ErrUntrustedKey, k.ID)
			}
		}
	}
	keys = signing.NewKeyring(own...)
	if err := keys.AddHistory(history); err != nil {
		return header{}, nil, fmt.Errorf("%w: %w", ErrBadFile, err)
	}
	// The lines are read from where the header ends: r is a file read
	// from its start, so seek there.
	if s, ok := r.(io.Seeker); ok {
		if _, err := s.Seek(int64(len(first)), io.SeekStart); err != nil {
			return header{}, nil, err
		}
	}
	return h, keys, nil
}

// eachLine calls fn for every message line after the header, checking
// that the sequences follow each other from the header's first to its
// last.
func eachLine(r io.Reader, h header, fn func(line) error) error {
	dec := json.NewDecoder(bufio.NewReader(r))
	var last uint64
	for {
		var l line
		err := dec.Decode(&l)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: after sequence %d: %w", ErrBadFile, last, err)
		}
		if l.Seq != last+1 && !(last == 0 && l.Seq == h.FirstSeq) {
			return fmt.Errorf("%w: sequence %d follows %d", ErrBadFile, l.Seq, last)
		}
		if l.Seq > h.LastSeq {
			// Checked before fn: Restore publishes as it reads.
			return fmt.Errorf("%w: sequence %d after the header's last, %d", ErrBadFile, l.Seq, h.LastSeq)
		}
		if err := fn(l); err != nil {
			return err
		}
		last = l.Seq
	}
	if last != h.LastSeq {
		return fmt.Errorf("%w: the header promises sequences up to %d, the file ends at %d (truncated?)", ErrBadFile, h.LastSeq, last)
	}
	return nil
}

func truncate(b []byte) string {
	if len(b) > 120 {
		b = b[:120]
	}
	return string(b)
}

// KeyIDs lists the ids of keys, sorted.
func KeyIDs(keys []Key) []string {
	var ids []string
	for _, k := range keys {
		ids = append(ids, k.ID)
	}
	slices.Sort(ids)
	return ids
}
