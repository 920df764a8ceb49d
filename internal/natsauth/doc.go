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
// The roles:
//   - admin: everything; the only identity that may create, update,
//     delete or purge the LEDGER stream (`ledger dev` and `ledger nats
//     setup` create it with this identity);
//   - ledger: publish to ledger.> (appends, atomic batches) and the
//     JetStream API calls the write side makes (stream info, message get);
//   - projector and auditor: read only (stream info, message get,
//     consumers on LEDGER and their acks); they cannot publish to ledger.>.
package natsauth
