package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/connect"
)

func init() {
	var cfg api.ServeConfig
	var noMigrate bool
	var producer string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API: validate events and append them to the log",
		Long: `serve runs the ledger's HTTP API. It connects to NATS and PostgreSQL
(at start waiting up to --connect-timeout for them to answer, saying so on
stderr; NATS is then reconnected forever), creates the LEDGER stream when
it is missing, applies the schema migrations, and serves:

  POST /v1/pools/{pool}/events        one event or an array (all or nothing)
  GET  /v1/pools/{pool}/allocations   the projected allocation state
  GET  /v1/pools/{pool}/decisions     ?from_seq=N&limit=M
  GET  /healthz                       NATS and PostgreSQL status

and the read-only web console at /console/ with the JSON it reads:

  GET  /v1/pools                      every pool: capacity, hosts, lag, ...
  GET  /v1/pools/{pool}               a pool now: consumer tree, hosts, policy
  GET  /v1/pools/{pool}/as-of         ?seq=N or ?time=RFC3339: the pool then
  GET  /v1/pools/{pool}/timeline      decisions newest first; ?consumer= ?kind=
                                      ?rule= ?limit= ?before=
  GET  /v1/pools/{pool}/decisions/{seq}/{ordinal}/explain
                                      a decision in words, with its story
  GET  /v1/live                       server-sent events as pools move; ?pool=

Each event is validated against the pool's current state before it is
appended; several ledger instances may serve the same stream. It stops
cleanly on SIGINT or SIGTERM.`,
		Example: `  DATABASE_URL=postgres://ledger@127.0.0.1/ledger ledger serve --http 127.0.0.1:8080
  curl -d '{"type":"demand","data":{"demands":{"/A":4}}}' http://127.0.0.1:8080/v1/pools/demo/events`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			cfg.Migrate = !noMigrate
			cfg.Options = []api.Option{api.WithProducer(producer)}
			return api.Serve(cmd.Context(), cfg)
		},
	}
	cmd.Flags().StringVar(&cfg.HTTPAddr, "http", "127.0.0.1:8080", "address the HTTP API listens on")
	addNATSURLFlag(cmd, &cfg.NATSURL)
	addDatabaseURLFlag(cmd, &cfg.DatabaseURL)
	cmd.Flags().DurationVar(&cfg.ConnectWait, "connect-timeout", connect.DefaultWait,
		"how long to wait at start for NATS, PostgreSQL and JetStream to answer before giving up (0: until stopped)")
	cmd.Flags().BoolVar(&noMigrate, "no-migrate", false, "do not apply schema migrations at start")
	cmd.Flags().StringVar(&producer, "producer", api.DefaultProducer, "producer recorded for events that name none")
	root.AddCommand(cmd)
}
