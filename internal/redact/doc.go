// Package redact keeps secrets out of what the ledger prints. [URL] hides
// the password of a connection URL (postgres://ROLE:PASSWORD@..., NATS
// URLs with a user and password) or of a keyword/value connection string
// (password=...), and [Conn] that of a string known to be one connection
// string, wherever its password ends (one typed without percent-encoding
// may hold a space, a quote, '#', '/' or '@'); [Error] wraps an error whose text may quote such a
// string (a driver's connection error, a migration tool's) so that its
// message carries no password while errors.Is and errors.As still see
// the original.
package redact
