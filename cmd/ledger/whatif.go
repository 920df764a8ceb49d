package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/scenario"
)

type whatIfFlags struct {
	ledgerURL, token, pool, at, file string
	asJSON, all                      bool
	timeout                          time.Duration
}

func init() {
	var f whatIfFlags
	cmd := &cobra.Command{
		Use:   "what-if --pool POOL --file FILE [--at SEQ|TIME]",
		Short: "Tell what events would do to a live pool, without appending them",
		Long: `what-if asks the ledger what the events of FILE would do to a pool: the
ledger forks the pool's state at --at (a sequence, or an RFC 3339 time; now
by default) from its log and snapshots, exactly as replay and audit fold
it, folds the events in memory, and answers with the difference. Nothing
is appended: the answer says so.

FILE holds events in the format of a scenario step's events: list
(docs/scenarios.md), plans included:

  events:
    - {type: plan, plan: {consumers: [{path: /A, share: 1}, {path: /B, share: 3}]}}
    - {type: demand, demands: {/A: 40}}

It prints each event's outcome (its hypothetical sequence, or the refusal
the ledger would answer it with), every consumer whose allocation, target
or unmet demand would change (before -> after; --all for every consumer),
and the decisions the events would take, in words as ledger explain tells
them. --json prints the ledger's answer (POST /v1/pools/POOL/what-if).

It needs a token with the read scope on the pool (LEDGER_TOKEN or
--ledger-token).`,
		Example: `  ledger what-if --pool demo --file new-plan.yaml
  ledger what-if --pool demo --file more-demand.yaml --at 1200
  ledger what-if --pool demo --file new-plan.yaml --at 2026-11-21T12:00:00Z --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWhatIf(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	addLedgerURLFlag(cmd, &f.ledgerURL)
	addLedgerTokenFlag(cmd, &f.token)
	cmd.Flags().StringVar(&f.pool, "pool", "", "`POOL` to ask about (required)")
	cmd.Flags().StringVar(&f.file, "file", "", "YAML (or JSON) `FILE` of events, as a scenario step's events: list (required)")
	cmd.Flags().StringVar(&f.at, "at", "", "fork the pool at `SEQ|TIME`: just after a sequence, or at its last event at or before an RFC 3339 time (default: now)")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the ledger's JSON answer")
	cmd.Flags().BoolVar(&f.all, "all", false, "list every consumer, not only those that would change")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the answer (retrying while the ledger is busy)")
	_ = cmd.MarkFlagRequired("pool")
	_ = cmd.MarkFlagRequired("file")
	root.AddCommand(cmd)
}

func runWhatIf(ctx context.Context, out io.Writer, f whatIfFlags) error {
	lim, err := parseAt(f.at)
	if err != nil {
		return err
	}
	evs, err := scenario.ParseEventsFile(f.file)
	if err != nil {
		return err
	}
	req := client.WhatIfRequest{AtSeq: lim.seq, Events: make([]client.WhatIfEvent, len(evs))}
	if !lim.t.IsZero() {
		req.AtTime = &lim.t
	}
	for i, ev := range evs {
		if req.Events[i], err = client.NewWhatIfEvent(ev.Payload); err != nil {
			return err
		}
		req.Events[i].Time = ev.Time
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	res, err := client.New(f.ledgerURL, client.WithToken(f.token), client.FailFastWhenDown()).WhatIf(ctx, f.pool, req)
	if err != nil {
		return fmt.Errorf("what-if: %w", err)
	}
	if f.asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return printWhatIf(out, res, f.all)
}

// printWhatIf writes the answer for a person: the fork point, each
// event's outcome, the consumers that change, the decisions in words.
func printWhatIf(w io.Writer, res *client.WhatIf, all bool) error {
	var b strings.Builder
	at := "before its first event"
	if res.At.Seq > 0 {
		at = fmt.Sprintf("at sequence %d (%s)", res.At.Seq, res.At.Time.Format(time.RFC3339Nano))
	}
	fmt.Fprintf(&b, "what-if on pool %s %s; nothing was appended\n", res.Pool, at)
	fmt.Fprintf(&b, "events:\n")
	for _, e := range res.Events {
		if e.Refused != "" {
			fmt.Fprintf(&b, "  %d. %s: refused, %s: %s\n", e.Index+1, e.Type, e.Refused, e.Refusal)
		} else {
			fmt.Fprintf(&b, "  %d. %s at %s: applied as sequence %d (hypothetical)\n", e.Index+1, e.Type, e.Time.Format(time.RFC3339), e.Seq)
		}
	}
	if len(res.Events) == 0 {
		fmt.Fprintf(&b, "  none\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	shown, hidden := 0, 0
	for _, c := range res.Consumers {
		if !all && !moves(c) {
			hidden++
			continue
		}
		if shown == 0 {
			fmt.Fprintf(&b, "consumers (before -> after):\n")
			fmt.Fprintf(tw, "  CONSUMER\tALLOCATED\tTARGET\tUNMET DEMAND\t\n")
		}
		shown++
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t\n", c.Path, change(c, func(f *client.ConsumerFigures) int64 { return f.Allocated }),
			change(c, func(f *client.ConsumerFigures) int64 { return f.Target }), change(c, func(f *client.ConsumerFigures) int64 { return f.Unmet }))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case shown == 0:
		fmt.Fprintf(&b, "no consumer's allocation, target or unmet demand would change\n")
	case hidden > 0:
		fmt.Fprintf(&b, "  (%s would not change; --all lists them)\n", count(hidden, "consumer", "consumers"))
	}
	fmt.Fprintf(&b, "decisions (%d):\n", len(res.Decisions))
	for _, d := range res.Decisions {
		fmt.Fprintf(&b, "  event %d: %s\n", d.Event+1, d.Text)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// moves reports whether the consumer's allocation, target or unmet demand
// (or its being in the plan) would change.
func moves(c client.ConsumerChange) bool {
	if c.Before == nil || c.After == nil {
		return true
	}
	return c.Before.Allocated != c.After.Allocated || c.Before.Target != c.After.Target || c.Before.Unmet != c.After.Unmet
}

// change is "before -> after" of one figure ("-" where the consumer is
// not in the plan), or the figure alone when it stays.
func change(c client.ConsumerChange, fig func(*client.ConsumerFigures) int64) string {
	side := func(f *client.ConsumerFigures) string {
		if f == nil {
			return "-"
		}
		return fmt.Sprint(fig(f))
	}
	b, a := side(c.Before), side(c.After)
	if b == a {
		return b
	}
	return b + " -> " + a
}

// count is "1 consumer", "3 consumers".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
