package migrations

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"

	"github.com/cluster-ledger/ledger/internal/redact"
)

// Errors; match with errors.Is.
var (
	// ErrMigrate: the migrations could not be read or applied.
	ErrMigrate = errors.New("migrations: migrate failed")
	// ErrDirty: a previous migration failed half-way; the database needs
	// manual repair (golang-migrate's "force") before Up can run.
	ErrDirty = errors.New("migrations: database is dirty")
	// ErrBadURL: the database URL is not a postgres:// URL.
	ErrBadURL = errors.New("migrations: not a postgres:// or postgresql:// URL")
	// ErrNotOwner: migrations are pending and the connecting role (a
	// service's, not the owner) may not apply them.
	ErrNotOwner = errors.New("migrations: the schema needs migrating by its owner")
)

// Up applies every migration newer than the database's version. A database
// already at the latest version is success. ctx cancels between
// migrations (a migration in progress completes or rolls back). Errors
// never show the URL's password.
func Up(ctx context.Context, databaseURL string) error {
	if current(ctx, databaseURL) {
		// Nothing to apply: no lock needed. The services' roles may
		// read the version but not take golang-migrate's lock
		// (ClusterSQL grants advisory locks to the owner and the
		// projector only), so `ledger serve` as ledger_api on a current
		// schema was refused as if a migration were pending.
		return nil
	}
	err := up(ctx, databaseURL)
	if err != nil && !errors.Is(err, ErrRoles) && notOwner(err) {
		err = fmt.Errorf("%w: this role may not apply the pending migrations (%w): migrate with the owner's URL (ledger migrate --database-url postgres://%s:...), then start again",
			ErrNotOwner, err, RoleOwner)
	}
	return redact.Error(err, databaseURL)
}

func up(ctx context.Context, databaseURL string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m, err := open(databaseURL) // creates the version table when missing
	if err != nil {
		return err
	}
	from, _, err := m.Version()
	m.Close()
	if err != nil && !errors.Is(err, migrate.ErrNilVersion) {
		return fmt.Errorf("%w: version: %w", ErrMigrate, err)
	}
	if err := checkRoles(ctx, databaseURL, from); err != nil {
		return err
	}
	return applyPending(ctx, databaseURL)
}

// current reports whether the database's schema is at this build's
// latest version or newer, not dirty, read with a plain query (no lock,
// no version table created). Any failure (no such table, a role that
// may not read it) is false: Up then goes the whole way.
func current(ctx context.Context, databaseURL string) bool {
	latest, err := Latest()
	if err != nil {
		return false
	}
	url := databaseURL
	if rest, ok := strings.CutPrefix(url, "pgx5://"); ok {
		url = "postgres://" + rest
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var version int64
	var dirty bool
	if err := conn.QueryRow(ctx, "SELECT version, dirty FROM "+pgx.Identifier{versionTable}.Sanitize()+" LIMIT 1").Scan(&version, &dirty); err != nil {
		return false
	}
	return !dirty && version >= int64(latest)
}

// versionTable is golang-migrate's table of the schema's version, in the
// connection's current schema (its pgx driver's defaults).
const versionTable = "schema_migrations"

// applyPending applies each migration newer than the database's version,
// each in one transaction with the version it leaves: a migrator killed
// at any point leaves the database at the version before or after a
// migration, never dirty. golang-migrate's Up marks the version dirty,
// applies the migration and clears the mark in three transactions, so a
// first ledger dev killed during its migrations left "Dirty database
// version 1. Fix and force version." for every later start, with no
// command of the ledger to force it (decision 400). It takes
// golang-migrate's advisory lock, so that two migrators, an older
// release among them, still run one after the other.
func applyPending(ctx context.Context, databaseURL string) error {
	url := databaseURL // postgres://, postgresql:// or DriverURL's pgx5:// (open checked it)
	if rest, ok := strings.CutPrefix(url, "pgx5://"); ok {
		url = "postgres://" + rest
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("%w: connect: %w", ErrMigrate, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var dbName, schema string
	if err := conn.QueryRow(ctx, "SELECT current_database(), current_schema()").Scan(&dbName, &schema); err != nil {
		return fmt.Errorf("%w: %w", ErrMigrate, err)
	}
	lock, err := database.GenerateAdvisoryLockId(dbName, schema, versionTable)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMigrate, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1::bigint)", lock); err != nil {
		return fmt.Errorf("%w: lock: %w", ErrMigrate, err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1::bigint)", lock)
	table := pgx.Identifier{schema, versionTable}.Sanitize()
	var version int64 = -1
	var dirty bool
	err = conn.QueryRow(ctx, "SELECT version, dirty FROM "+table+" LIMIT 1").Scan(&version, &dirty)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		version = -1
	case err != nil:
		return fmt.Errorf("%w: version: %w", ErrMigrate, err)
	case dirty:
		return fmt.Errorf("%w: %w", ErrDirty, migrate.ErrDirty{Version: int(version)})
	}
	src, err := iofs.New(FS, ".")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMigrate, err)
	}
	defer src.Close()
	for {
		var next uint
		if version < 0 {
			next, err = src.First()
		} else {
			next, err = src.Next(uint(version))
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil // none newer
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrMigrate, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := applyOne(ctx, conn, src, table, next); err != nil {
			return err
		}
		version = int64(next)
	}
}

// applyOne applies migration v and sets the version to it, in one
// transaction.
func applyOne(ctx context.Context, conn *pgx.Conn, src source.Driver, table string, v uint) error {
	r, _, err := src.ReadUp(v)
	if err != nil {
		return fmt.Errorf("%w: read migration %d: %w", ErrMigrate, v, err)
	}
	body, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		return fmt.Errorf("%w: read migration %d: %w", ErrMigrate, v, err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%w: up: %w", ErrMigrate, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// Without arguments pgx sends the file as one simple query: its
	// statements run in order, in this transaction.
	if _, err := tx.Exec(ctx, string(body)); err != nil {
		return fmt.Errorf("%w: up: migration %d failed (nothing of it applied): %w", ErrMigrate, v, err)
	}
	if _, err := tx.Exec(ctx, "TRUNCATE "+table); err != nil {
		return fmt.Errorf("%w: up: %w", ErrMigrate, err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+table+" (version, dirty) VALUES ($1, false)", int64(v)); err != nil {
		return fmt.Errorf("%w: up: %w", ErrMigrate, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("%w: up: migration %d: %w", ErrMigrate, v, err)
	}
	return nil
}

// Version reports the database's schema version and whether it is dirty
// (a migration failed half-way). A database never migrated reports 0,
// false, nil.
func Version(ctx context.Context, databaseURL string) (uint, bool, error) {
	v, dirty, err := version(ctx, databaseURL)
	return v, dirty, redact.Error(err, databaseURL)
}

func version(ctx context.Context, databaseURL string) (uint, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	m, err := open(databaseURL)
	if err != nil {
		return 0, false, err
	}
	defer m.Close()
	v, dirty, err := m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("%w: version: %w", ErrMigrate, err)
	}
	return v, dirty, nil
}

// Latest is the newest migration version in FS.
func Latest() (uint, error) {
	src, err := iofs.New(FS, ".")
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrMigrate, err)
	}
	defer src.Close()
	v, err := src.First()
	if err != nil {
		return 0, fmt.Errorf("%w: no migrations: %w", ErrMigrate, err)
	}
	for {
		next, err := src.Next(v)
		if errors.Is(err, fs.ErrNotExist) {
			return v, nil
		}
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrMigrate, err)
		}
		v = next
	}
}

// DriverURL turns a postgres:// or postgresql:// URL into the pgx5:// URL
// golang-migrate's pgx v5 driver expects.
func DriverURL(databaseURL string) (string, error) {
	for _, scheme := range []string{"postgres://", "postgresql://"} {
		if strings.HasPrefix(databaseURL, scheme) {
			return "pgx5://" + strings.TrimPrefix(databaseURL, scheme), nil
		}
	}
	if strings.HasPrefix(databaseURL, "pgx5://") {
		return databaseURL, nil
	}
	return "", fmt.Errorf("%w: %q", ErrBadURL, redact.Conn(databaseURL))
}

func open(databaseURL string) (*migrate.Migrate, error) {
	dbURL, err := DriverURL(databaseURL)
	if err != nil {
		return nil, err
	}
	var src source.Driver
	if src, err = iofs.New(FS, "."); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMigrate, err)
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, dbURL)
	if err != nil {
		return nil, fmt.Errorf("%w: connect: %w", ErrMigrate, err)
	}
	return m, nil
}

// notOwner reports whether err is PostgreSQL refusing a schema change to
// a role without the right (golang-migrate keeps only the driver's text).
func notOwner(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "permission denied") || strings.Contains(msg, "must be owner") || strings.Contains(msg, "SQLSTATE 42501")
}
