package migrations

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	"github.com/jackc/pgx/v5"

	"github.com/cluster-ledger/ledger/internal/redact"
)

// Errors of Migrate; match with errors.Is.
var (
	// ErrNotMigrator: the connecting role is not the schema's owner (nor
	// a member of it), so it may not migrate whatever the version.
	ErrNotMigrator = errors.New("migrations: this role may not migrate")
	// ErrNewerSchema: the database's schema is at a version newer than
	// this build's latest migration (a newer ledger migrated it).
	ErrNewerSchema = errors.New("migrations: the schema is newer than this build")
)

// Migrate is `ledger migrate`: it checks first that the connecting role
// may migrate (it owns the version table, or may create it when there is
// none yet) and that the schema is not newer than this build's
// migrations, refusing either with nothing changed and saying which
// (decision 505); then it applies what is pending, as Up does, and
// returns the version the schema is at. Errors never show the URL's
// password.
func Migrate(ctx context.Context, databaseURL string) (uint, error) {
	v, err := migrateChecked(ctx, databaseURL)
	return v, redact.Error(err, databaseURL)
}

func migrateChecked(ctx context.Context, databaseURL string) (uint, error) {
	latest, err := Latest()
	if err != nil {
		return 0, err
	}
	url, err := DriverURL(databaseURL)
	if err != nil {
		return 0, err
	}
	url = "postgres://" + strings.TrimPrefix(url, "pgx5://")
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("%w: connect: %w", ErrMigrate, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Read from the catalogs, which every role may read: whose the
	// version table is, and whether this role is (or may act as) it.
	var role string
	var owner *string
	var may bool
	err = conn.QueryRow(ctx, `SELECT current_user::text, t.tableowner::text,
		CASE WHEN t.tableowner IS NULL THEN coalesce(has_schema_privilege(current_schema(), 'CREATE'), false)
		     ELSE pg_has_role(current_user, t.tableowner, 'USAGE') END
		FROM (SELECT 1) AS one LEFT JOIN pg_tables t ON t.schemaname = current_schema() AND t.tablename = $1`,
		versionTable).Scan(&role, &owner, &may)
	if err != nil {
		return 0, fmt.Errorf("%w: look up the schema's owner: %w", ErrMigrate, err)
	}
	if !may {
		if owner != nil {
			return 0, fmt.Errorf("%w: role %s is not the schema's owner (%s): run ledger migrate with the URL of role %s (nothing changed)",
				ErrNotMigrator, role, *owner, *owner)
		}
		return 0, fmt.Errorf("%w: role %s may not create the schema (no CREATE in the database's schema): run ledger migrate with the URL of the database's owner (role %s in ledger dev and docker-compose.yml) (nothing changed)",
			ErrNotMigrator, role, RoleOwner)
	}
	if owner != nil {
		var version int64
		var dirty bool
		err := conn.QueryRow(ctx, "SELECT version, dirty FROM "+pgx.Identifier{versionTable}.Sanitize()+" LIMIT 1").Scan(&version, &dirty)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("%w: version: %w", ErrMigrate, err)
		}
		if err == nil && version > int64(latest) {
			return 0, fmt.Errorf("%w: the database's schema is at version %d, this build's migrations end at version %d: a newer ledger migrated it; run that release's ledger migrate (nothing changed)",
				ErrNewerSchema, version, latest)
		}
	}
	if err := Up(ctx, databaseURL); err != nil {
		return 0, err
	}
	var version int64
	var dirty bool
	if err := conn.QueryRow(ctx, "SELECT version, dirty FROM "+pgx.Identifier{versionTable}.Sanitize()+" LIMIT 1").Scan(&version, &dirty); err != nil {
		return 0, fmt.Errorf("%w: version: %w", ErrMigrate, err)
	}
	if dirty {
		return uint(version), fmt.Errorf("%w: %w", ErrDirty, migrate.ErrDirty{Version: int(version)})
	}
	return uint(version), nil
}
