package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/internal/benchmark"
)

type benchFlags struct {
	natsURL, databaseURL        string
	quick, asJSON, keep         bool
	eventsReplay, eventsProject int
}

func init() {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the service: appends, projection, latency, replay (what `make bench` runs)",
		Long: `bench starts its own embedded NATS server and private PostgreSQL cluster in a
temporary directory (or uses --nats-url / --database-url, on which it creates
and afterwards drops its own databases), runs the ledger's own components
against them and prints a table. Each figure is measured in the same run as
the baseline beside it:

  1 append      events/s through POST /v1/pools/{pool}/events, one event per
                request and arrays of 100 (4 clients, each on its own pool),
                beside raw JetStream publishes of the same envelopes (sync with
                message ids; async in batches of 100 waiting for the acks), on
                two fresh embedded servers, one syncing every write to disk (the
                ledger's default) and one syncing every 2 minutes (nats-server's
                default), printed beside each other; two rounds, the better
                figure of each. Target: arrays / raw atomic batch >= 0.5.
  2 projection  a fresh projector folds a 1,000-leaf pool's log (20 hosts of
                100 slots, realistic demand and releases) from sequence 0 into
                PostgreSQL: events/s (target >= 20,000/s), beside a COPY FROM of
                the events and decisions rows it wrote.
  3 latency     1,000 events/s through the API for 10 s with the projector
                running: time from just before the POST until the pool's
                checkpoint covers the event, p50 and p99.
  4 replay      a 1,000,000-event log: raw JetStream read, replay (read + fold
                in memory, target >= 100,000/s), and a rebuild into an empty
                database (the 'ledger replay --into' code path), compared with
                the projector of phase 2.

Phases run in the order 2, 1, 3, 4 (so that the projection starts from an
empty stream); a progress line per step goes to stderr. Everything started
is stopped, and the temporary directory removed (unless --keep), at the end.
The default run takes a few minutes.`,
		Example: `  ledger bench
  ledger bench --quick --json | jq '.results[] | {name, value, unit}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Unset sizes are left to the harness: the default, or the
			// quick size with --quick.
			if !cmd.Flags().Changed("events-replay") {
				f.eventsReplay = 0
			}
			if !cmd.Flags().Changed("events-project") {
				f.eventsProject = 0
			}
			return runBench(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	cmd.Flags().StringVar(&f.natsURL, "nats-url", "", "use this NATS server (with JetStream) instead of an embedded one")
	cmd.Flags().StringVar(&f.databaseURL, "database-url", "", "use this PostgreSQL server instead of a private cluster (bench creates its own databases there)")
	cmd.Flags().BoolVar(&f.quick, "quick", false, "small numbers everywhere (seconds, for tests)")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&f.keep, "keep", false, "keep the temporary directory (and the databases)")
	cmd.Flags().IntVar(&f.eventsReplay, "events-replay", benchmark.DefaultEventsReplay, "events in the log of the replay phase")
	cmd.Flags().IntVar(&f.eventsProject, "events-project", benchmark.DefaultEventsProject, "events in the log of the projection phase")
	root.AddCommand(cmd)
}

func runBench(ctx context.Context, out, progress io.Writer, f benchFlags) error {
	cfg := benchmark.Config{
		NATSURL: f.natsURL, DatabaseURL: f.databaseURL, Quick: f.quick, Keep: f.keep, Progress: progress,
		EventsReplay: f.eventsReplay, EventsProject: f.eventsProject,
		Rebuild: func(ctx context.Context, natsURL, into string) error {
			return runRebuild(ctx, io.Discard, logFlags{natsURL: natsURL}, into)
		},
	}
	rep, err := benchmark.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if f.asJSON {
		return rep.WriteJSON(out)
	}
	return rep.WriteTable(out)
}
