package main

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/internal/benchmark"
)

type benchFlags struct {
	natsURL, natsCreds, databaseURL string
	quick, asJSON, keep, unsigned   bool
	eventsReplay, eventsProject     int
	phases                          []string
	cpuProfile                      string
}

func init() {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the service as deployed (signed), each figure beside its raw baseline (what `make bench` runs)",
		Long: `bench starts its own embedded NATS server and private PostgreSQL cluster in a
temporary directory (or uses --nats-url / --database-url, on which it creates
and afterwards drops its own databases), runs the ledger's own components
against them and prints a table.

It runs the ledger as deployed: signed. The API signs every event with a key
made for the run (Ed25519, as ` + "`ledger dev`" + ` does), and the projector, the
replay and the rebuild check every signature against the trusted key. The
figures of appends, projection and replay are measured unsigned too, beside,
for comparison (the SIGNING column says which). --unsigned runs everything
without keys instead.

Every figure of the ledger is printed beside the raw baseline it is compared
with (BASELINE, RATIO), measured in the same run, and its target:

  1 append      events/s through POST /v1/pools/{pool}/events, one event per
                request (baseline: raw synchronous JetStream publishes with
                message ids, target >= 0.65) and arrays of 100 (baseline: raw
                atomic batch publishes, target >= 0.7), 4 clients each on its
                own pool, the raw publishes carrying the same signed envelopes;
                on two fresh embedded servers, one syncing every write to disk
                (the ledger's default) and one syncing every 2 minutes, and a
                3-server cluster; two rounds, the better figure of each.
                Beside the arrays' target, for reading it: the same atomic
                batches each signed just before it is published (the
                target's baseline publishes envelopes signed beforehand).
  2 projection  a fresh projector folds a 1,000-leaf pool's log (20 hosts of
                100 slots, realistic demand and releases) from sequence 0 into
                PostgreSQL (baseline: a COPY FROM of the events and decisions
                rows it wrote, per event; target >= 0.6). Beside it, for
                reading it: the same COPY with the allocation_history rows
                the projector also appends, and, signed, the most the cores
                allow: each event needs one Ed25519 verification and at
                least its raw COPY, so cores / (1/verify rate + 1/COPY rate).
  3 latency     1,000 events/s through the API for 10 s with the projector
                running: time from just before the POST until the pool's
                checkpoint covers the event, p50 and p99 (target p99 <= 25 ms).
  4 replay      a 1,000,000-event log: raw direct-get read, replay (read + fold
                in memory; unsigned: target >= 0.8 of the raw read; signed:
                target >= 0.8 of the cores times one core's Ed25519 verify
                rate, which it prints), and a rebuild into an empty database
                (the 'ledger replay --into' code path), compared with the
                projector of phase 2. The read and the replays also say
                the CPU the process used, per event (the embedded NATS
                server's share included): a load from elsewhere slows a
                rate and its baseline unevenly, and moves this less.
  5 partitions  64 pools projected by one unpartitioned projector, by one
                instance holding 8 partitions (target >= 0.95 of it) and by
                two instances sharing them (target > one instance).
  6 ownership   the projector on a pool with ownership by host group beside
                the same projector on the plain pool, logs of 5,000 events
                (target >= 0.5).

Phases run in the order 2, 1, 3, 4, 5, 6 (so that the projection starts from
an empty stream), or only those --phases names; a progress line per step goes
to stderr. --cpuprofile writes a CPU profile of the run whose samples carry
their phase and step as labels (go tool pprof -tags, -tagfocus). Everything started
is stopped, and the temporary directory removed (unless --keep), at the end.
The default run takes several minutes.`,
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
	cmd.Flags().StringVar(&f.natsURL, "nats-url", "", "use the NATS server (with JetStream) at `URL` instead of an embedded one")
	addNATSCredsFlag(cmd, &f.natsCreds)
	cmd.Flags().StringVar(&f.databaseURL, "database-url", "", "use the PostgreSQL server at `URL` instead of a private cluster (bench creates its own databases there)")
	cmd.Flags().BoolVar(&f.quick, "quick", false, "small numbers everywhere (seconds, for tests)")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&f.keep, "keep", false, "keep the temporary directory (and the databases)")
	cmd.Flags().BoolVar(&f.unsigned, "unsigned", false, "run the ledger without signing keys (a deployed ledger signs: the default run does, with the unsigned figures beside)")
	cmd.Flags().IntVar(&f.eventsReplay, "events-replay", benchmark.DefaultEventsReplay, "events in the log of the replay phase")
	cmd.Flags().IntVar(&f.eventsProject, "events-project", benchmark.DefaultEventsProject, "events in the log of the projection phase")
	cmd.Flags().StringSliceVar(&f.phases, "phases", nil, "run only these `PHASES`, numbers 1 to 6 separated by commas (3 needs 2); default: all")
	cmd.Flags().StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to `FILE`, each sample labelled with its phase and step (go tool pprof -tagfocus phase=4)")
	root.AddCommand(cmd)
}

func runBench(ctx context.Context, out, progress io.Writer, f benchFlags) error {
	cfg := benchmark.Config{
		NATSURL: f.natsURL, NATSCreds: f.natsCreds, DatabaseURL: f.databaseURL, Quick: f.quick, Keep: f.keep, Progress: progress,
		EventsReplay: f.eventsReplay, EventsProject: f.eventsProject, Unsigned: f.unsigned, Phases: f.phases,
		Rebuild: func(ctx context.Context, natsURL, into, trustedKeys string) error {
			return runRebuild(ctx, io.Discard, logFlags{natsURL: natsURL, natsCreds: credsFor(natsURL, f), trustedKeys: trustedKeys}, into)
		},
	}
	if f.cpuProfile != "" {
		file, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		defer file.Close()
		cfg.CPUProfile = file
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

// credsFor is the identity given for the external server, none for an
// embedded one.
func credsFor(url string, f benchFlags) string {
	if url == f.natsURL {
		return f.natsCreds
	}
	return ""
}
