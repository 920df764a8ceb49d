package migrations

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The roles of the projection's database (migration 0008): each identity
// that connects has exactly the rights its job needs. The owner runs the
// migrations and owns every table; it is whoever migrates (`ledger`, the
// application role of `ledger dev` and docker-compose.yml).
const (
	// RoleOwner owns the database and its tables in `ledger dev` and
	// docker-compose.yml; only it migrates.
	RoleOwner = "ledger"
	// RoleProjector writes the projection (the projector, `projector`).
	RoleProjector = "ledger_projector"
	// RoleAPI reads it (`ledger serve`, the console).
	RoleAPI = "ledger_api"
	// RoleReporting reads the documented tables and the as-of functions:
	// the DATABASE_URL `ledger dev` prints, for psql, audit, replay,
	// load --check and recover.
	RoleReporting = "ledger_reporting"
)

// Roles are the roles migration 0008 grants rights to; they must exist
// before it runs (or the migrating role must be allowed to create them).
var Roles = []string{RoleProjector, RoleAPI, RoleReporting}

// rolesVersion is the migration that needs Roles.
const rolesVersion = 8

// ErrRoles: the roles of migration 0008 do not exist and the migrating
// role may not create them.
var ErrRoles = errors.New("migrations: the ledger's roles are missing")

// checkRoles refuses, before anything is migrated (a failed migration
// would leave the database dirty), to run migration 0008 when a role it
// grants to is missing and the migrating role may not create it.
func checkRoles(ctx context.Context, databaseURL string, from uint) error {
	if from >= rolesVersion {
		return nil
	}
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("%w: connect: %w", ErrMigrate, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var missing []string
	var may bool
	err = conn.QueryRow(ctx, `SELECT coalesce(array_agg(r ORDER BY r) FILTER (WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r)), '{}'),
		(SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user)
		FROM unnest($1::text[]) AS r`, Roles).Scan(&missing, &may)
	if err != nil {
		return fmt.Errorf("%w: look up roles: %w", ErrMigrate, err)
	}
	if len(missing) == 0 || may {
		return nil
	}
	return fmt.Errorf("%w: %s do not exist and the migrating role may not create them: create them first "+
		"(as a superuser: CREATE ROLE name LOGIN PASSWORD '...'; README, \"PostgreSQL roles\"), then migrate again",
		ErrRoles, strings.Join(missing, ", "))
}
