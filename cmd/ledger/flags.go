package main

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cluster-ledger/ledger/internal/redact"
)

// Environment variables naming the service's addresses and identities
// (the lines `ledger dev` prints), and their defaults. The NATS identity
// has a name of the ledger's own: the nats CLI reads NATS_CREDS as a
// credentials file of another format, so exporting the printed lines must
// not change what `nats` does.
const (
	EnvLedgerURL     = "LEDGER_URL"
	EnvLedgerToken   = "LEDGER_TOKEN"
	EnvNATSURL       = "NATS_URL"
	EnvDatabaseURL   = "DATABASE_URL"
	EnvNATSCreds     = "LEDGER_NATS_CREDS"
	EnvTrustedKeys   = "LEDGER_TRUSTED_KEYS"
	EnvSigningKey    = "LEDGER_SIGNING_KEY"
	DefaultLedgerURL = "http://127.0.0.1:8080"
	DefaultNATSURL   = "nats://127.0.0.1:4222"
)

// envDefault returns the environment variable's value, or def when unset.
// Only for values that are no secret: the default is shown by --help.
func envDefault(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// annotationSecretEnv marks a flag whose value may hold a secret (a
// password in a URL, a token): it has no default in --help, and the
// environment variable named by the annotation is read after the command
// line was parsed, when the flag was not given (applySecretEnv).
const annotationSecretEnv = "ledger_secret_env"

// addSecretEnvFlag registers a string flag whose value comes from env
// when the flag is not given, without ever showing that value.
func addSecretEnvFlag(cmd *cobra.Command, p *string, name, env, usage string) {
	// The ledger never prints the value, but a value given on the command
	// line is in /proc/PID/cmdline for every local user to read: the help
	// says to prefer the environment variable.
	cmd.Flags().StringVar(p, name, "", usage+" (env "+env+", preferred: a command line is visible to every local user; the ledger never shows the value)")
	_ = cmd.Flags().SetAnnotation(name, annotationSecretEnv, []string{env})
}

// applySecretEnv gives each secret flag of cmd that was not set on the
// command line the value of its environment variable. Root's
// PersistentPreRunE calls it for every command.
func applySecretEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		env := f.Annotations[annotationSecretEnv]
		if len(env) == 0 || f.Changed || err != nil {
			return
		}
		if v := os.Getenv(env[0]); v != "" {
			err = f.Value.Set(v)
		}
	})
	return err
}

// addLedgerURLFlag registers --ledger-url (default $LEDGER_URL).
func addLedgerURLFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "ledger-url", envDefault(EnvLedgerURL, DefaultLedgerURL), "ledger HTTP API base `URL` (env "+EnvLedgerURL+")")
}

// addNATSURLFlag registers --nats-url (default $NATS_URL). A NATS URL
// may carry a user's password: --help shows the default without it.
func addNATSURLFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "nats-url", envDefault(EnvNATSURL, DefaultNATSURL), "NATS server `URL` (env "+EnvNATSURL+")")
	f := cmd.Flags().Lookup("nats-url")
	f.DefValue = redact.Conn(f.DefValue)
}

// addDatabaseURLFlag registers --database-url ($DATABASE_URL when not
// given). A PostgreSQL URL carries its password: --help never shows it.
func addDatabaseURLFlag(cmd *cobra.Command, p *string) {
	addSecretEnvFlag(cmd, p, "database-url", EnvDatabaseURL, "PostgreSQL `URL`, postgres://ROLE:PASSWORD@HOST:PORT/DATABASE")
}

// addNATSCredsFlag registers --nats-creds (default $LEDGER_NATS_CREDS):
// the path of a seed file, not the seed.
func addNATSCredsFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "nats-creds", envDefault(EnvNATSCreds, ""),
		"`FILE` with the NATS identity's seed (nkey; 'ledger dev' prints "+EnvNATSCreds+"=) (env "+EnvNATSCreds+")")
}

// addTrustedKeysFlag registers --trusted-keys (default $LEDGER_TRUSTED_KEYS).
func addTrustedKeysFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "trusted-keys", envDefault(EnvTrustedKeys, ""),
		"`FILE` of PEM public keys whose signatures make an event authentic; others are refused as unauthenticated ('ledger dev' prints LEDGER_TRUSTED_KEYS=) (env "+EnvTrustedKeys+")")
}

// addLedgerTokenFlag registers --ledger-token ($LEDGER_TOKEN when not
// given; never shown: it is a secret).
func addLedgerTokenFlag(cmd *cobra.Command, p *string) {
	addSecretEnvFlag(cmd, p, "ledger-token", EnvLedgerToken, "bearer `TOKEN` for the ledger API ('ledger dev' prints one)")
}
