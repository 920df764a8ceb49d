// Package logging builds the structured logger (log/slog) of the ledger's
// long-running processes: `ledger serve`, `ledger dev` and `projector`.
// Each takes --log-format (text, the default, for a person at a terminal;
// json, one object a line with time, level and msg, for a log shipper) and
// --log-level (debug, info, warn, error). One-shot commands print to
// stdout and stderr as they always did: their output is for a person.
//
// What the processes log is the ledger's own words and identifiers
// (request ids, token names, pools, sequences), never a secret: no token,
// no password, no seed, no Authorization header (see internal/api's
// access log and internal/redact).
package logging
