// Package backup copies the LEDGER stream to a file and back, so that a
// lost or destroyed stream can be restored on a fresh server and the
// projection rebuilt from it (`ledger replay --into`).
//
// The file is JSON lines: a header line, then one line per message in
// sequence order with its stream sequence, subject, the headers that
// belong to the event (Nats-Msg-Id and the ledger's signature) and the
// body (base64). [Write] needs only read rights (the auditor identity);
// [Restore] publishes every message, in order, into an empty LEDGER
// stream (admin identity: it creates the stream) and checks that each
// lands at its original sequence, so offsets recorded anywhere (decisions,
// allocation_history, an auditor's notes) stay valid and signatures still
// verify. The stream's own storage time of each message is not kept
// (JetStream stamps it on restore); the events' own times are in their
// bodies.
package backup
