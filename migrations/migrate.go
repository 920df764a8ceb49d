package migrations

import (
	"context"
	"errors"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/redact"
	"io/fs"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
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
	m, err := open(databaseURL)
	if err != nil {
		return err
	}
	defer m.Close()
	from, _, err := m.Version()
	if err != nil && !errors.Is(err, migrate.ErrNilVersion) {
		return fmt.Errorf("%w: version: %w", ErrMigrate, err)
	}
	if err := checkRoles(ctx, databaseURL, from); err != nil {
		return err
	}
	err = withContext(ctx, m, m.Up)
	switch {
	case err == nil, errors.Is(err, migrate.ErrNoChange):
		return nil
	case errors.As(err, new(migrate.ErrDirty)):
		return fmt.Errorf("%w: %w", ErrDirty, err)

	default:
		return fmt.Errorf("%w: up: %w", ErrMigrate, err)
	}
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
	return "", fmt.Errorf("%w: %q", ErrBadURL, redact.URL(databaseURL))
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

// withContext runs f, asking m to stop gracefully when ctx ends.
func withContext(ctx context.Context, m *migrate.Migrate, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() {
		select {
		case m.GracefulStop <- true:
		default:
		}
	})
	defer stop()
	err := f()
	if err == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// notOwner reports whether err is PostgreSQL refusing a schema change to
// a role without the right (golang-migrate keeps only the driver's text).
func notOwner(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "permission denied") || strings.Contains(msg, "must be owner") || strings.Contains(msg, "SQLSTATE 42501")
}
