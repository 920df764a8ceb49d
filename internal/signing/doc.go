// Package signing lets the projector and the auditors tell events the
// ledger appended from anything else that reached the stream (a producer
// publishing straight to ledger.<pool>.<type>, an admin's mistake, a
// misconfigured NATS account).
//
// The ledger signs every message it appends with Ed25519 over a
// domain-separated concatenation of the subject and the body (the
// subject it publishes on, ledger.<pool>.<type>: the stream stores the
// event with its partition appended, which readers strip before
// checking, internal/stream.Published); the headers
// Ledger-Key-Id and Ledger-Signature carry the key id (the first 16 hex
// digits of the SHA-256 of the public key in PKIX DER) and the signature
// (base64). The private key is a PEM PKCS#8 file (mode 0600); trusted
// public keys are a file of PEM "PUBLIC KEY" blocks, so keys can be
// rotated by appending the new one before switching the ledger over.
//
// A restored log was signed by the keys of the deployment it comes from:
// a [Keyring] also trusts such historical keys ([Historical]), each for
// the events up to the last sequence restored, read from the stream when
// an event names a key id the keyring lacks ([Keyring.UseHistory]).
//
// [Keyring.VerifyAt] answers [ErrUnsigned], [ErrUnknownKey] or
// [ErrBadSignature] (match with errors.Is), or [ErrHistory] when the
// historical keys could not be read (the event is then neither authentic
// nor refused: ask again).
package signing
