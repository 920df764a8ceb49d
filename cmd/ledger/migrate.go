package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/migrations"
)

func init() {
	var dbURL string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the schema migrations to PostgreSQL",
		Long: `migrate applies every migration of the projection schema that the database
does not have yet, then prints the schema version. Running it again is
harmless. It must run as the owner of the tables (the role ledger in
'ledger dev' and docker-compose.yml: its password is in DATA/pg-auth for
dev), never with the DATABASE_URL dev prints (read-only), and the roles
ledger_projector, ledger_api and ledger_reporting must exist (or the
owner may create them): it refuses, naming those missing, before it
changes anything. A role that does not own the schema (a service's, the
reporting role) is refused, naming it and the owner, as is a schema newer
than this build's migrations (naming both versions); neither changes
anything. 'ledger dev' migrates at start; 'ledger serve' and the
projector check that the schema is current.`,
		Example: `  ledger migrate --database-url "postgres://ledger:$(cat .ledger/pg-auth/ledger.password)@127.0.0.1:PORT/ledger?sslmode=disable"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dbURL == "" {
				return errors.New("no database: set DATABASE_URL or --database-url")
			}
			v, err := migrations.Migrate(cmd.Context(), dbURL)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schema version %d\n", v)
			return nil
		},
	}
	addDatabaseURLFlag(cmd, &dbURL)
	root.AddCommand(cmd)
}
