// Package redact keeps secrets out of what the ledger prints. [URL] hides
// the password of a connection URL (postgres://ROLE:PASSWORD@..., NATS
// URLs with a user and password) or of a keyword/value connection string
// (password=...); [Error] wraps an error whose text may quote such a
// string (a driver's connection error, a migration tool's) so that its
// message carries no password while errors.Is and errors.As still see
// the original.
package redact
