// Package natsauth gives every program that talks to the ledger's NATS an
// identity and no more rights than its job needs.
//
// Identities are NATS nkeys (Ed25519 key pairs, NATS's own challenge and
// response: no secret crosses the wire and the server holds only public
// keys). [Init] creates one seed file per [Role] in a directory (0700,
// files 0600) and [Load] reads them back; [Users] gives the embedded
// server the public keys with each role's [Permissions], and
// [WriteServerConfig] writes the same as a nats-server configuration file
// for a standalone server (docker-compose). A client connects with
// [Connect], given the path of its seed file (LEDGER_NATS_CREDS, --nats-creds).
//
// The roles (README: NATS identities has the table of subjects):
//   - admin: everything; the only identity that may create, update,
//     delete or purge the LEDGER stream (`ledger dev` and `ledger nats
//     setup` create it with this identity);
//   - ledger: publish to ledger.*.* (appends, atomic batches, on
//     ledger.<pool>.<type>; the stream stores each event with its
//     partition, a subject nobody publishes on) and read the
//     stream (stream info, message gets, direct gets);
//   - projector: read, and manage the durable consumers of its Layout
//     (its name and its partitions' names), none other;
//   - auditor: read, nothing more.
//
// Every reader reads ranges with direct gets (internal/stream.Read), so
// the ledger and the auditor may create no consumer at all: nobody but
// the projector and admin can fill the server's consumer limit, update
// the projector's durables, delete them or take their names. Every role
// but admin receives replies under its own inbox prefix (InboxPrefix,
// set by Option) and may subscribe nowhere else, so no identity reads the
// replies meant for another; none answers requests, so none needs
// allow_responses.
package natsauth
