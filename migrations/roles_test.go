package migrations_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cluster-ledger/ledger/internal/pgcluster"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/migrations"
)

// The tables README documents ("Tables"): what the readers may read.
var documented = []string{"events", "consumers", "hosts", "allocations", "consumer_state", "decisions",
	"allocation_history", "ownership", "ownership_history", "checkpoints", "snapshots", "halted_pools", "projector_offsets", "saved_states", "pending_events"}

// rights is the whole matrix: every table of the schema, and each role's
// table privileges on it (S select, I insert, U update of every column,
// u update of the history's end columns only, D delete); a table missing
// here fails the test, so a migration that adds one must decide its rights.
var rights = map[string]map[string]string{
	"events":             {migrations.RoleProjector: "SI", migrations.RoleAPI: "S", migrations.RoleReporting: "S"},
	"decisions":          {migrations.RoleProjector: "SI", migrations.RoleAPI: "S", migrations.RoleReporting: "S"},
	"snapshots":          {migrations.RoleProjector: "SI", migrations.RoleAPI: "S", migrations.RoleReporting: "S"},
	"allocation_history": {migrations.RoleProjector: "SIu", migrations.RoleAPI: "S", migrations.RoleReporting: "S"},
	"ownership_history":  {migrations.RoleProjector: "SIu", migrations.RoleAPI: "S", migrations.RoleReporting: "S"},
	"consumers":          {migrations.RoleProjector: "SID", migrations.RoleAPI: "S", migrations.RoleReporting: "S"},
	"halted_pools":       {migrations.RoleProjector: "SID", migrations.RoleAPI: "S", migrations.RoleReporting: "S"},
	"consumer_state":     {migrations.RoleProjector: "SIUD", migrations.RoleAPI: "S", migrations.RoleReporting: "S"},
	"allocations":        {migrations.RoleProjector: "SIUD", migrations.RoleAPI: "S", migrations.RoleReporting: "S"},
	"ownership":          {migrations.RoleProjector: "SIUD", migrations.RoleAPI: "S", migrations.RoleReporting: "S"},
	"hosts":              {migrations.RoleProjector: "SIU", migrations.RoleAPI: "S", migrations.RoleReporting: "S"},
	"checkpoints":        {migrations.RoleProjector: "SIU", migrations.RoleAPI: "S", migrations.RoleReporting: "S"},
	"projector_offsets":  {migrations.RoleProjector: "SIU", migrations.RoleAPI: "S", migrations.RoleReporting: "S"},
	"saved_states":       {migrations.RoleProjector: "SIU", migrations.RoleAPI: "S", migrations.RoleReporting: "S"},
	"pending_events":     {migrations.RoleProjector: "SID", migrations.RoleAPI: "S", migrations.RoleReporting: "S"},
	"schema_migrations":  {migrations.RoleProjector: "S", migrations.RoleAPI: "S", migrations.RoleReporting: ""},
}

// functions each role may call.
var functions = map[string][]string{
	migrations.RoleProjector: nil,
	migrations.RoleAPI:       {"allocations_as_of", "allocations_as_of_time", "consumer_and_ancestors"},
	migrations.RoleReporting: {"allocations_as_of", "allocations_as_of_time", "consumer_and_ancestors"},
}

func checkRights(t *testing.T, ctx context.Context, admin string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tables []string
	if err := conn.QueryRow(ctx, `SELECT array_agg(tablename::text ORDER BY tablename) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	for _, table := range tables {
		want, ok := rights[table]
		if !ok {
			t.Errorf("table %s has no rights decided (add it to the matrix, its grants to a migration, and README's Tables)", table)
			continue
		}
		if want[migrations.RoleReporting] == "S" != slices.Contains(documented, table) {
			t.Errorf("table %s: reporting reads it, or not, unlike README's Tables", table)
		}
		for _, role := range migrations.Roles {
			var got strings.Builder
			for _, p := range []struct{ letter, priv string }{{"S", "SELECT"}, {"I", "INSERT"}, {"U", "UPDATE"}, {"D", "DELETE"}, {"T", "TRUNCATE"}, {"R", "REFERENCES"}, {"G", "TRIGGER"}} {
				var has bool
				if err := conn.QueryRow(ctx, `SELECT has_table_privilege($1, $2, $3)`, role, "public."+table, p.priv).Scan(&has); err != nil {
					t.Fatal(err)
				}
				if has {
					got.WriteString(p.letter)
				} else if p.priv == "UPDATE" {
					var cols []string
					if err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(attname::text ORDER BY attname), '{}') FROM pg_attribute
						WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped AND has_column_privilege($2, attrelid, attnum, 'UPDATE')`,
						"public."+table, role).Scan(&cols); err != nil {
						t.Fatal(err)
					}
					if len(cols) > 0 {
						if !slices.Equal(cols, []string{"valid_to_seq", "valid_to_time"}) {
							t.Errorf("%s may update %s's columns %v", role, table, cols)
						}
						got.WriteString("u")
					}
				}
			}
			if got.String() != want[role] {
				t.Errorf("%s on %s: %q, want %q", role, table, got.String(), want[role])
			}
		}
	}
	var fns []string
	if err := conn.QueryRow(ctx, `SELECT array_agg(proname::text ORDER BY proname) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'`).Scan(&fns); err != nil {
		t.Fatal(err)
	}
	for _, fn := range fns {
		for _, role := range append([]string{"public"}, migrations.Roles...) {
			var may bool
			if err := conn.QueryRow(ctx, `SELECT bool_or(has_function_privilege($1, p.oid, 'EXECUTE')) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
				WHERE n.nspname = 'public' AND proname = $2`, role, fn).Scan(&may); err != nil {
				t.Fatal(err)
			}
			if may != slices.Contains(functions[role], fn) {
				t.Errorf("%s may execute %s: %v", role, fn, may)
			}
		}
	}
	for _, role := range migrations.Roles {
		var create, temp, super bool
		if err := conn.QueryRow(ctx, `SELECT has_schema_privilege($1, 'public', 'CREATE'), has_database_privilege($1, current_database(), 'TEMPORARY'),
			(SELECT rolsuper OR rolcreaterole OR rolcreatedb OR rolbypassrls FROM pg_roles WHERE rolname = $1)`, role).Scan(&create, &temp, &super); err != nil {
			t.Fatal(err)
		}
		if create || temp || super {
			t.Errorf("%s: CREATE in public %v, TEMPORARY %v, a privileged role %v", role, create, temp, super)
		}
	}
}

// TestRolesRights: the rights of each role after the migrations, on a
// fresh database, exactly as decided.
func TestRolesRights(t *testing.T) {
	ctx := context.Background()
	d := testdb.New(t)
	checkRights(t, ctx, d.Admin)
}

// TestRolesRightsAfterUpgrade: a database of the schema before the roles
// (version 7, with rows) gets the same rights by migrating, and its rows
// are then read and written by the roles as a fresh one's.
func TestRolesRightsAfterUpgrade(t *testing.T) {
	ctx := context.Background()
	d := testdb.Empty(t)
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	driver, _ := migrations.DriverURL(d.Owner)
	m, err := migrate.NewWithSourceInstance("iofs", src, driver)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(7); err != nil {
		t.Fatal(err)
	}
	m.Close()
	owner, err := pgx.Connect(ctx, d.Owner)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	if _, err := owner.Exec(ctx, `INSERT INTO checkpoints (pool, last_seq, state_hash, chain_hash) VALUES ('p', 1, '\x00', '\x00');
		INSERT INTO allocation_history (pool, consumer, slots, valid_from_seq, valid_from_time) VALUES ('p', '/a', 3, 1, now())`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, d.Owner); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	checkRights(t, ctx, d.Admin)
	proj, err := pgx.Connect(ctx, d.Projector)
	if err != nil {
		t.Fatal(err)
	}
	defer proj.Close(ctx)
	if _, err := proj.Exec(ctx, `UPDATE checkpoints SET last_seq = 2 WHERE pool = 'p'`); err != nil {
		t.Errorf("the projector updates a checkpoint of before the upgrade: %v", err)
	}
	rep, err := pgx.Connect(ctx, d.Reporting)
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close(ctx)
	var slots int64
	if err := rep.QueryRow(ctx, `SELECT slots FROM allocations_as_of('p', 1) WHERE consumer = '/a'`).Scan(&slots); err != nil || slots != 3 {
		t.Errorf("reporting reads a row of before the upgrade: %d %v", slots, err)
	}
}

func insufficient(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// TestReportingRoleRefusesChanges: with the reporting URL, as anyone
// holding the printed DATABASE_URL, no change and no undocumented read
// goes through; the documented reads do.
func TestReportingRoleRefusesChanges(t *testing.T) {
	ctx := context.Background()
	d := testdb.New(t)
	rep, err := pgx.Connect(ctx, d.Reporting)
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close(ctx)
	for _, sql := range []string{
		`UPDATE allocations SET slots = slots + 1`,
		`UPDATE checkpoints SET last_seq = 0`,
		`DELETE FROM events`,
		`DELETE FROM projector_offsets`,
		`INSERT INTO allocations (pool, consumer, host, slots) VALUES ('p', '/a', 'h', 99)`,
		`INSERT INTO halted_pools (pool, seq, reason) VALUES ('p', 1, 'x')`,
		`TRUNCATE decisions`,
		`CREATE TABLE mine (v int)`,
		`CREATE TEMP TABLE mine (v int)`,
		`CREATE SCHEMA mine`,
		`CREATE FUNCTION mine() RETURNS int LANGUAGE sql AS 'SELECT 1'`,
		`CREATE VIEW mine AS SELECT 1`,
		`SELECT * FROM schema_migrations`,
		`ALTER TABLE events ADD COLUMN x int`,
		`DROP TABLE events`,
		`COPY events FROM STDIN`,
		`SELECT pg_read_file('PG_VERSION')`,
	} {
		_, err := rep.Exec(ctx, sql)
		if err == nil || !(insufficient(err) || strings.Contains(err.Error(), "must be owner") || strings.Contains(err.Error(), "permission denied")) {
			t.Errorf("reporting: %s: %v, want permission denied", sql, err)
		}
	}
	for _, sql := range []string{
		`SELECT count(*) FROM events`,
		`SELECT * FROM allocations_as_of('demo', 1)`,
		`SELECT * FROM allocations_as_of_time('demo', now())`,
		`SELECT pool, rules, rules_since FROM checkpoints ORDER BY pool`,
	} {
		if _, err := rep.Exec(ctx, sql); err != nil {
			t.Errorf("reporting: %s: %v", sql, err)
		}
	}
}

// TestMigrateRefusesWithoutRoles: on a server where the roles do not
// exist and the migrating owner may not create them, Up refuses before
// migrating anything (the database is not left dirty), naming them; once
// an administrator creates them, Up goes through.
func TestMigrateRefusesWithoutRoles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "ledger-migrations-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // PostgreSQL's own user must reach it
		t.Fatal(err)
	}
	c, err := pgcluster.Start(ctx, pgcluster.WithDataDir(filepath.Join(dir, "data")), pgcluster.WithFsync(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	err = migrations.Up(ctx, c.URL()) // the owner: no CREATEROLE
	if !errors.Is(err, migrations.ErrRoles) || !strings.Contains(err.Error(), "ledger_api, ledger_projector, ledger_reporting") {
		t.Fatalf("Up without the roles: %v", err)
	}
	if v, dirty, err := migrations.Version(ctx, c.URL()); err != nil || dirty || v != 0 {
		t.Fatalf("after the refusal: version %d, dirty %v, %v", v, dirty, err)
	}
	admin, err := pgx.Connect(ctx, c.URLFor(pgcluster.DefaultDatabase))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, role := range migrations.Roles {
		if err := pgcluster.EnsureLoginRole(ctx, admin, role, "pw-"+role); err != nil {
			t.Fatal(err)
		}
	}
	if err := migrations.Up(ctx, c.URL()); err != nil {
		t.Fatalf("Up once the roles exist: %v", err)
	}
	checkRights(t, ctx, c.URLFor(pgcluster.DefaultDatabase))
}

// TestServiceRoleCannotMigrate: a service's role starts on a current
// schema (the version check is all it does), and is told to have the
// owner migrate when a migration is pending.
func TestServiceRoleCannotMigrate(t *testing.T) {
	ctx := context.Background()
	d := testdb.New(t)
	// As deployed (ledger dev, docker-compose.yml): advisory locks for
	// the owner and the projector only. Without it ledger_api may take
	// golang-migrate's lock here, and the test missed that `ledger
	// serve` as ledger_api was refused on a current schema.
	admin, err := pgx.Connect(ctx, d.Admin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, migrations.ClusterSQL); err != nil {
		t.Fatal(err)
	}
	admin.Close(ctx)
	for _, url := range []string{d.Projector, d.API} {
		if err := migrations.Up(ctx, url); err != nil {
			t.Errorf("Up on a current schema as a service: %v", err)
		}
	}
	if err := migrations.Up(ctx, d.Reporting); err == nil {
		t.Error("reporting went through the migrations: it may not even read their version")
	}
	owner, err := pgx.Connect(ctx, d.Owner)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	if _, err := owner.Exec(ctx, `UPDATE schema_migrations SET version = version - 1`); err != nil { // as if this build were newer
		t.Fatal(err)
	}
	for _, url := range []string{d.Projector, d.API} {
		err := migrations.Up(ctx, url)
		if !errors.Is(err, migrations.ErrNotOwner) || !strings.Contains(err.Error(), "owner's URL") {
			t.Errorf("Up with a migration pending, as a service: %v", err)
		}
	}
	if err := migrations.Up(ctx, d.Owner); err != nil {
		t.Fatalf("the owner migrates: %v", err)
	}
	checkRights(t, ctx, d.Admin)
}

// TestMigrateRefusesNonOwnerAndNewerSchema: `ledger migrate` (Migrate)
// as a role that does not own the schema says so, naming the role and
// the owner, on a current schema and on an empty database alike (it used
// to say "pending migrations" as the reporting role, and fail on
// golang-migrate's lock as ledger_api); on a schema newer than this
// build it refuses naming both versions. Neither changes anything
// (decision 505).
func TestMigrateRefusesNonOwnerAndNewerSchema(t *testing.T) {
	ctx := context.Background()
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	empty := testdb.Empty(t)
	for _, url := range []string{empty.Reporting, empty.API, empty.Projector} {
		_, err := migrations.Migrate(ctx, url)
		if !errors.Is(err, migrations.ErrNotMigrator) || !strings.Contains(err.Error(), "may not create the schema") {
			t.Errorf("Migrate on an empty database as a service: %v", err)
		}
	}
	admin, err := pgx.Connect(ctx, empty.Admin)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var tables int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("the refused migrators left %d tables (%v)", tables, err)
	}

	d := testdb.New(t)
	for role, url := range map[string]string{migrations.RoleReporting: d.Reporting, migrations.RoleAPI: d.API, migrations.RoleProjector: d.Projector} {
		_, err := migrations.Migrate(ctx, url)
		if !errors.Is(err, migrations.ErrNotMigrator) || !strings.Contains(err.Error(), "role "+role+" is not the schema's owner ("+migrations.RoleOwner+")") ||
			strings.Contains(err.Error(), "pending") {
			t.Errorf("Migrate on a current schema as %s: %v", role, err)
		}
	}
	if v, err := migrations.Migrate(ctx, d.Owner); err != nil || v != latest {
		t.Fatalf("the owner migrates a current schema: %d, %v", v, err)
	}
	owner, err := pgx.Connect(ctx, d.Owner)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	newer := int64(latest) + 3
	if _, err := owner.Exec(ctx, `UPDATE schema_migrations SET version = $1`, newer); err != nil { // as a newer ledger leaves it
		t.Fatal(err)
	}
	_, err = migrations.Migrate(ctx, d.Owner)
	if !errors.Is(err, migrations.ErrNewerSchema) || !strings.Contains(err.Error(), "version "+strconv.FormatInt(newer, 10)+", this build's migrations end at version "+strconv.Itoa(int(latest))) {
		t.Errorf("Migrate on a newer schema: %v", err)
	}
	var got int64
	var dirty bool
	if err := owner.QueryRow(ctx, `SELECT version, dirty FROM schema_migrations`).Scan(&got, &dirty); err != nil || got != newer || dirty {
		t.Errorf("after the refusal the version is %d (dirty %v, %v), want %d untouched", got, dirty, err, newer)
	}
}
