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
harmless. 'ledger serve' and 'ledger dev' migrate at start too.`,
		Example: `  DATABASE_URL=postgres://ledger@127.0.0.1/ledger ledger migrate`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dbURL == "" {
				return errors.New("no database: set DATABASE_URL or --database-url")
			}
			if err := migrations.Up(cmd.Context(), dbURL); err != nil {
				return err
			}
			v, dirty, err := migrations.Version(cmd.Context(), dbURL)
			if err != nil {
				return err
			}
			state := ""
			if dirty {
				state = " (dirty)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schema version %d%s\n", v, state)
			return nil
		},
	}
	addDatabaseURLFlag(cmd, &dbURL)
	root.AddCommand(cmd)
}
