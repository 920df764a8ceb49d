package pgcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cluster-ledger/ledger/internal/redact"
)

// The passwords of the cluster's roles are kept in the auth directory
// (WithAuthDir), one file per role, ROLE.password, mode 0600 in a
// directory of mode 0700 owned by the calling user: never inside the
// data directory, which belongs to the user PostgreSQL runs as, so that
// only the ledger's own user reads them.
const (
	// SuperuserPasswordFile holds the superuser's password.
	SuperuserPasswordFile = Superuser + ".password"
	// AppPasswordFile holds the application role's password.
	AppPasswordFile = AppRole + ".password"
)

// Where pgcluster kept the two passwords before the auth directory: in
// the data directory. A cluster found so is given new passwords
// (whoever could read the data directory could read them) and the old
// files are removed.
const (
	legacySuperuserPasswordFile = "pgcluster.superuser.password"
	legacyAppPasswordFile       = "pgcluster.app.password"
)

// PasswordFile is the name of role's password file in the auth
// directory.
func PasswordFile(role string) string { return role + ".password" }

// AppRole is the role URL connects as: it owns the database (and so the
// tables the migrations create through it) and is not a superuser, so a
// leaked application URL cannot read files or run programs on the server
// (COPY ... TO PROGRAM, pg_read_file) or touch other databases.
const AppRole = "ledger"

// hbaConf is the pg_hba.conf of a cluster: no trust anywhere, a password
// (SCRAM, never sent in clear) for every connection, local or TCP.
const hbaConf = `# Written by pgcluster: password (scram-sha-256) for every connection.
local   all   all                  scram-sha-256
host    all   all   127.0.0.1/32   scram-sha-256
host    all   all   ::1/128        scram-sha-256
`

func newPassword() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b) // hex: safe inside SQL literals and URLs
}

// readPassword reads role's password file in the auth directory (""
// when it does not exist).
func (c *Cluster) readPassword(role string) (string, error) {
	return readPasswordFile(filepath.Join(c.authDir, PasswordFile(role)))
}

func readPasswordFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", newErr(ErrPrepare, err, "read %s", path)
	}
	return strings.TrimSpace(string(b)), nil
}

// writePassword replaces role's password file (mode 0600, written
// beside and renamed, so a crash leaves the old or the new password).
func (c *Cluster) writePassword(role, pw string) error {
	path := filepath.Join(c.authDir, PasswordFile(role))
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(pw+"\n"), 0o600); err != nil {
		return newErr(ErrPrepare, err, "write %s", tmp)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return newErr(ErrPrepare, err, "chmod %s", tmp)
	}
	if err := os.Rename(tmp, path); err != nil {
		return newErr(ErrPrepare, err, "write %s", path)
	}
	return nil
}

// prepareAuthDir creates the auth directory (0700) and refuses one that
// others may read or write.
func (c *Cluster) prepareAuthDir() error {
	if err := os.MkdirAll(c.authDir, 0o700); err != nil {
		return newErr(ErrPrepare, err, "create %s", c.authDir)
	}
	fi, err := os.Stat(c.authDir)
	if err != nil {
		return newErr(ErrPrepare, err, "%s", c.authDir)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return newErr(ErrPrepare, nil, "%s holds the cluster's passwords but has mode %#o: chmod 700 it", c.authDir, fi.Mode().Perm())
	}
	return nil
}

// adoptLegacyPasswords reads the passwords a cluster of before kept in
// its data directory, when the auth directory has none yet. It reports
// whether it found them: Start then gives the roles new passwords and
// removes the old files.
func (c *Cluster) adoptLegacyPasswords() (bool, error) {
	if pw, err := c.readPassword(Superuser); err != nil || pw != "" {
		return false, err
	}
	pw, err := readPasswordFile(filepath.Join(c.dataDir, legacySuperuserPasswordFile))
	if err != nil || pw == "" {
		return false, err
	}
	c.superPW = pw
	return true, nil
}

// rotateLegacyPasswords gives the superuser a new password, kept in the
// auth directory, and removes the password files of the data directory
// (the application role's new one is set by ensureRole, its file being
// missing from the auth directory).
func (c *Cluster) rotateLegacyPasswords(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URLFor("postgres"))
	if err != nil {
		return newErr(ErrStart, redact.Error(err, c.URLFor("postgres")), "connect as %s", Superuser)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	pw := newPassword()
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER ROLE %s PASSWORD '%s'", Superuser, pw)); err != nil {
		return newErr(ErrStart, err, "set the superuser's new password")
	}
	if err := c.writePassword(Superuser, pw); err != nil {
		return err
	}
	c.superPW = pw
	for _, f := range []string{legacySuperuserPasswordFile, legacyAppPasswordFile} {
		if err := os.Remove(filepath.Join(c.dataDir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return newErr(ErrPrepare, err, "remove %s", f)
		}
	}
	fmt.Fprintf(c.log, "pgcluster: the passwords were kept in the data directory; the roles have new ones in %s\n", c.authDir)
	return nil
}

// pwFile writes the superuser's password where initdb (perhaps running
// as the unprivileged user) can read it, and returns its path and a
// cleanup.
func (c *Cluster) pwFile(pw string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "pgcluster-pw-")
	if err != nil {
		return "", nil, newErr(ErrPrepare, err, "create a password file")
	}
	done := func() { os.RemoveAll(dir) }
	path := filepath.Join(dir, "pw")
	if err := os.WriteFile(path, []byte(pw+"\n"), 0o600); err != nil {
		done()
		return "", nil, newErr(ErrPrepare, err, "write the password file")
	}
	if err := c.cred.chownAll(dir); err != nil {
		done()
		return "", nil, newErr(ErrPrepare, err, "chown the password file")
	}
	return path, done, nil
}

// secure makes a cluster initialised before pgcluster used passwords
// (trust authentication, no password file) like a new one: a superuser
// password and a pg_hba.conf asking for it, then a reload. The server
// must be running.
func (c *Cluster) secure(ctx context.Context) error {
	if c.superPW != "" {
		return nil
	}
	pw := newPassword()
	conn, err := pgx.Connect(ctx, c.urlAs(Superuser, "", "postgres"))
	if err != nil {
		return newErr(ErrStart, err, "connect to secure the cluster")
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SET password_encryption = 'scram-sha-256'"); err != nil {
		return newErr(ErrStart, err, "secure the cluster")
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER ROLE %s PASSWORD '%s'", Superuser, pw)); err != nil {
		return newErr(ErrStart, err, "set the superuser's password")
	}
	if err := c.writePassword(Superuser, pw); err != nil {
		return err
	}
	hba := filepath.Join(c.dataDir, "pg_hba.conf")
	if err := os.WriteFile(hba, []byte(hbaConf), 0o600); err != nil {
		return newErr(ErrPrepare, err, "write %s", hba)
	}
	if err := c.cred.chownAll(hba); err != nil {
		return newErr(ErrPrepare, err, "chown %s", hba)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return newErr(ErrStart, err, "reload pg_hba.conf")
	}
	c.superPW = pw
	fmt.Fprintf(c.log, "pgcluster: the cluster used trust authentication; it now requires passwords (%s)\n", filepath.Join(c.authDir, SuperuserPasswordFile))
	return nil
}

// ensureRole creates a login role (not a superuser, no CREATEDB,
// CREATEROLE, REPLICATION or BYPASSRLS) with the password of its file in
// the auth directory, or gives an existing role those attributes and
// that password; a missing file gets a new password.
func (c *Cluster) ensureRole(ctx context.Context, conn *pgx.Conn, role string) error {
	pw, err := c.readPassword(role)
	if err != nil {
		return err
	}
	if pw == "" {
		pw = newPassword()
		if err := c.writePassword(role, pw); err != nil {
			return err
		}
	}
	if err := EnsureLoginRole(ctx, conn, role, pw); err != nil {
		return newErr(ErrCreateDatabase, err, "role %s", role)
	}
	c.passwords[role] = pw
	return nil
}

// EnsureLoginRole creates role as a login with password, not a
// superuser and without CREATEDB, CREATEROLE, REPLICATION or BYPASSRLS,
// or gives an existing role (say one a migration created without login)
// those attributes and that password. conn must be a superuser's (or a
// CREATEROLE role's). Roles are the cluster's, shared by its databases;
// two callers at once are fine.
func EnsureLoginRole(ctx context.Context, conn *pgx.Conn, role, password string) error {
	if strings.ContainsAny(password, `'\`) {
		return fmt.Errorf("password of %s: quotes and backslashes are not allowed", role)
	}
	attrs := "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD '" + password + "'"
	name := pgx.Identifier{role}.Sanitize()
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", role).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		_, err := conn.Exec(ctx, "CREATE ROLE "+name+" "+attrs)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || (pgErr.Code != "42710" && pgErr.Code != "23505") {
			return redact.Secrets(err, password)
		}
		// duplicate_object / unique_violation: created meanwhile.
	}
	_, err := conn.Exec(ctx, "ALTER ROLE "+name+" "+attrs)
	return redact.Secrets(err, password)
}

// adoptObjects gives the application role the database and whatever the
// superuser created in its public schema (a database projected before
// pgcluster had an application role), so that the service, connecting as
// that role, owns its tables and can migrate them.
func (c *Cluster) adoptObjects(ctx context.Context, conn *pgx.Conn) error {
	db := pgx.Identifier{c.database}.Sanitize()
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+db+" OWNER TO "+AppRole); err != nil {
		return newErr(ErrCreateDatabase, err, "give database %s to %s", c.database, AppRole)
	}
	in, err := pgx.Connect(ctx, c.urlAs(Superuser, c.superPW, c.database))
	if err != nil {
		return newErr(ErrCreateDatabase, err, "connect to %s", c.database)
	}
	defer in.Close(context.WithoutCancel(ctx))
	_, err = in.Exec(ctx, `DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
             AND pg_get_userbyid(c.relowner) <> '`+AppRole+`' LOOP
    EXECUTE format('ALTER %s public.%I OWNER TO `+AppRole+`',
      CASE r.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'S' THEN 'SEQUENCE' WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END,
      r.relname);
  END LOOP;
  FOR r IN SELECT p.oid::regprocedure AS sig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE n.nspname = 'public' AND pg_get_userbyid(p.proowner) <> '`+AppRole+`' LOOP
    EXECUTE format('ALTER ROUTINE %s OWNER TO `+AppRole+`', r.sig);
  END LOOP;
END $$`)
	if err != nil {
		return newErr(ErrCreateDatabase, err, "give the objects of %s to %s", c.database, AppRole)
	}
	return nil
}

// urlAs is the URL of database as role with password ("" for none).
func (c *Cluster) urlAs(role, password, database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(role),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	if password != "" {
		u.User = url.UserPassword(role, password)
	}
	return u.String()
}
