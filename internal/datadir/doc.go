// Package datadir decides whether a data directory may be trusted by the
// user who runs the ledger in it. `ledger dev` keeps its admin token, its
// tokens file, the NATS identities' seeds, the signing key, the trusted
// keys and the PostgreSQL passwords there: a directory another user
// created or may write could hand the ledger that user's token or keys
// (the printed admin token would be theirs), so [Check] refuses, as ssh
// refuses a private key others may read:
//
//   - the directory itself when it is not owned by the calling user
//     (effective uid) or group or others may write it;
//   - each subdirectory [Layout] names, for the same reasons;
//   - each secret file (seeds, keys, tokens, passwords) that is not a
//     regular file, not the calling user's, or that group or others may
//     read or write;
//   - each file whose integrity matters but that others may read (the
//     trusted public keys) when it is not the calling user's or others
//     may write it.
//
// A refusal is an [*Error] naming the path and the reason; it matches
// [ErrUntrusted]. Check reads metadata only and changes nothing.
package datadir
