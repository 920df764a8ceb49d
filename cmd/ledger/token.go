package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/internal/auth"
)

type tokenFlags struct {
	file, name, scopes, pools string
	json                      bool
}

// hashPrefix is how much of a token's SHA-256 `token list` shows: enough
// to tell which token someone holds (sha256sum of it), nothing to use.
const hashPrefix = 12

func init() {
	tok := &cobra.Command{
		Use:   "token",
		Short: "Manage the API's bearer tokens (add, list, revoke, rotate)",
		Long: `token manages a tokens file: the JSON lines of name, SHA-256 of the token,
scopes and pools that 'ledger serve' (--tokens), 'ledger dev'
(DATA/tokens.jsonl) and the projector's /metrics (--metrics-tokens) read.
The file never holds a token, only its hash; a token is printed once, by
add and rotate.

A running server reads the file again within a second or two of a change:
a token added works, a revoked one is refused (401) and a rotated one's
old secret is refused and its new one accepted, without a restart. A
malformed file is not taken: the tokens in force stay, and the server's
log says why.`,
	}
	var f tokenFlags
	add := &cobra.Command{
		Use:   "add --file FILE --name NAME --scopes SCOPES --pools POOLS",
		Short: "Create a token and add its hash to a tokens file",
		Long: `add creates a random bearer token, adds its entry (name, SHA-256 of the
token, scopes, pools) to the tokens file (created with mode 0600) and
prints the token, once: the file keeps only its hash. Give the token to
its producer as LEDGER_TOKEN. A running 'ledger serve' or 'ledger dev'
takes it within seconds.

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
	add.Flags().StringVar(&f.file, "file", "", "tokens `FILE` to add to (required)")
	add.Flags().StringVar(&f.name, "name", "", "`NAME` of the token's identity: recorded as the producer of its events (required)")
	add.Flags().StringVar(&f.scopes, "scopes", "", "`SCOPES`: append, plan, read, metrics (comma-separated), or all (required)")
	add.Flags().StringVar(&f.pools, "pools", "", "`POOLS` the token may use (comma-separated), or * for all (required)")
	for _, n := range []string{"file", "name", "scopes", "pools"} {
		_ = add.MarkFlagRequired(n)
	}

	list := &cobra.Command{
		Use:   "list --file FILE",
		Short: "List a tokens file's entries: names, scopes, pools and a hash prefix, never a token",
		Long: fmt.Sprintf(`list prints each entry of the tokens file: its name, scopes, pools and the
first %d hex digits of its token's SHA-256. The token itself is in no file;
whoever holds one can tell which entry it is:

  printf %%s "$LEDGER_TOKEN" | sha256sum | cut -c1-%d`, hashPrefix, hashPrefix),
		Example: `  ledger token list --file tokens.jsonl
  ledger token list --file tokens.jsonl --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTokenList(cmd.OutOrStdout(), f) },
	}
	list.Flags().StringVar(&f.file, "file", "", "tokens `FILE` (required)")
	list.Flags().BoolVar(&f.json, "json", false, "one JSON object a line: name, scopes, pools, sha256_prefix")
	_ = list.MarkFlagRequired("file")

	revoke := &cobra.Command{
		Use:   "revoke --file FILE --name NAME",
		Short: "Remove a token from a tokens file: running servers refuse it within seconds",
		Long: `revoke removes the entry NAME from the tokens file (rewritten whole, mode
0600). A running 'ledger serve' or 'ledger dev' refuses the token (401)
within a second or two; so does a projector's /metrics. The events it
appended keep its name as their producer. Revoking the last entry is
allowed: the servers then refuse everyone.`,
		Example: `  ledger token revoke --file tokens.jsonl --name scheduler`,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runTokenRevoke(cmd.OutOrStdout(), f) },
	}
	rotate := &cobra.Command{
		Use:   "rotate --file FILE --name NAME",
		Short: "Give a token a new secret (printed once); the old one is refused within seconds",
		Long: `rotate gives the entry NAME of the tokens file a new random token with the
same scopes and pools, and prints it, once, as add does. Running servers
refuse the old token and accept the new one within a second or two: hand
the new one to its holder first if they must not be refused in between.`,
		Example: `  ledger token rotate --file tokens.jsonl --name scheduler`,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runTokenRotate(cmd.OutOrStdout(), f) },
	}
	for _, c := range []*cobra.Command{revoke, rotate} {
		c.Flags().StringVar(&f.file, "file", "", "tokens `FILE` (required)")
		c.Flags().StringVar(&f.name, "name", "", "the entry's `NAME` (required)")
		_ = c.MarkFlagRequired("file")
		_ = c.MarkFlagRequired("name")
	}
	tok.AddCommand(add, list, revoke, rotate)
	root.AddCommand(tok)
}

func runTokenAdd(out io.Writer, f tokenFlags) error {
	scopes, err := auth.ParseScopes(f.scopes)
	if err != nil {
		return err
	}
	token, e, err := auth.Generate(f.name, scopes, auth.ParsePools(f.pools))
	if err != nil {
		return err
	}
	if err := auth.AppendFile(f.file, e); err != nil {
		return err
	}
	fmt.Fprintf(out, "LEDGER_TOKEN=%s\n", token)
	return nil
}

// listedToken is a line of `token list --json`.
type listedToken struct {
	Name         string       `json:"name"`
	Scopes       []auth.Scope `json:"scopes"`
	Pools        []string     `json:"pools"`
	SHA256Prefix string       `json:"sha256_prefix"`
}

func runTokenList(out io.Writer, f tokenFlags) error {
	if _, err := os.Stat(f.file); err != nil {
		return err
	}
	entries, err := auth.ReadFile(f.file)
	if err != nil {
		return err
	}
	if f.json {
		enc := json.NewEncoder(out)
		for _, e := range entries {
			if err := enc.Encode(listedToken{Name: e.Name, Scopes: e.Scopes, Pools: e.Pools, SHA256Prefix: e.SHA256[:hashPrefix]}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSCOPES\tPOOLS\tSHA256")
	for _, e := range entries {
		scopes := make([]string, len(e.Scopes))
		for i, s := range e.Scopes {
			scopes[i] = string(s)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, strings.Join(scopes, ","), strings.Join(e.Pools, ","), e.SHA256[:hashPrefix])
	}
	return tw.Flush()
}

func runTokenRevoke(out io.Writer, f tokenFlags) error {
	e, err := auth.RevokeFile(f.file, f.name)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "# revoked %s (sha256 %s): running servers refuse it within seconds\n", e.Name, e.SHA256[:hashPrefix])
	return nil
}

func runTokenRotate(out io.Writer, f tokenFlags) error {
	token, _, err := auth.RotateFile(f.file, f.name)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "LEDGER_TOKEN=%s\n", token)
	return nil
}
