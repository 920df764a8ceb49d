package migrations

import "time"

// What only a superuser may set, and so no migration can (they run as
// the owner): each role's share of the server's connections, the
// reporting role's session bounds, and which built-in functions the
// roles may call. `ledger dev` applies them to its private cluster at
// every start (pgcluster.WithRolePolicy, pgcluster.WithSetupSQL) and
// keeps them (pgcluster.GuardRoles); docker-compose.yml's init script
// runs the same statements (TestDockerCompose holds them equal); README,
// "PostgreSQL roles", gives them to other deployments. Decisions
// #150-#153.

// ConnLimits are the roles' CONNECTION LIMITs. They add up to 88, below
// the 97 connections a server of max_connections 100 leaves to roles
// other than the superuser (PostgreSQL 15 has no reserved_connections
// for them): a role at its limit never takes the others' connections.
// Reporting, the role handed to people and their tools, has the fewest.
var ConnLimits = map[string]int{
	RoleOwner:     10, // ledger migrate, ledger dev's start
	RoleProjector: 30, // projectors: a pool of a few connections each
	RoleAPI:       40, // ledger serve instances and the console
	RoleReporting: 8,  // psql, BI tools, audit, replay, load --check, recover
}

// ReportingSettings are the reporting role's session defaults. The
// timeouts end what a forgotten psql or a runaway query holds (a session
// may lower or raise them: they are for tools that behave; ledger dev
// holds the raised ones to ReportingStatement and
// ReportingIdleInTransaction all the same); temp_file_limit bounds the
// disk a query's sorts and hashes may take, and binds (only a superuser
// may change it).
var ReportingSettings = map[string]string{
	"statement_timeout":                   "5min",
	"idle_in_transaction_session_timeout": "1min",
	"temp_file_limit":                     "1GB",
}

// What ledger dev's guard (pgcluster.SessionBounds) holds a reporting
// session to, whatever it SETs: the two timeouts of ReportingSettings,
// a transaction of at most ReportingTransaction, however busy (its
// snapshot holds back VACUUM on every table), decision 253; and at most
// ReportingMemory of private memory per backend (a session may SET
// work_mem as high as it likes and grow a hash table until the OOM
// killer restarts the server under every session; a report with the
// default work_mem of 4MB holds a few tens of MiB), decision 394; and
// the server's notification queue at most ReportingNotifyQueue full
// while it has sessions (1% of 8 GB: the ledger sends no notifications;
// a listener that does not read keeps every one on disk), decision 395.
const (
	ReportingStatement         = 5 * time.Minute
	ReportingIdleInTransaction = time.Minute
	ReportingTransaction       = 15 * time.Minute
	ReportingMemory            = 512 << 20
	ReportingNotifyQueue       = 0.01
)

// ClusterSQL runs as the superuser in the ledger's database, after the
// roles exist; running it again gives the same result. PostgreSQL lets
// PUBLIC execute its built-in functions: the large-object creators
// (lo_creat, lo_create, lo_from_bytea, lo_import) would let the reporting
// role fill the disk with objects nothing bounds, and the advisory
// locks would let any role hold the lock the projector takes to run
// alone (projections.Lock) or the one golang-migrate takes, so a
// reporting user could stop the projector or the migrations. Large
// objects serve none of the ledger's roles; advisory locks are for the
// owner (migrations) and the projector only.
const ClusterSQL = `DO $$
DECLARE f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
           WHERE p.pronamespace = 'pg_catalog'::regnamespace
             AND p.proname IN ('lo_creat', 'lo_create', 'lo_from_bytea', 'lo_import') LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
  FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
           WHERE p.pronamespace = 'pg_catalog'::regnamespace
             AND (p.proname LIKE 'pg\_advisory\_%' OR p.proname LIKE 'pg\_try\_advisory\_%') LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO ledger, ledger_projector', f);
  END LOOP;
END $$;
`
