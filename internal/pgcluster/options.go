package pgcluster

import (
	"io"
	"time"
)

// Option configures Start.
type Option func(*config)

type config struct {
	binDir       string
	dataDir      string
	port         int
	fsync        bool
	log          io.Writer
	database     string
	startTimeout time.Duration
	superPW      string
	authDir      string
	roles        []string
	policies     map[string]RolePolicy
	setupSQL     string
}

func defaultConfig() config {
	return config{
		fsync:        true,
		log:          io.Discard,
		database:     DefaultDatabase,
		startTimeout: 60 * time.Second,
	}
}

// DefaultDatabase is the database Start creates when missing.
const DefaultDatabase = "ledger"

// WithBinDir names the directory holding initdb, pg_ctl and postgres.
// Default: $LEDGER_PG_BIN, else `pg_config --bindir`, else the highest
// /usr/lib/postgresql/*/bin (see FindBinDir).
func WithBinDir(dir string) Option { return func(c *config) { c.binDir = dir } }

// WithDataDir names the cluster's data directory (required). It is
// created when missing, initialised on first use, and reused as is by
// every later Start: nothing is lost across restarts.
func WithDataDir(dir string) Option { return func(c *config) { c.dataDir = dir } }

// WithPort sets the TCP port on 127.0.0.1. Default 0: the port the data
// directory used last time when it is free, else any free port.
func WithPort(port int) Option { return func(c *config) { c.port = port } }

// WithFsync turns fsync on or off (default on). Off also turns off
// full_page_writes and passes --no-sync to initdb: fast, and fine for
// tests. Commits still survive a crash of the server process, but a crash
// of the machine can lose or corrupt data.
func WithFsync(on bool) Option { return func(c *config) { c.fsync = on } }

// WithLog receives pgcluster's progress messages (which binaries, initdb,
// start, the user PostgreSQL runs as). Default: discarded. The server's
// own log is the file pgcluster.log in the data directory.
func WithLog(w io.Writer) Option {
	return func(c *config) {
		if w == nil {
			w = io.Discard
		}
		c.log = w
	}
}

// WithDatabase names the database created when missing and used by URL
// (default "ledger").
func WithDatabase(name string) Option { return func(c *config) { c.database = name } }

// WithSuperuserPassword sets the superuser's password of a new cluster
// (default: generated). It is kept in SuperuserPasswordFile (in the auth directory) like a
// generated one; an existing cluster keeps its own.
func WithSuperuserPassword(pw string) Option { return func(c *config) { c.superPW = pw } }

// WithAuthDir names the directory of the roles' password files (mode
// 0700, created when missing; default: the data directory's path with
// ".auth" appended). It belongs to the calling user: as root, PostgreSQL
// runs as SystemUser and cannot read it.
func WithAuthDir(dir string) Option { return func(c *config) { c.authDir = dir } }

// WithRoles has Start create (or keep) these login roles besides the
// application role, each with a generated password kept in the auth
// directory (URLAs gives their URLs). Their rights in the database are
// granted by whoever owns its tables (the ledger's migrations).
func WithRoles(roles ...string) Option { return func(c *config) { c.roles = roles } }

// WithRolePolicy gives role (the application role or one of WithRoles)
// a connection limit and session defaults, set at every Start and kept
// by GuardRoles. The limits of all policies must add up to at most
// MaxConnections - SuperuserReservedConnections (Start refuses more).
func WithRolePolicy(role string, p RolePolicy) Option {
	return func(c *config) {
		if c.policies == nil {
			c.policies = map[string]RolePolicy{}
		}
		c.policies[role] = p
	}
}

// WithSetupSQL has Start run these statements in the database as the
// superuser, after the roles and the database exist, at every Start:
// what only a superuser may do (revoking the execution of built-in
// functions from PUBLIC, say). They must give the same result when run
// again.
func WithSetupSQL(sql string) Option { return func(c *config) { c.setupSQL = sql } }
