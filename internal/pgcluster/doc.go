// Package pgcluster starts a private PostgreSQL cluster from the
// PostgreSQL binaries installed on the machine (initdb, pg_ctl, postgres),
// with its data in a directory of the caller's choosing and no system
// service touched. [Start] finds the binaries ([WithBinDir], else
// $LEDGER_PG_BIN, else `pg_config --bindir`, else the highest
// /usr/lib/postgresql/*/bin holding initdb), runs initdb once when the
// data directory has no PG_VERSION, starts the server with `pg_ctl start
// -w` listening on 127.0.0.1 (a free port, or the one the data directory
// used last time, remembered in the file pgcluster.port inside it), and
// creates the database `ledger`. A second Start on the same data directory
// reuses the data, and reuses a server that is still running from it.
//
// PostgreSQL refuses to run as root. When the calling process is root,
// initdb, pg_ctl and postgres run as the unprivileged user `nobody` (uid
// and gid 65534 when the user database has no such entry): the data
// directory and the socket directory are chowned to it, and every ancestor
// directory of the data directory that is not world-traversable gets o+x
// added so that `nobody` can reach its data (for example a 0700
// t.TempDir() parent, or /root). Each such chmod is reported on the
// [WithLog] writer. The server's own log goes to pgcluster.log inside the
// data directory; its tail is quoted in start errors.
//
// Errors are of type [*Error] and match the sentinel errors of this
// package ([ErrBinariesNotFound], [ErrInitdb], ...) with errors.Is.
package pgcluster
