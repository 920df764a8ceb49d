// Package connect brings up a service's connections to NATS and
// PostgreSQL. `ledger serve`, `ledger dev` and cmd/projector start beside
// their servers (a compose file starts them all at once), so each waits
// while a server is not answering yet: with a bound, saying on its logger
// (stderr) what it is waiting for and why after each failed attempt, and
// giving up with an error matching [ErrUnreachable] that names the address
// and the last failure. Once connected, a NATS connection reconnects
// forever, and a PostgreSQL pool re-dials on its own: outages after the
// start are the services' business, not this package's.
package connect
