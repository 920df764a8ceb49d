package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/explain"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/spf13/cobra"
)

func init() {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "simulate FILE...",
		Short: "Fold scenario files in memory and check their expectations",
		Long: `simulate folds each scenario file (see docs/scenarios.md) through the same
engine the projector uses, entirely in memory: no NATS, no PostgreSQL.

After every step it prints the consumer table (leaves and parents: demand,
planned share, target, allocation, borrowed) and the step's decisions. When
an expectation does not hold it prints what was expected and what was
found, and exits with status 1.`,
		Example: `  ledger simulate test/scenarios/seed/*.yaml
  ledger simulate --json scenario.yaml | jq .`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return simulate(cmd.OutOrStdout(), args, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per step instead of tables")
	root.AddCommand(cmd)
}

func simulate(w io.Writer, files []string, asJSON bool) error {
	failed := 0
	for _, f := range files {
		s, err := scenario.ParseFile(f)
		if err != nil {
			fmt.Fprintf(w, "FAIL %v\n", err)
			failed++
			continue
		}
		res := scenario.Run(s)
		if res.Failed() {
			failed++
		}
		if asJSON {
			writeJSONSteps(w, res)
		} else {
			writeTables(w, res)
		}
	}
	if !asJSON {
		fmt.Fprintf(w, "%d scenarios: %d passed, %d failed\n", len(files), len(files)-failed, failed)
	}
	if failed > 0 {
		return exitError{1}
	}
	return nil
}

func writeJSONSteps(w io.Writer, res *scenario.Result) {
	enc := json.NewEncoder(w)
	for _, msg := range res.Setup {
		_ = enc.Encode(map[string]any{"file": res.File, "scenario": res.Name, "setup_refusal": msg, "ok": false})
	}
	for _, st := range res.Steps {
		_ = enc.Encode(struct {
			File     string `json:"file"`
			Scenario string `json:"scenario"`
			scenario.StepResult
			OK bool `json:"ok"`
		}{res.File, res.Name, st, len(st.Diffs) == 0})
	}
}

func writeTables(w io.Writer, res *scenario.Result) {
	fmt.Fprintf(w, "== %s (%s)\n", res.Name, res.File)
	for _, msg := range res.Setup {
		fmt.Fprintf(w, "   FAIL setup event refused: %s\n", msg)
	}
	var policy domain.Policy
	for _, st := range res.Steps {
		fmt.Fprintf(w, "\n-- step %d: %s\n", st.Step, st.Name)
		if st.Policy != policy {
			policy = st.Policy
			fmt.Fprintf(w, "   rules v%d; policy: %s\n", int(policy.Rules), explain.PolicyText(policy))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "   CONSUMER\tDEMAND\tSHARE\tTARGET\tALLOC\tBORROWED\t")
		for _, c := range st.Consumers {
			name := c.Path
			if !c.Leaf {
				name += " (parent)"
			}
			fmt.Fprintf(tw, "   %s\t%d\t%d\t%d\t%d\t%d\t\n", name, c.Demand, c.Planned, c.Target, c.Allocated, c.Borrowed)
		}
		tw.Flush()
		for _, d := range st.Decisions {
			from := ""
			if d.From != "" {
				from = " from " + d.From
			}
			fmt.Fprintf(w, "   %-7s %s%s: %d on %s  [%s]\n", d.Kind, d.Consumer, from, d.Slots, d.Host, d.Rule)
		}
		for _, r := range st.Refusals {
			fmt.Fprintf(w, "   refused: %s\n", r)
		}
		if len(st.Diffs) == 0 {
			fmt.Fprintln(w, "   ok")
			continue
		}
		fmt.Fprintf(w, "   FAIL expectations of step %d:\n     %s\n", st.Step, strings.Join(st.Diffs, "\n     "))
	}
	fmt.Fprintln(w)
}
