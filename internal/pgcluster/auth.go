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
)

// Files pgcluster keeps in the data directory for authentication, mode
// 0600: the generated passwords of the superuser and of the application
// role.
const (
	SuperuserPasswordFile = "pgcluster.superuser.password"
	AppPasswordFile       = "pgcluster.app.password"
)

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

// readPassword reads a password file of the data directory ("" when it
// does not exist).
func (c *Cluster) readPassword(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(c.dataDir, name))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", newErr(ErrPrepare, err, "read %s", name)
	}
	return strings.TrimSpace(string(b)), nil
}

func (c *Cluster) writePassword(name, pw string) error {
	path := filepath.Join(c.dataDir, name)
	if err := os.WriteFile(path, []byte(pw+"\n"), 0o600); err != nil {
		return newErr(ErrPrepare, err, "write %s", path)
	}
	return os.Chmod(path, 0o600)
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
	if err := c.writePassword(SuperuserPasswordFile, pw); err != nil {
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
	fmt.Fprintf(c.log, "pgcluster: the cluster used trust authentication; it now requires passwords (%s)\n", SuperuserPasswordFile)
	return nil
}

// ensureAppRole creates the application role (a login, not a superuser,
// no CREATEDB or CREATEROLE) with its password, or sets the password of
// an existing one from the password file.
func (c *Cluster) ensureAppRole(ctx context.Context, conn *pgx.Conn) error {
	pw, err := c.readPassword(AppPasswordFile)
	if err != nil {
		return err
	}
	if pw == "" {
		pw = newPassword()
		if err := c.writePassword(AppPasswordFile, pw); err != nil {
			return err
		}
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", AppRole).Scan(&exists); err != nil {
		return newErr(ErrCreateDatabase, err, "look up role %s", AppRole)
	}
	verb := "CREATE"
	if exists {
		verb = "ALTER"
	}
	q := fmt.Sprintf("%s ROLE %s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD '%s'", verb, AppRole, pw)
	if _, err := conn.Exec(ctx, q); err != nil {
		return newErr(ErrCreateDatabase, err, "%s ROLE %s", verb, AppRole)
	}
	c.appPW = pw
	return nil
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
