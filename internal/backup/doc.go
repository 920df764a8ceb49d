// Package backup copies the LEDGER stream to a file and back, so that a
// lost or destroyed stream can be restored into a fresh deployment.
//
// The file is JSON lines: a header line (the format, the stream's first
// and last sequence, and the signing public keys in force by key id: the
// deployment's trusted keys and the historical keys of a log it was
// itself restored from), then one line per message in sequence order
// with its stream sequence, subject, the headers that belong to the event
// (Nats-Msg-Id and the ledger's signature) and the body (base64). [Write]
// needs only read rights (the auditor identity). [Restore] reads the whole
// file first and verifies every event's signature with the header's keys,
// refusing ([ErrUnauthenticated], naming the sequence) a backup with an
// edited or unsigned event unless told to take them; then it records the
// keys in the stream as historical keys, trusted for the restored
// sequences only (stream.RecordHistory; a new deployment's projectors
// and auditors trust the restored log by them), and publishes every
// message, in order, into an empty LEDGER stream (admin identity: it
// creates and configures the stream), checking that each lands at its
// original sequence, so offsets recorded anywhere (decisions,
// allocation_history, an auditor's notes) stay valid and signatures still
// verify. The stream's own storage time of each message is not kept
// (JetStream stamps it on restore); the events' own times are in their
// bodies. A stream that already holds the backup's first messages, each
// equal to the backup's (a restore that stopped), is gone on from after
// them; one holding anything else is refused ([ErrNotEmpty]).
package backup
