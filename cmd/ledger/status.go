package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/api"
)

// exitDegraded is status's exit code when the deployment answers but is
// not ok: scripts and probes tell "degraded" from "cannot ask" (1).
// Exit statuses of ledger status (1: the ledger could not be asked).
const (
	exitDegraded = 2 // everything works; something needs a look
	exitDown     = 3 // appends or reads do not work
)

func init() {
	var ledgerURL, token string
	var asJSON, healthz, readyz bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the deployment's health: stream copies, projectors' lag, halted pools, PostgreSQL, NATS",
		Long: `status asks a ledger (GET /v1/status, read scope) how the deployment stands
and prints it: the LEDGER stream's copies (replicas), which server leads
it and how far each copy is behind; each projector, or each partition of
a partitioned deployment, with the instance that owns it and its lag
behind the stream in events and in seconds (the age of the first event it
has not projected); the halted pools; and whether PostgreSQL and NATS
answer. A part that does not answer is reported, not waited for (the
ledger bounds the whole report to a few seconds).

The first lines say whether appends and reads work. Exit status: 0 when
everything is ok, 2 when the deployment is degraded (it works; the
problems listed need a look: halted pools, a lagging stream copy, a
stale projector), 3 when it is down: appends (NATS or the stream does
not answer) or reads (PostgreSQL does not answer; appends go on, the
log keeps them), 1 when the ledger cannot be asked. Errors are in the
ledger's words; the driver's go to the ledger's log.

Each projector (partition) shows whether an instance folds it now, as
NATS sees its consumer: one that stopped or was killed shows as not live
within the pinned TTL (5 s by default), and the status is degraded.

With --healthz it asks GET /healthz instead (no token needed), the
liveness probe: exit 0 while this ledger instance can append (NATS
connected, the stream taking writes, whether or not PostgreSQL answers),
1 when it cannot. With --readyz it asks GET /readyz, the readiness probe:
exit 0 while PostgreSQL answers and the projection is current (ok, or
degraded by halted pools), 1 otherwise. Container healthchecks for the
distroless image, which has no shell or HTTP client of its own. With
--json either prints the probe's JSON answer (indented), the failing
one's (503) too, with the same exit status.`,
		Example: `  ledger status
  LEDGER_URL=https://ledger.example:8080 ledger status --json | jq .projectors`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				// A deadline already past failed every request with
				// "context deadline exceeded", as if the ledger were down.
				return fmt.Errorf("--timeout %v: want a positive duration", timeout)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			switch {
			case healthz && readyz:
				return errors.New("--healthz or --readyz, not both")
			case healthz:
				return runHealthz(ctx, cmd.OutOrStdout(), ledgerURL, asJSON)
			case readyz:
				return runReadyz(ctx, cmd.OutOrStdout(), ledgerURL, asJSON)
			}
			return runStatus(ctx, cmd.OutOrStdout(), client.New(ledgerURL, client.WithToken(token), client.FailFastWhenDown()), asJSON)
		},
	}
	addLedgerURLFlag(cmd, &ledgerURL)
	addLedgerTokenFlag(cmd, &token)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the ledger's JSON answer (indented) instead of the summary (with --healthz or --readyz: the probe's)")
	cmd.Flags().BoolVar(&healthz, "healthz", false, "probe GET /healthz (no token), liveness: exit 0 while this instance can append, 1 otherwise")
	cmd.Flags().BoolVar(&readyz, "readyz", false, "probe GET /readyz (no token), readiness: exit 0 while PostgreSQL answers and the projection is current, 1 otherwise")
	cmd.Flags().DurationVar(&timeout, "timeout", 15*time.Second, "how long to wait for the ledger's answer")
	root.AddCommand(cmd)
}

func runStatus(ctx context.Context, out io.Writer, c *client.Client, asJSON bool) error {
	var raw json.RawMessage
	if err := c.Get(ctx, "/v1/status", &raw); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	var res api.StatusResponse
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("status: the ledger's answer: %w", err)
	}
	if asJSON {
		var b bytes.Buffer
		if err := json.Indent(&b, raw, "", "  "); err != nil {
			return err
		}
		b.WriteByte('\n')
		if _, err := out.Write(b.Bytes()); err != nil {
			return err
		}
	} else if err := printStatus(out, res); err != nil {
		return err
	}
	switch res.Status {
	case "ok":
	case "down":
		return exitError{code: exitDown}
	default:
		return exitError{code: exitDegraded}
	}
	return nil
}

// runHealthz probes /healthz: 200 is live, anything else (503 with the
// failing part named) is not. asJSON prints the probe's answer as it is.
func runHealthz(ctx context.Context, out io.Writer, ledgerURL string, asJSON bool) error {
	var h api.HealthResponse
	if asJSON {
		return probeJSON(ctx, out, client.New(ledgerURL, client.FailFastWhenDown()), "/healthz")
	}
	if err := client.New(ledgerURL, client.FailFastWhenDown()).Get(ctx, "/healthz", &h); err != nil {
		return fmt.Errorf("healthz: %w", err)
	}
	fmt.Fprintf(out, "%s (nats %s, stream %s)\n", h.Status, h.NATS, h.Stream)
	return nil
}

// runReadyz probes /readyz: 200 (ok or degraded) is ready, anything else
// (503) is not. asJSON prints the probe's answer as it is.
func runReadyz(ctx context.Context, out io.Writer, ledgerURL string, asJSON bool) error {
	if asJSON {
		return probeJSON(ctx, out, client.New(ledgerURL), "/readyz")
	}
	var r api.ReadyResponse
	if err := client.New(ledgerURL).Get(ctx, "/readyz", &r); err != nil {
		return fmt.Errorf("readyz: %w", err)
	}
	lag := "?"
	if r.LagSeconds != nil {
		lag = fmt.Sprintf("%.1fs", *r.LagSeconds)
	}
	fmt.Fprintf(out, "%s (postgres %s, projection %s, lag %s, %d halted pools)\n", r.Status, r.Postgres, r.Projection, lag, len(r.HaltedPools))
	return nil
}

// probeJSON prints a probe's JSON answer, indented: a 200's, and a
// failing probe's (503, whose body is the same shape naming the part
// that fails), which then exits 1 as the summary does. An answer that is
// not the probe's JSON (a proxy's page, no ledger) is an error.
func probeJSON(ctx context.Context, out io.Writer, c *client.Client, path string) error {
	var raw json.RawMessage
	err := c.Get(ctx, path, &raw)
	var ce *client.Error
	failing := errors.As(err, &ce) && ce.Status == http.StatusServiceUnavailable && json.Valid([]byte(ce.Message)) &&
		strings.HasPrefix(strings.TrimSpace(ce.Message), "{")
	switch {
	case failing:
		raw = json.RawMessage(ce.Message)
	case err != nil:
		return fmt.Errorf("%s: %w", strings.TrimPrefix(path, "/"), err)
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return fmt.Errorf("%s: the ledger's answer: %w", strings.TrimPrefix(path, "/"), err)
	}
	b.WriteByte('\n')
	if _, err := out.Write(b.Bytes()); err != nil {
		return err
	}
	if failing {
		return exitError{code: 1}
	}
	return nil
}

// printStatus writes the summary: one block per part, problems first.
func printStatus(w io.Writer, res api.StatusResponse) error {
	var b strings.Builder
	fmt.Fprintf(&b, "status: %s (at %s)\n", res.Status, res.Time.Format(time.RFC3339))
	fmt.Fprintf(&b, "appends: %s, reads: %s\n", loud(res.Appends), loud(res.Reads))
	for _, p := range res.Problems {
		fmt.Fprintf(&b, "  ! %s\n", p)
	}

	if res.View == api.ViewPools {
		return printPoolsView(w, &b, res)
	}
	b.WriteString("\nnats: ")
	if res.NATS.Connected {
		fmt.Fprintf(&b, "connected to %s (server %s", res.NATS.URL, res.NATS.Server)
		if res.NATS.Cluster != "" {
			fmt.Fprintf(&b, ", cluster %s", res.NATS.Cluster)
		}
		b.WriteString(")\n")
	} else {
		fmt.Fprintf(&b, "NOT CONNECTED: %s\n", res.NATS.Error)
	}
	if st := res.Stream; st != nil {
		leader := st.Leader
		if leader == "" {
			leader = "NONE"
		}
		fmt.Fprintf(&b, "stream %s: %d replica(s), leader %s", st.Name, st.Replicas, leader)
		if st.Cluster != "" {
			fmt.Fprintf(&b, " in cluster %s", st.Cluster)
		}
		fmt.Fprintf(&b, "; %d messages, sequences %d..%d", st.Messages, st.FirstSeq, st.LastSeq)
		if !st.LastTime.IsZero() {
			fmt.Fprintf(&b, ", last stored %s ago", ago(res.Time, st.LastTime))
		}
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  COPY\tROLE\tSTATE\tSEEN\tLAG (OPS)")
		for _, r := range st.ReplicasDetail {
			role, state, seen := "follower", "current", (time.Duration(r.ActiveMS)*time.Millisecond).String()+" ago"
			if r.Leader {
				role, seen = "leader", "-"
			}
			switch {
			case r.Offline:
				state = "OFFLINE"
			case !r.Current:
				state = "catching up"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\n", r.Name, role, state, seen, r.Lag)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	b.WriteString("\nprojectors:")
	switch {
	case len(res.Projectors) == 0 && (!res.Postgres.Reachable || res.Postgres.Error != ""):
		// Their offsets are rows in PostgreSQL: none read is not none.
		b.WriteString(" unknown (PostgreSQL is down: their committed offsets cannot be read)\n")
	case len(res.Projectors) == 0:
		b.WriteString(" none has committed yet\n")
	default:
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  NAME\tPARTITION\tOWNER\tLIVE\tSEQ\tLAG (EVENTS)\tLAG (S)\tCOMMITTED")
		for _, p := range res.Projectors {
			part := "all pools"
			if p.Partition != nil && p.Partitions != nil {
				part = fmt.Sprintf("%d of %d", *p.Partition, *p.Partitions)
			}
			owner := p.Owner
			if owner == "" {
				owner = "-"
			}
			lagEv, lagS := "?", "?"
			if p.LagEvents != nil {
				lagEv = fmt.Sprint(*p.LagEvents)
			}
			if p.LagSeconds != nil {
				lagS = fmt.Sprintf("%.2f", *p.LagSeconds)
			}
			live := "?"
			if p.Live != nil {
				live = "NO"
				if *p.Live {
					live = "yes"
				}
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\t%s\t%s ago\n", p.Name, part, owner, live, p.Seq, lagEv, lagS, ago(res.Time, p.UpdatedAt))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	writeHalted(&b, res)
	writePostgres(&b, res)
	_, err := io.WriteString(w, b.String())
	return err
}

// printPoolsView ends the summary of the pools view (a token limited to
// some pools): NATS connected or not, its halted pools, PostgreSQL; the
// stream and the projectors are the operator's.
func printPoolsView(w io.Writer, b *strings.Builder, res api.StatusResponse) error {
	b.WriteString("\nnats: ")
	if res.NATS.Connected {
		b.WriteString("connected\n")
	} else {
		fmt.Fprintf(b, "NOT CONNECTED: %s\n", res.NATS.Error)
	}
	b.WriteString("(the stream, the projectors and the servers are shown to a token that reads every pool)\n")
	writeHalted(b, res)
	writePostgres(b, res)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeHalted writes the halted pools of the summary.
func writeHalted(b *strings.Builder, res api.StatusResponse) {
	b.WriteString("\nhalted pools:")
	if len(res.Halted) == 0 {
		b.WriteString(" none\n")
	} else {
		b.WriteString("\n")
		for _, h := range res.Halted {
			fmt.Fprintf(b, "  %s at sequence %d, %s ago: %s\n", h.Pool, h.Seq, ago(res.Time, h.HaltedAt), h.Reason)
		}
	}
}

// writePostgres writes the PostgreSQL line of the summary.
func writePostgres(b *strings.Builder, res api.StatusResponse) {
	b.WriteString("\npostgres: ")
	switch {
	case res.Postgres.Reachable && res.Postgres.Error == "":
		b.WriteString("reachable\n")
	case res.Postgres.Reachable:
		fmt.Fprintf(b, "reachable, but: %s\n", res.Postgres.Error)
	default:
		fmt.Fprintf(b, "NOT REACHABLE: %s\n", res.Postgres.Error)
	}
}

// loud writes a part's state in capitals when it is not ok.
func loud(state string) string {
	if state == "ok" {
		return state
	}
	return strings.ToUpper(state)
}

// ago is how long before now t was, rounded for reading.
func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}
