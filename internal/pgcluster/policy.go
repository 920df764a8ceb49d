package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cluster-ledger/ledger/internal/redact"
)

// MaxConnections is the server's max_connections, given on its command
// line so that no configuration file changes it. With
// SuperuserReservedConnections kept for the superuser, MaxConnections -
// SuperuserReservedConnections are left for the other roles; Start
// refuses role policies whose connection limits add up to more, so a
// role at its limit never takes another role's connections (PostgreSQL
// 15 has no reserved_connections for non-superusers).
const (
	MaxConnections               = 100
	SuperuserReservedConnections = 3
)

// AuthenticationTimeout is the server's authentication_timeout, given on
// its command line: how long a connection may take from its accept to
// the end of its password exchange. PostgreSQL 15 gives a connection its
// slot of MaxConnections once the startup packet names a role, before
// the password, and checks the roles' connection limits only after it,
// so anyone who can reach the port, without a password, holds slots for
// this long each: the default, a minute, let one silent process keep
// every role out, the superuser too (decision 462). A client that has
// the password is done in milliseconds on loopback.
const AuthenticationTimeout = 2 * time.Second

// RolePolicy is what a login role may hold of the server, set by the
// superuser (the role cannot change it: CONNECTION LIMIT needs
// CREATEROLE, and settings of superuser context such as temp_file_limit
// need a superuser).
type RolePolicy struct {
	// ConnLimit is the role's CONNECTION LIMIT (connections at once,
	// every database), at least 1.
	ConnLimit int
	// Settings are the role's session defaults (ALTER ROLE ... SET), as
	// name -> value. Settings a user may change (statement_timeout)
	// are defaults for tools that behave; those of superuser context
	// (temp_file_limit) bind.
	Settings map[string]string
	// Bounds are what GuardRoles enforces of the role's sessions
	// whatever they SET: a session may raise its own statement_timeout
	// or idle_in_transaction_session_timeout (they are of user context,
	// and PostgreSQL 15 cannot deny a SET of those), not lift these.
	Bounds SessionBounds
}

// SessionBounds bound how long a session of a role may hold the server
// (zero: no bound). GuardRoles, as the superuser, cancels a statement
// that has run longer than Statement (pg_cancel_backend, as
// statement_timeout would) and ends the session (pg_terminate_backend)
// if it still runs CancelGrace later (a DO block may catch the cancel);
// it ends a session idle in a transaction longer than
// IdleInTransaction, and one whose transaction has lasted longer than
// Transaction, however busy: an open transaction's snapshot keeps
// VACUUM from removing the rows the projector's updates leave behind,
// so every table of the projection would grow without bound.
//
// Memory bounds the private memory one backend of the role may hold (its
// heap, as /proc tells it: the shared buffers every backend maps are
// not counted), in bytes. A session may SET work_mem and
// hash_mem_multiplier as high as it likes (user settings, PostgreSQL 15
// cannot deny the SET) and grow one hash table until the kernel's OOM
// killer ends a backend, which makes PostgreSQL restart every session,
// the projector's and the API's included. GuardRoles ends the session
// (pg_terminate_backend; a cancel would leave its SETs, and the memory
// with the C library, in place) of a backend found past it: every
// interval, so a backend may pass it by what it allocates in one
// interval, and by what a hash table's last doubling takes before the
// backend next looks at its interrupts.
//
// NotifyQueue bounds the server's queue of notifications (NOTIFY,
// pg_notify) while the role has sessions, as the fraction of its 8 GB
// on disk that pg_notification_queue_usage() reports. Any session may
// LISTEN and any may NOTIFY (neither needs a privilege), and one
// listener that does not read (its client stops reading the socket, or
// it sits in a statement or a transaction) keeps every notification
// sent after it on disk: a second session fills the 8 GB in under a
// minute, and nothing ends an idle session. The ledger uses no
// notifications, so past the bound GuardRoles ends every session of
// the role (the listener holding the queue is one of them; PostgreSQL
// does not tell which).
//
// ReadOnly ends a session of the role seen holding a transaction ID
// (pg_stat_activity.backend_xid). A role that only reads never needs
// one: PostgreSQL assigns it to a transaction that writes, locks rows,
// sends a notification or calls txid_current(), and the last two need
// no privilege. A loop of them with COMMIT in a DO block takes about
// 100,000 transaction IDs a second from one session: 200 million bring
// an anti-wraparound VACUUM of every table, and about 2 billion stop
// every write of the server, the projector's included, until a VACUUM
// has frozen them (decision 466).
type SessionBounds struct {
	Statement, IdleInTransaction, Transaction time.Duration
	Memory                                    int64
	NotifyQueue                               float64
	ReadOnly                                  bool
}

// CancelGrace is how long a cancelled statement may take to end before
// its session is ended.
const CancelGrace = 5 * time.Second

// zero reports whether b bounds nothing.
func (b SessionBounds) zero() bool { return b == SessionBounds{} }

// overruns finds the sessions of role that passed b, in the order of
// the rule that ends them: a transaction ID held by a ReadOnly role, a
// statement past Statement+CancelGrace, idle
// in a transaction past IdleInTransaction, a transaction past
// Transaction (terminate), a statement past Statement (cancel). Bounds
// of 0 are given as +Inf seconds: never passed.
const overruns = `SELECT pid, coalesce(query_start, now()),
  CASE
    WHEN $6::bool AND backend_xid IS NOT NULL THEN 'terminate:transaction ID'
    WHEN state = 'active' AND extract(epoch FROM now() - query_start) > $2::float8 + $5::float8 THEN 'terminate:statement'
    WHEN state LIKE 'idle in transaction%' AND extract(epoch FROM now() - state_change) > $3::float8 THEN 'terminate:idle in transaction'
    WHEN xact_start IS NOT NULL AND extract(epoch FROM now() - xact_start) > $4::float8 THEN 'terminate:transaction'
    WHEN state = 'active' AND extract(epoch FROM now() - query_start) > $2::float8 THEN 'cancel:statement'
  END
FROM pg_stat_activity
WHERE usename = $1::text AND backend_type = 'client backend' AND pid <> pg_backend_pid()`

// endOverruns cancels or ends the sessions of role that passed b, and
// tells ended of each (once per statement for a cancel: cancelled holds
// the start of the statement each backend was cancelled in, and what it
// returns the same for the statements still running).
func endOverruns(ctx context.Context, conn *pgx.Conn, role string, b SessionBounds, cancelled map[int32]time.Time, ended func(role string, pid int, what string)) (map[int32]time.Time, error) {
	secs := func(d time.Duration) float64 {
		if d <= 0 {
			return math.Inf(1)
		}
		return d.Seconds()
	}
	rows, err := conn.Query(ctx, overruns, role, secs(b.Statement), secs(b.IdleInTransaction), secs(b.Transaction), CancelGrace.Seconds(), b.ReadOnly)
	if err != nil {
		return cancelled, err
	}
	type overrun struct {
		pid   int32
		start time.Time
		rule  *string
	}
	var found []overrun
	var o overrun
	if _, err := pgx.ForEachRow(rows, []any{&o.pid, &o.start, &o.rule}, func() error {
		if o.rule != nil {
			found = append(found, o)
		}
		return nil
	}); err != nil {
		return cancelled, err
	}
	still := map[int32]time.Time{}
	for _, o := range found {
		action, what, _ := strings.Cut(*o.rule, ":")
		fn, words := "pg_terminate_backend", "session ended: "+what+" past its bound"
		if what == "transaction ID" {
			words = "session ended: it held a transaction ID, which a role that only reads never needs"
		}
		if action == "cancel" {
			fn, words = "pg_cancel_backend", "statement cancelled: past its bound"
			if t, ok := cancelled[o.pid]; ok && t.Equal(o.start) {
				words = "" // again, quietly: the cancel may have come between two statements of a DO block
			}
			still[o.pid] = o.start
		}
		if _, err := conn.Exec(ctx, "SELECT "+fn+"($1)", o.pid); err != nil {
			return still, err
		}
		if words != "" && ended != nil {
			ended(role, int(o.pid), words)
		}
	}
	return still, nil
}

// roleBackends lists the backends working for role's sessions: their
// own, and the parallel workers of their statements (each holds its own
// memory).
const roleBackends = `SELECT pid FROM pg_stat_activity
WHERE usename = $1::text AND backend_type IN ('client backend', 'parallel worker') AND pid <> pg_backend_pid()`

// errMemoryUnknown: the guard cannot read a backend's memory (not Linux,
// or /proc is not readable): the memory bound is not enforced.
var errMemoryUnknown = errors.New("the backends' memory cannot be read from /proc")

// endMemoryOverruns ends the session of every backend of role that holds
// more than limit bytes of private memory, and tells ended of each.
func endMemoryOverruns(ctx context.Context, conn *pgx.Conn, role string, limit int64, ended func(role string, pid int, what string)) error {
	pids, err := backendPids(ctx, conn, roleBackends, role)
	if err != nil {
		return err
	}
	if _, ok := processAnonMemory(os.Getpid()); !ok && len(pids) > 0 {
		return errMemoryUnknown
	}
	for _, pid := range pids {
		held, ok := processAnonMemory(int(pid))
		if !ok || held <= limit { // gone since, or within its bound
			continue
		}
		if err := endSession(ctx, conn, role, pid, fmt.Sprintf("session ended: memory past its bound (%d MiB held, %d MiB allowed)", held>>20, limit>>20), ended); err != nil {
			return err
		}
	}
	return nil
}

// backendPids lists the pids query returns for role ($1).
func backendPids(ctx context.Context, conn *pgx.Conn, query, role string) ([]int32, error) {
	rows, err := conn.Query(ctx, query, role)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int32])
}

// endSession ends backend pid's session (terminated, not cancelled: a
// cancelled session keeps its SETs) and tells ended why.
func endSession(ctx context.Context, conn *pgx.Conn, role string, pid int32, why string, ended func(role string, pid int, what string)) error {
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		return err
	}
	if ended != nil {
		ended(role, int(pid), why)
	}
	return nil
}

// endNotifyQueueHolders ends every session of role while the server's
// notification queue is fuller than limit (a fraction), and tells ended
// of each.
func endNotifyQueueHolders(ctx context.Context, conn *pgx.Conn, role string, limit float64, ended func(role string, pid int, what string)) error {
	var usage float64
	if err := conn.QueryRow(ctx, "SELECT pg_notification_queue_usage()").Scan(&usage); err != nil {
		return err
	}
	if usage <= limit {
		return nil
	}
	pids, err := backendPids(ctx, conn, `SELECT pid FROM pg_stat_activity
WHERE usename = $1::text AND backend_type = 'client backend' AND pid <> pg_backend_pid()`, role)
	if err != nil {
		return err
	}
	why := fmt.Sprintf("session ended: the notification queue past its bound (%.2f%% of its 8 GB held, %.2f%% allowed)", usage*100, limit*100)
	for _, pid := range pids {
		if err := endSession(ctx, conn, role, pid, why, ended); err != nil {
			return err
		}
	}
	return nil
}

// applyPolicy gives role exactly policy's connection limit and settings:
// every other session default, in any database, is removed.
func applyPolicy(ctx context.Context, conn *pgx.Conn, role string, policy RolePolicy) error {
	name := pgx.Identifier{role}.Sanitize()
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER ROLE %s CONNECTION LIMIT %d", name, policy.ConnLimit)); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, `SELECT coalesce(d.datname, '') FROM pg_db_role_setting s
		JOIN pg_roles r ON r.oid = s.setrole LEFT JOIN pg_database d ON d.oid = s.setdatabase WHERE r.rolname = $1`, role)
	if err != nil {
		return err
	}
	dbs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, db := range dbs {
		in := ""
		if db != "" {
			in = " IN DATABASE " + pgx.Identifier{db}.Sanitize()
		}
		if _, err := conn.Exec(ctx, "ALTER ROLE "+name+in+" RESET ALL"); err != nil {
			return err
		}
	}
	keys := make([]string, 0, len(policy.Settings))
	for k := range policy.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := policy.Settings[k]
		if strings.ContainsAny(v, `'\`) {
			return fmt.Errorf("setting %s of %s: quotes and backslashes are not allowed", k, role)
		}
		if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER ROLE %s SET %s = '%s'", name, pgx.Identifier{k}.Sanitize(), v)); err != nil {
			return err
		}
	}
	return nil
}

// checkPolicies refuses connection limits that add up to more than the
// connections left for roles other than the superuser.
func checkPolicies(policies map[string]RolePolicy) error {
	sum := 0
	for role, p := range policies {
		if p.ConnLimit < 1 {
			return fmt.Errorf("role %s: a connection limit of %d", role, p.ConnLimit)
		}
		sum += p.ConnLimit
	}
	if free := MaxConnections - SuperuserReservedConnections; sum > free {
		return fmt.Errorf("the roles' connection limits add up to %d, more than the %d connections the server leaves to roles other than the superuser", sum, free)
	}
	return nil
}

// roleFingerprint is what a role could change of itself, and what the
// superuser must keep: its password's verifier (PostgreSQL 15 lets every
// login role change its own password), its attributes, its session
// defaults in every database (a role may set its own) and its members.
const roleFingerprint = `SELECT a.rolname,
  concat_ws('|', coalesce(a.rolpassword, ''), a.rolconnlimit, a.rolcanlogin, a.rolsuper, a.rolcreaterole, a.rolcreatedb,
    a.rolreplication, a.rolbypassrls, a.rolinherit, coalesce(a.rolvaliduntil::text, ''),
    coalesce((SELECT string_agg(s.setdatabase::text || ':' || array_to_string(s.setconfig, ','), ';' ORDER BY s.setdatabase)
              FROM pg_db_role_setting s WHERE s.setrole = a.oid), ''),
    coalesce((SELECT string_agg(m.member::regrole::text, ',' ORDER BY m.member) FROM pg_auth_members m WHERE m.roleid = a.oid), ''))
FROM pg_authid a WHERE a.rolname = ANY($1)`

// fingerprints reads the fingerprint of each of roles.
func fingerprints(ctx context.Context, conn *pgx.Conn, roles []string) (map[string]string, error) {
	rows, err := conn.Query(ctx, roleFingerprint, roles)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var name, fp string
	_, err = pgx.ForEachRow(rows, []any{&name, &fp}, func() error {
		out[name] = fp
		return nil
	})
	return out, err
}

// managedRoles are the login roles the cluster created and keeps: the
// application role and those of WithRoles.
func (c *Cluster) managedRoles() []string { return append([]string{AppRole}, c.roles...) }

// ensureManagedRole gives role the login, attributes and password of its
// file, and its policy; its members are revoked (no role of the cluster
// is meant to be a member of another). All in one transaction: a session
// that connects as soon as the restored password works gets the policy's
// settings, never those the holder set (ALTER ROLE is transactional; the
// guard restoring the password first and the settings after let a
// session in between, which a test under load caught).
func (c *Cluster) ensureManagedRole(ctx context.Context, conn *pgx.Conn, role string) (err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return newErr(ErrCreateDatabase, err, "begin restoring role %s", role)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := c.ensureRole(ctx, conn, role); err != nil {
		return err
	}
	policy, ok := c.policies[role]
	if !ok {
		policy = RolePolicy{ConnLimit: -1} // no limit, no session defaults
	}
	if err := applyPolicy(ctx, conn, role, policy); err != nil {
		return newErr(ErrCreateDatabase, err, "the limits of role %s", role)
	}
	rows, err := conn.Query(ctx, `SELECT m.member::regrole::text FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid WHERE r.rolname = $1`, role)
	if err != nil {
		return newErr(ErrCreateDatabase, err, "the members of role %s", role)
	}
	members, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return newErr(ErrCreateDatabase, err, "the members of role %s", role)
	}
	for _, m := range members { // m is regrole's output: already quoted
		if _, err := conn.Exec(ctx, "REVOKE "+pgx.Identifier{role}.Sanitize()+" FROM "+m); err != nil {
			return newErr(ErrCreateDatabase, err, "revoke %s from %s", role, m)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return newErr(ErrCreateDatabase, err, "restore role %s", role)
	}
	return nil
}

// GuardRoles keeps the managed roles (the application role and those of
// WithRoles) as Start made them, until ctx ends: every interval it
// compares each role's password verifier, attributes, session defaults
// and members with what Start (or the last restore) left, and restores
// a role that changed: the password of its file, its policy, no members.
// PostgreSQL 15 lets any login role change its own password and session
// defaults (ALTER ROLE CURRENT_USER PASSWORD ..., ... SET statement_timeout
// = 0), which no privilege can forbid; so the URLs the caller handed out
// keep working and the limits keep holding, within interval. restored,
// if not nil, hears of each restore (the role and what changed, never a
// password). It returns ctx's error, or the first failure to read or
// restore.
//
// Every interval it also enforces each role's SessionBounds (its policy),
// whatever the role's sessions SET; ended, if not nil, hears of each
// statement cancelled and session ended (the role, the backend's pid,
// what passed its bound).
func (c *Cluster) GuardRoles(ctx context.Context, interval time.Duration, restored func(role, what string), ended func(role string, pid int, what string)) error {
	conn, err := c.superConn(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if conn != nil {
			conn.Close(context.WithoutCancel(ctx))
		}
	}()
	roles := c.managedRoles()
	want, err := fingerprints(ctx, conn, roles)
	if err != nil {
		return fmt.Errorf("pgcluster: read the roles: %w", err)
	}
	cancelled := map[string]map[int32]time.Time{} // per role, the statement each backend was cancelled in
	failing := map[string]bool{}                  // per role, the bounds could not be enforced at the last tick (told once)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if conn == nil || conn.IsClosed() || conn.Ping(ctx) != nil {
			if conn != nil {
				conn.Close(context.WithoutCancel(ctx))
				conn = nil
			}
			if conn, err = c.superConn(ctx); err != nil {
				conn = nil
				if ctx.Err() != nil {
					return ctx.Err()
				}
				continue // the server restarts or is stopping: try again
			}
		}
		for _, role := range roles {
			if b := c.policies[role].Bounds; !b.zero() {
				cancelled[role], err = endOverruns(ctx, conn, role, b, cancelled[role], ended)
				if err == nil && b.Memory > 0 {
					err = endMemoryOverruns(ctx, conn, role, b.Memory, ended)
				}
				if err == nil && b.NotifyQueue > 0 {
					err = endNotifyQueueHolders(ctx, conn, role, b.NotifyQueue, ended)
				}
				switch {
				case err != nil && ctx.Err() != nil:
					return ctx.Err()
				case err != nil && !failing[role] && ended != nil:
					ended(role, 0, "its bounds cannot be enforced now: "+err.Error())
				}
				failing[role] = err != nil
			}
		}
		got, err := fingerprints(ctx, conn, roles)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		for _, role := range roles {
			if got[role] == want[role] {
				continue
			}
			what := changed(want[role], got[role])
			if err := c.ensureManagedRole(ctx, conn, role); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				// The holder may be changing the role at the same
				// moment ("tuple concurrently updated"): the guard
				// goes on, and restores it at the next tick (an
				// outside attack stopped it so, for good).
				continue
			}
			now, err := fingerprints(ctx, conn, []string{role})
			if err != nil {
				continue
			}
			want[role] = now[role]
			if restored != nil {
				restored(role, what)
			}
		}
	}
}

// changed words which parts of a role's fingerprint differ.
func changed(was, is string) string {
	names := []string{"password", "connection limit", "login", "superuser", "createrole", "createdb", "replication", "bypassrls", "inherit", "valid until", "session defaults", "members"}
	a, b := strings.Split(was, "|"), strings.Split(is, "|")
	var out []string
	for i, n := range names {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return "dropped or recreated"
	}
	return strings.Join(out, ", ")
}

// superConn connects to the cluster's database as the superuser.
func (c *Cluster) superConn(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, c.URLFor(c.database))
	if err != nil {
		return nil, newErr(ErrStart, redact.Error(err, c.URLFor(c.database)), "connect as %s", Superuser)
	}
	// This session sets the roles' passwords: a statement of it that
	// fails must not be written to the server's log with its text (the
	// password in clear; PostgreSQL logs a failing statement from
	// log_min_error_statement = error). The error still comes back here.
	if _, err := conn.Exec(ctx, "SET log_min_error_statement = panic"); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, newErr(ErrStart, err, "configure the %s session", Superuser)
	}
	return conn, nil
}

// runSetupSQL runs the statements of WithSetupSQL in the database, as
// the superuser, at every Start (they must give the same result when run
// again).
func (c *Cluster) runSetupSQL(ctx context.Context) error {
	if c.setupSQL == "" {
		return nil
	}
	conn, err := c.superConn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, c.setupSQL); err != nil {
		return newErr(ErrCreateDatabase, err, "the setup statements in %s", c.database)
	}
	return nil
}
