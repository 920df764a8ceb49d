package main

import (
	"os"

	"github.com/spf13/cobra"
)

// Environment variables naming the service's addresses (the lines
// `ledger dev` prints), and their defaults.
const (
	EnvLedgerURL     = "LEDGER_URL"
	EnvLedgerToken   = "LEDGER_TOKEN"
	EnvNATSURL       = "NATS_URL"
	EnvDatabaseURL   = "DATABASE_URL"
	EnvNATSCreds     = "NATS_CREDS"
	EnvTrustedKeys   = "LEDGER_TRUSTED_KEYS"
	EnvSigningKey    = "LEDGER_SIGNING_KEY"
	DefaultLedgerURL = "http://127.0.0.1:8080"
	DefaultNATSURL   = "nats://127.0.0.1:4222"
)

// envDefault returns the environment variable's value, or def when unset.
func envDefault(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// addLedgerURLFlag registers --ledger-url (default $LEDGER_URL).
func addLedgerURLFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "ledger-url", envDefault(EnvLedgerURL, DefaultLedgerURL), "ledger HTTP API base URL (env "+EnvLedgerURL+")")
}

// addNATSURLFlag registers --nats-url (default $NATS_URL).
func addNATSURLFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "nats-url", envDefault(EnvNATSURL, DefaultNATSURL), "NATS server URL (env "+EnvNATSURL+")")
}

// addDatabaseURLFlag registers --database-url (default $DATABASE_URL).
func addDatabaseURLFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "database-url", envDefault(EnvDatabaseURL, ""), "PostgreSQL URL, postgres://... (env "+EnvDatabaseURL+")")
}

// addNATSCredsFlag registers --nats-creds (default $NATS_CREDS).
func addNATSCredsFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "nats-creds", envDefault(EnvNATSCreds, ""),
		"file with the NATS identity's seed (nkey; `ledger dev` prints NATS_CREDS=) (env "+EnvNATSCreds+")")
}

// addTrustedKeysFlag registers --trusted-keys (default $LEDGER_TRUSTED_KEYS).
func addTrustedKeysFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "trusted-keys", envDefault(EnvTrustedKeys, ""),
		"file of PEM public keys whose signatures make an event authentic; others are refused as unauthenticated (`ledger dev` prints LEDGER_TRUSTED_KEYS=) (env "+EnvTrustedKeys+")")
}

// addLedgerTokenFlag registers --ledger-token (default $LEDGER_TOKEN).
// The default is not shown in --help: it is a secret.
func addLedgerTokenFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "ledger-token", "", "bearer token for the ledger API (env "+EnvLedgerToken+"; `ledger dev` prints one)")
	cmd.PreRun = func(*cobra.Command, []string) {
		if *p == "" {
			*p = os.Getenv(EnvLedgerToken)
		}
	}
}
