package audit

import (
	"context"
	"fmt"

	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Message is one event read back from the log.
type Message struct {
	Pool   string
	Stored stream.Stored
	// Subject and Header as stored, to check the ledger's signature.
	Subject string
	Header  nats.Header

	// checked: the reader authenticated Stored against checkedBy
	// already (ReadLogTrusted), so a Replayer trusting the same keys
	// does not again.
	checked   bool
	checkedBy *signing.Keyring
	// authErr is the check's error (signing.ErrHistory): the event is
	// neither accepted nor refused, and a fold of it fails.
	authErr error
}

// ReadLog calls fn for every message of the stream matching filter, from
// sequence from up to the last one stored when ReadLog started, in order.
// Messages whose subject names no pool are passed over. It reads with
// direct gets (stream.Read) and creates no consumer, so the auditor's
// identity, which may hold none, can run it.
func ReadLog(ctx context.Context, js jetstream.JetStream, from uint64, filter string, fn func(Message) error) error {
	return ReadLogTrusted(ctx, js, from, filter, nil, fn)
}

// ReadLogTrusted is ReadLog that also checks each event's signature
// against keys (nil: none), ahead of fn and over every core; a Replayer
// trusting the same keys then folds the messages without checking them
// again.
func ReadLogTrusted(ctx context.Context, js jetstream.JetStream, from uint64, filter string, keys *signing.Keyring, fn func(Message) error) error {
	last, err := stream.LastSeq(ctx, js.Conn())
	if err != nil {
		return fmt.Errorf("open stream %s: %w", stream.Name, err)
	}
	return ReadRange(ctx, js.Conn(), from, last, filter, keys, fn)
}

// ReadRange is ReadLogTrusted up to sequence to.
//
// Reading, decoding and checking signatures, and folding overlap:
// stream.Read fetches the next batch while the cores decode and
// authenticate the ones before (projections.ReadDecoded) and fn folds.
func ReadRange(ctx context.Context, nc *nats.Conn, from, to uint64, filter string, keys *signing.Keyring, fn func(Message) error) error {
	return projections.ReadDecoded(ctx, nc, keys, nil, filter, from, to, func(d *projections.Decoded) error {
		if !d.OK {
			return nil
		}
		return fn(Message{Pool: d.Pool, Stored: d.Stored, Subject: d.Subject, Header: d.Header, checked: true, checkedBy: keys, authErr: d.Err})
	})
}
