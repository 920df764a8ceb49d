package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/internal/auth"
)

type tokenFlags struct {
	file, name, scopes, pools string
}

func init() {
	tok := &cobra.Command{
		Use:   "token",
		Short: "Manage the API's bearer tokens",
	}
	var f tokenFlags
	add := &cobra.Command{
		Use:   "add --file FILE --name NAME --scopes SCOPES --pools POOLS",
		Short: "Create a token and add its hash to a tokens file",
		Long: `add creates a random bearer token, appends its entry (name, SHA-256 of the
token, scopes, pools) to the tokens file (created with mode 0600) and
prints the token, once: the file keeps only its hash. Give the token to
its producer as LEDGER_TOKEN. A running 'ledger serve' reads the file at
start: restart it to use new tokens.

Scopes (comma-separated, or all):
  append   demand and release events
  plan     plan, host_up and host_down events
  read     allocations, decisions (and the console)
  metrics  GET /metrics of every process (Prometheus; figures of all pools)
Pools: comma-separated pool names, or * for every pool.`,
		Example: `  ledger token add --file tokens.jsonl --name scheduler --scopes append --pools gpu,cpu
  ledger token add --file tokens.jsonl --name ops --scopes all --pools '*'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTokenAdd(cmd.OutOrStdout(), f) },
	}
	add.Flags().StringVar(&f.file, "file", "", "tokens file to append to (required)")
	add.Flags().StringVar(&f.name, "name", "", "identity of the token: recorded as the producer of its events (required)")
	add.Flags().StringVar(&f.scopes, "scopes", "", "append, plan, read, metrics (comma-separated), or all (required)")
	add.Flags().StringVar(&f.pools, "pools", "", "pools the token may use (comma-separated), or * for all (required)")
	for _, n := range []string{"file", "name", "scopes", "pools"} {
		_ = add.MarkFlagRequired(n)
	}
	tok.AddCommand(add)
	root.AddCommand(tok)
}

func runTokenAdd(out io.Writer, f tokenFlags) error {
	scopes, err := auth.ParseScopes(f.scopes)
	if err != nil {
		return err
	}
	var pools []string
	for _, p := range strings.Split(f.pools, ",") {
		pools = append(pools, strings.TrimSpace(p))
	}
	token, e, err := auth.Generate(f.name, scopes, pools)
	if err != nil {
		return err
	}
	if err := auth.AppendFile(f.file, e); err != nil {
		return err
	}
	fmt.Fprintf(out, "LEDGER_TOKEN=%s\n", token)
	return nil
}
