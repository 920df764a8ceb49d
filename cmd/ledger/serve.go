package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/connect"
	"github.com/cluster-ledger/ledger/internal/logging"
	"github.com/cluster-ledger/ledger/internal/metrics"
	"github.com/cluster-ledger/ledger/internal/signing"
)

func init() {
	var cfg api.ServeConfig
	var noMigrate bool
	var signingKey, trustedKeys string
	var tokensFile string
	var origins []string
	var readTimeout time.Duration
	var tokenLimits api.TokenLimits
	logOpts := logging.Defaults()
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
  GET  /healthz                       liveness: NATS and the stream take appends
  GET  /readyz                        readiness: PostgreSQL and the projection current
  GET  /metrics                       Prometheus metrics (token with the metrics scope)

Every request but /healthz and /readyz needs a bearer token (Authorization: Bearer
...) listed in the --tokens file, with the scope it needs: append
(demand, release), plan (plan, host_up, host_down) or read, on the pool
it names; metrics for /metrics. Create tokens with 'ledger token add' (list,
revoke and rotate them with 'ledger token'): serve reads the file again
within a second or two of a change, without a restart; a malformed file
is not taken (the tokens in force stay, and the log says why). The token's name is
recorded as the producer of the events it appends. POST bodies must be
Content-Type: application/json; a request from a browser page (Origin
header) is refused unless its origin is given with --allow-origin.

and the read-only web console at /console/ with the JSON it reads:

  GET  /v1/pools                      a page of pools (?limit, ?after, ?prefix): capacity, hosts, lag, ...
  GET  /v1/pools/{pool}               a pool now: consumer tree, hosts, policy
  GET  /v1/pools/{pool}/as-of         ?seq=N or ?time=RFC3339: the pool then
  GET  /v1/pools/{pool}/timeline      decisions newest first; ?consumer= ?kind=
                                      ?rule= ?limit= ?before=
  GET  /v1/pools/{pool}/decisions/{seq}/{ordinal}/explain
                                      a decision in words, with its story
  GET  /v1/live                       server-sent events as pools move; ?pool=

Each event is validated against the pool's current state (folded from
the log as the projector folds it: with --trusted-keys, events none of
those keys signed do not count) before it is appended; several ledger instances may serve the same stream. It stops
cleanly on SIGINT or SIGTERM.`,
		Example: `  ledger token add --file tokens.jsonl --name scheduler --scopes append --pools gpu
  DATABASE_URL=postgres://ledger@127.0.0.1/ledger ledger serve --tokens tokens.jsonl --http 127.0.0.1:8080
  curl -H "Authorization: Bearer $LEDGER_TOKEN" -H 'Content-Type: application/json' \
       -d '{"type":"demand","data":{"demands":{"/A":4}}}' http://127.0.0.1:8080/v1/pools/gpu/events`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkHTTPLimits(cfg.Conns, tokenLimits); err != nil {
				return err
			}
			switch {
			case readTimeout <= 0:
				return fmt.Errorf("--read-timeout %v: want a positive duration", readTimeout)
			case cfg.ConnectWait < 0:
				return fmt.Errorf("--connect-timeout %v: want 0 (until stopped) or a positive duration", cfg.ConnectWait)
			}
			if tokensFile == "" {
				return errors.New("serve needs --tokens FILE: the API is never open to anyone (create one with 'ledger token add')")
			}
			var err error
			if cfg.Logger, err = logging.New(cmd.ErrOrStderr(), logOpts); err != nil {
				return err
			}
			// Read now and again whenever it changes: `ledger token add`,
			// revoke and rotate take effect within seconds.
			tokens, err := auth.Watch(cmd.Context(), tokensFile, auth.DefaultReloadInterval, cfg.Logger)
			if err != nil {
				return err
			}
			cfg.Migrate = !noMigrate
			cfg.Options = []api.Option{api.WithTokens(tokens), api.WithAllowedOrigins(origins...), api.WithReadTimeout(readTimeout),
				api.WithMetrics(metrics.New()), api.WithTokenLimits(tokenLimits)}
			if signingKey != "" {
				sg, err := signing.LoadSigner(signingKey)
				if err != nil {
					return err
				}
				cfg.Options = append(cfg.Options, api.WithSigner(sg))
			}
			if trustedKeys != "" {
				keys, err := signing.LoadKeyring(trustedKeys)
				if err != nil {
					return err
				}
				cfg.Options = append(cfg.Options, api.WithTrustedKeys(keys))
			} else if signingKey != "" {
				cfg.Logger.Warn("serve: no --trusted-keys: events published around the ledger count in its view of the pools (the projector refuses them)")
			}
			return api.Serve(cmd.Context(), cfg)
		},
	}
	cmd.Flags().StringVar(&cfg.HTTPAddr, "http", "127.0.0.1:8080", "`ADDR` (host:port) the HTTP API listens on")
	addNATSURLFlag(cmd, &cfg.NATSURL)
	addNATSCredsFlag(cmd, &cfg.NATSCreds)
	cmd.Flags().StringVar(&signingKey, "signing-key", envDefault(EnvSigningKey, ""),
		"PEM Ed25519 private key `FILE` (mode 0600) that signs every appended event; the projector refuses unsigned ones (env "+EnvSigningKey+")")
	addTrustedKeysFlag(cmd, &trustedKeys)
	addDatabaseURLFlag(cmd, &cfg.DatabaseURL)
	cmd.Flags().DurationVar(&cfg.ConnectWait, "connect-timeout", connect.DefaultWait,
		"how long to wait at start for NATS, PostgreSQL and JetStream to answer before giving up (0: until stopped)")
	cmd.Flags().BoolVar(&noMigrate, "no-migrate", false, "do not apply schema migrations at start")
	cmd.Flags().StringVar(&tokensFile, "tokens", "", "tokens `FILE` (JSON lines of name, sha256, scopes, pools; mode 0600), required")
	cmd.Flags().StringArrayVar(&origins, "allow-origin", nil, "browser `ORIGIN` (scheme://host[:port]) allowed to call the API; repeatable; none by default")
	cmd.Flags().StringVar(&cfg.TLSCert, "tls-cert", "", "serve HTTPS with the PEM certificate in `FILE` (with --tls-key)")
	cmd.Flags().StringVar(&cfg.TLSKey, "tls-key", "", "`FILE` of the PEM private key of --tls-cert")
	logging.AddFlags(cmd.Flags(), &logOpts)
	cmd.Flags().DurationVar(&readTimeout, "read-timeout", api.DefaultReadTimeout, "longest a read endpoint waits for PostgreSQL before answering 503")
	addHTTPLimitFlags(cmd, &cfg.Conns, &tokenLimits)
	root.AddCommand(cmd)
}
