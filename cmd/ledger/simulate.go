package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/explain"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/spf13/cobra"
)

func init() {
	var asJSON, development bool
	cmd := &cobra.Command{
		Use:   "simulate FILE...",
		Short: "Fold scenario files in memory and check their expectations",
		Long: `simulate folds each scenario file (see docs/scenarios.md) through the same
engine the projector uses, entirely in memory: no NATS, no PostgreSQL.

After every step it prints the consumer table (leaves and parents: demand,
planned share, target, allocation, borrowed) and the step's decisions. In a
pool with ownership the table also shows each consumer's owned slots, how
many of them its subtree uses and how many are lent out, where each leaf's
slots come from (its own, a parent's private pool, the public pool; from
whom when lent), and the ownership assignment by host. When
an expectation does not hold it prints what was expected and what was
found, and exits with status 1.

A plan that names no rules version runs under the newest, as the service
would stamp it.

--rules-development folds under the rules version in development (today
version 4: priority bands, non-preemptable consumers and zero shares; a
plan with ownership folds under it as under version 3 but for the rulings
built so far, docs/rules.md section 24), which the service
accepts only when started with the same switch (ledger dev
--rules-development); a plan that names no version runs under it.`,
		Example: `  ledger simulate test/scenarios/seed/*.yaml
  ledger simulate --json scenario.yaml | jq .
  ledger simulate --rules-development test/development/v4/d-*.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var opts []scenario.RunOption
			if development {
				opts = append(opts, scenario.WithDevelopmentRules())
			}
			return simulate(cmd.OutOrStdout(), args, asJSON, opts...)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per step instead of tables")
	cmd.Flags().BoolVar(&development, "rules-development", false, fmt.Sprintf("fold under rules version %d, in development and not accepted by the service without its own switch", int(domain.RulesDevelopment)))
	root.AddCommand(cmd)
}

func simulate(w io.Writer, files []string, asJSON bool, opts ...scenario.RunOption) error {
	failed := 0
	for _, f := range files {
		s, err := scenario.ParseFile(f)
		if err != nil {
			fmt.Fprintf(w, "FAIL %v\n", err)
			failed++
			continue
		}
		res := scenario.Run(s, opts...)
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
		own := st.HasOwnership()
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		if own {
			fmt.Fprintln(tw, "   CONSUMER\tDEMAND\tSHARE\tTARGET\tALLOC\tBORROWED\tOWNED\tOWN USED\tLENT OUT\tSOURCES\t")
		} else {
			fmt.Fprintln(tw, "   CONSUMER\tDEMAND\tSHARE\tTARGET\tALLOC\tBORROWED\t")
		}
		for _, c := range st.Consumers {
			name := c.Path
			if !c.Leaf {
				name += " (parent)"
			}
			fmt.Fprintf(tw, "   %s\t%d\t%d\t%d\t%d\t%d\t", name, c.Demand, c.Planned, c.Target, c.Allocated, c.Borrowed)
			if own {
				fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t", c.Owned, c.OwnUsed, c.LentOut, sourcesCell(c.Sources))
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
		if own {
			fmt.Fprintf(w, "   ownership: %s\n", ownershipLine(st.Ownership))
		}
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

// sourcesCell says where a leaf's slots come from: "own 4, public 2,
// /ml's pool 1 from /ml/x" (from: the owner of lent slots).
func sourcesCell(srcs []domain.Source) string {
	if len(srcs) == 0 {
		return "-"
	}
	// Own slots first, then private pools (deepest first), the public
	// pool, each pool's own slots before those lent into it.
	tier := func(s domain.Source) int {
		switch s.Pool {
		case domain.SourceOwn:
			return 0
		case "/":
			return 2
		}
		return 1
	}
	srcs = slices.Clone(srcs)
	slices.SortStableFunc(srcs, func(a, b domain.Source) int {
		return cmp.Or(cmp.Compare(tier(a), tier(b)), cmp.Compare(strings.Count(b.Pool, "/"), strings.Count(a.Pool, "/")),
			strings.Compare(a.Pool, b.Pool), strings.Compare(a.Lender, b.Lender))
	})
	parts := make([]string, 0, len(srcs))
	for _, s := range srcs {
		var p string
		switch s.Pool {
		case domain.SourceOwn:
			p = "own"
		case "/":
			p = "public"
		default:
			p = s.Pool + "'s pool"
		}
		p += fmt.Sprintf(" %d", s.Slots)
		if s.Lender != "" {
			p += " from " + s.Lender
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// ownershipLine lists the assignment: "/A h1 4, /B h2 4" ("none" when
// nothing is assigned).
func ownershipLine(own []domain.OwnedSlots) string {
	if len(own) == 0 {
		return "none assigned"
	}
	parts := make([]string, 0, len(own))
	for _, o := range own {
		parts = append(parts, fmt.Sprintf("%s %s %d", o.Consumer, o.Host, o.Slots))
	}
	return strings.Join(parts, ", ")
}
