// Command ledger is the write side of the allocation ledger and the
// operator's tool: it runs the HTTP API, publishes and loads events,
// simulates scenarios in memory, replays and audits the log, and runs the
// whole service on one machine for development (`ledger dev`).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/internal/redact"
	"github.com/cluster-ledger/ledger/internal/version"
)

// exitError carries a process exit code through cobra without printing
// usage: a failed check is not a usage mistake.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// codedError is an error printed as any other, with its own exit code
// instead of 1 (audit verify: 1 is a divergence, 3 "could not verify").
type codedError struct {
	err  error
	code int
}

func (e codedError) Error() string { return e.err.Error() }
func (e codedError) Unwrap() error { return e.err }

var root = &cobra.Command{
	Use:   "ledger",
	Short: "An event-sourced allocation ledger for shared compute clusters",
	Long: `ledger records who holds which slots of a shared cluster, and why.

Producers append events (demand, release, plan, host_up, host_down) through
the ledger's HTTP API to a NATS JetStream stream, the log of truth. A
deterministic projector folds the log through the sharing rules into
PostgreSQL tables that reporting queries read. Auditors replay the log and
verify the projection.

Addresses come from LEDGER_URL, NATS_URL and DATABASE_URL (the lines
'ledger dev' prints) or from the flags of the same names.`,
	SilenceUsage:  true,
	SilenceErrors: true,
	Version:       version.Get().String(),
}

var cpuProfile string

func init() {
	// cobra adds these when a command runs; added now (main.go's init runs
	// after the init of the command files before it: audit.go, dev.go ...),
	// the tests and the docs' checks find them in the tree too.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	root.SetVersionTemplate("ledger {{.Version}}")
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the command to `FILE` (go tool pprof)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := applySecretEnv(cmd); err != nil {
			return err
		}
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		return pprof.StartCPUProfile(f)
	}
	root.PersistentPostRun = func(*cobra.Command, []string) { pprof.StopCPUProfile() }
}

// versionEverywhere gives every command the version, so that `ledger
// SUBCOMMAND --version` answers as `ledger --version` does (cobra keeps
// the flag to commands with a Version).
func versionEverywhere(c *cobra.Command) {
	c.Version = root.Version
	for _, sub := range c.Commands() {
		versionEverywhere(sub)
	}
}

func main() {
	root.InitDefaultHelpCmd() // idempotent; init added them if it ran after some commands' init
	root.InitDefaultCompletionCmd()
	versionEverywhere(root)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Stderr)
	stop()
	os.Exit(code)
}

// execute runs the command line under ctx (ended by SIGINT or SIGTERM),
// writes its error to stderr and returns the exit status. A command
// that a signal stopped says so, in the ledger's words: it printed the
// cancellation as its last call failed with it ("context canceled", or
// the PostgreSQL driver's "timeout: context already done"), as if
// something had gone wrong. The exit status is the command's own (audit
// verify's 3: it could not verify).
func execute(ctx context.Context, stderr io.Writer) int {
	cmd, err := root.ExecuteContextC(ctx)
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	code := 1
	var ce codedError
	if errors.As(err, &ce) {
		code = ce.code
	}
	if ctx.Err() != nil && cmd != nil {
		msg := cmd.CommandPath() + ": interrupted (SIGINT or SIGTERM) before it finished"
		if !errors.Is(err, context.Canceled) {
			// Something else failed meanwhile: said too.
			msg += fmt.Sprintf("; %v", redact.Secrets(redact.Error(err, os.Getenv(EnvDatabaseURL)), os.Getenv(EnvLedgerToken)))
		}
		fmt.Fprintln(stderr, msg)
		return code
	}
	// The last line of defence: no password of a URL, and not the
	// token, whatever quoted them.
	fmt.Fprintln(stderr, "ledger:", redact.Secrets(redact.Error(err, os.Getenv(EnvDatabaseURL)), os.Getenv(EnvLedgerToken)))
	return code
}
