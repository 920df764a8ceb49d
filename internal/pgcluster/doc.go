// Package pgcluster starts a private PostgreSQL cluster from the
// PostgreSQL binaries installed on the machine (initdb, pg_ctl, postgres),
// with its data in a directory of the caller's choosing and no system
// service touched. [Start] finds the binaries ([WithBinDir], else
// $LEDGER_PG_BIN, else `pg_config --bindir`, else the highest
// /usr/lib/postgresql/*/bin holding initdb), runs initdb once when the
// data directory has no PG_VERSION (in a directory beside it, moved in
// once the superuser's password is kept: a start killed during initdb
// leaves the data directory empty), starts the server with `pg_ctl start
// -w` listening on 127.0.0.1 (a free port, or the one the data directory
// used last time, remembered in the file pgcluster.port inside it), and
// creates the database `ledger` owned by the application role [AppRole]
// and any other login roles asked for ([WithRoles]). A second Start on
// the same data directory reuses the data, and reuses a server that is
// still running from it.
//
// Every connection needs a password (scram-sha-256). The roles'
// passwords are kept in the auth directory ([WithAuthDir], 0700, one
// file of mode 0600 per role), which belongs to the calling user and is
// never inside the data directory, so only that user reads them (a
// cluster of before, which kept them in its data directory, gets new
// passwords and loses the old files at its next Start).
//
// PostgreSQL refuses to run as root. When the calling process is root,
// initdb, pg_ctl and postgres run as the dedicated system user
// [SystemUser], created when missing (useradd --system, no home, no
// login shell) as a package's install step would create it: never a
// shared user such as nobody. The data directory and the socket
// directory are given to it (chown). The modes of existing directories
// above the data directory are never changed: when that user may not
// enter one of them, Start fails with [ErrUnreachable] naming the
// directory, and the caller puts the cluster where the user can reach
// it. The server's own log goes to pgcluster.log inside the data
// directory; its tail is quoted in start errors.
//
// Before anything is started or chowned, Start refuses ([ErrUntrusted],
// naming the path and why) a data directory, or an entry directly in it,
// owned by another user than the caller or PostgreSQL's, or writable by
// group or others, and an initialised cluster whose pg_hba.conf lets
// clients in other than by scram-sha-256 (once the cluster has its
// superuser password) or whose postgresql.conf / postgresql.auto.conf
// sets what pgcluster never sets (trust.go).
//
// The server runs with max_connections [MaxConnections] and
// authentication_timeout [AuthenticationTimeout] (on its command line:
// a connection holds a slot while it authenticates), and each login role may be given a [RolePolicy]
// ([WithRolePolicy]: a CONNECTION LIMIT and session defaults; the limits
// must fit in what the server leaves to non-superusers) and statements
// only the superuser may run ([WithSetupSQL]); the databases postgres
// and template1 are closed to every other role. PostgreSQL 15 lets a
// login role change its own password and session defaults:
// [Cluster.GuardRoles] puts a role that did back as Start made it. A
// session may also SET its own timeouts and work_mem, and LISTEN and
// NOTIFY, which nothing denies: the guard cancels and ends the sessions
// past their role's [SessionBounds] (time, memory, the notification
// queue, a transaction ID held by a role that only reads).
//
// Errors are of type [*Error] and match the sentinel errors of this
// package ([ErrBinariesNotFound], [ErrInitdb], ...) with errors.Is.
package pgcluster
