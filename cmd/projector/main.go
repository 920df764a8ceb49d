// Command projector is the read side of the allocation ledger: a durable
// JetStream consumer that folds every event of the LEDGER stream through
// the allocation engine and writes the result to PostgreSQL (events,
// decisions, consumer_state, allocations, allocation_history, ownership,
// ownership_history, ...), one transaction per batch together with the
// stream sequence it reached.
//
// Usage:
//
//	projector [--nats-url URL] [--nats-creds FILE] [--heal-creds FILE] [--trusted-keys FILE] [--database-url URL] [--batch N] [--pipeline-rows N] [--synchronous-commit] [--snapshot-every N] [--name NAME] [--partitions N] [--instance ID] [--pinned-ttl D] [--connect-timeout D] [--metrics-listen ADDR --metrics-tokens FILE] [--health-listen ADDR [--ready-lag D] [--stuck-after D]] [--log-format text|json] [--log-level LEVEL]
//	projector --help | --version
//
// With --partitions N, any number of projectors share the pools: they are
// hashed into N partitions, each a JetStream consumer whose pinned-client
// priority group gives it to one instance at a time; a new instance is
// given its share, and a stopped one's partitions move to the others
// after --pinned-ttl.
//
// The addresses default to $NATS_URL and $DATABASE_URL. At start it applies
// the schema migrations, waiting (and saying so) while PostgreSQL or NATS
// is not reachable yet, up to --connect-timeout (then it exits 1 naming
// what it could not reach); it then runs until SIGINT or SIGTERM, surviving
// outages of either, and exits 0 after a clean stop. Because PostgreSQL
// holds the committed sequence, it can be stopped or killed at any time and
// restarted: nothing is lost or projected twice. When the stream ends
// before what it has projected (NATS lost its unsynced tail in a crash), it
// appends those events again from PostgreSQL at their original sequences
// before going on, or stops naming the first sequence where stream and
// projection differ (see `ledger recover --help`).
//
// With --metrics-listen it serves its figures in the Prometheus format at
// GET /metrics on that address (internal/metrics), to bearer tokens of
// --metrics-tokens holding the metrics scope; off by default. With
// --health-listen it serves the probes GET /healthz (liveness) and GET
// /readyz (readiness) without a token (internal/health); off by default.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/connect"
	"github.com/cluster-ledger/ledger/internal/health"
	"github.com/cluster-ledger/ledger/internal/logging"
	"github.com/cluster-ledger/ledger/internal/metrics"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/redact"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/version"
	"github.com/cluster-ledger/ledger/projections"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "projector:", redact.Error(err, os.Getenv("DATABASE_URL")))
		os.Exit(1)
	}
}

type flags struct {
	natsURL, natsCreds, healCreds, trustedKeys, databaseURL, name, instance string
	batch, pipelineRows, snapshotEvery, partitions, resident                int
	connectWait, pinnedTTL                                                  time.Duration
	metricsListen, metricsTokens                                            string
	healthListen                                                            string
	readyLag                                                                time.Duration
	stuckAfter                                                              time.Duration
	syncCommit                                                              bool
	log                                                                     logging.Options
}

// newCommand is the projector's command line: the same library (cobra,
// pflag) and conventions as cmd/ledger's, long --kebab-case flags, --help
// and --version exiting 0. stdout takes help and the version, stderr the
// log.
func newCommand(stdout, stderr io.Writer) *cobra.Command {
	f := flags{log: logging.Defaults()}
	cmd := &cobra.Command{
		Use:   "projector",
		Short: "Fold the LEDGER stream into PostgreSQL (the ledger's read side)",
		Long: `projector is the read side of the allocation ledger: a durable JetStream
consumer that folds every event of the LEDGER stream through the allocation
engine and writes the result to PostgreSQL, one transaction per batch
together with the stream sequence it reached.

At start it applies the schema migrations, waiting (and saying so in its
log) while PostgreSQL or NATS is not reachable yet, up to --connect-timeout;
it then runs until SIGINT or SIGTERM, surviving outages of either, and
exits 0 after a clean stop. It can be stopped or killed at any time and
restarted: nothing is lost or projected twice.

With --partitions N, any number of projectors share the pools: they are
hashed into N partitions, each folded by one instance at a time; a new
instance is given its share, and a stopped one's partitions move to the
others after --pinned-ttl.

Addresses default to $NATS_URL and $DATABASE_URL; the NATS identity to
$LEDGER_NATS_CREDS (the projector's nkey seed file).`,
		Example: `  projector --nats-url nats://127.0.0.1:4222 --nats-creds nats-auth/projector.nk \
            --trusted-keys signing/trusted.pub --log-format json
  projector --partitions 8 --instance projector-1 --metrics-listen 127.0.0.1:9464 --metrics-tokens tokens.jsonl`,
		Version:       version.Get().String(),
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.databaseURL == "" {
				f.databaseURL = os.Getenv("DATABASE_URL")
			}
			if err := f.check(); err != nil {
				return err
			}
			return runProjector(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	cmd.SetVersionTemplate("projector {{.Version}}")
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVar(&f.natsURL, "nats-url", os.Getenv("NATS_URL"), "NATS server `URL` (env NATS_URL)")
	fs.Lookup("nats-url").DefValue = redact.Conn(os.Getenv("NATS_URL")) // --help shows no password
	fs.StringVar(&f.natsCreds, "nats-creds", os.Getenv("LEDGER_NATS_CREDS"), "`FILE` with the projector's NATS identity (nkey seed) (env LEDGER_NATS_CREDS)")
	fs.StringVar(&f.healCreds, "heal-creds", os.Getenv("LEDGER_NATS_HEAL_CREDS"), "`FILE` with a NATS identity allowed to publish to ledger.> (the ledger's seed), used only to append lost events again when healing the stream (env LEDGER_NATS_HEAL_CREDS; without it healing uses --nats-creds)")
	fs.StringVar(&f.trustedKeys, "trusted-keys", os.Getenv("LEDGER_TRUSTED_KEYS"), "`FILE` of PEM public keys; events none of them signed are refused as unauthenticated (env LEDGER_TRUSTED_KEYS)")
	// A PostgreSQL URL holds its password: the flag's default is empty, so
	// --help never shows it, and $DATABASE_URL is read after parsing.
	fs.StringVar(&f.databaseURL, "database-url", "", "PostgreSQL `URL`, postgres://ROLE:PASSWORD@HOST:PORT/DATABASE: the projector's role (env DATABASE_URL, preferred: a command line is visible to every local user; the projector never shows the value)")
	fs.IntVar(&f.batch, "batch", projections.DefaultBatchSize, "events fetched and committed per transaction")
	fs.IntVar(&f.pipelineRows, "pipeline-rows", projections.DefaultPipelineRows, "the largest batch (its rows of every table together) written in one round trip; larger ones are written by COPY, their rows appended while the batch before commits (0: every batch by COPY)")
	fs.BoolVar(&f.syncCommit, "synchronous-commit", false, "wait for PostgreSQL to flush every batch to disk before going on (default: asynchronous commit; the log is the truth and each batch's offset commits with its rows, so a batch PostgreSQL loses in a crash is folded again; set it when NATS syncs in the background on PostgreSQL's machine and the projection must heal the stream of every projected event)")
	fs.IntVar(&f.snapshotEvery, "snapshot-every", projections.DefaultSnapshotEvery, "save a pool's state every N of its events (or sooner, once folding them again would take about a second)")
	fs.IntVar(&f.resident, "resident-pools", projections.DefaultResidentPools, "keep at most this many pools' engine states in memory, the most recently folded; the others are saved to PostgreSQL and taken up again when an event of them comes")
	fs.StringVar(&f.name, "name", projections.DefaultName, "durable consumer `NAME` and projector_offsets key")
	fs.IntVar(&f.partitions, "partitions", 0, fmt.Sprintf("hash the pools into N partitions (1 to %d) shared by every projector started with the same N: each partition is folded by one instance at a time, and an instance that stops hands its partitions over within --pinned-ttl; 0: this projector alone folds every pool", projections.MaxPartitions))
	fs.StringVar(&f.instance, "instance", "", "this instance's `NAME` in projector_offsets.owner (default host:pid)")
	fs.DurationVar(&f.pinnedTTL, "pinned-ttl", projections.DefaultPinnedTTL, "with --partitions: how long a partition stays with an instance that stopped pulling (the hand-over time; at least 2s)")
	fs.DurationVar(&f.connectWait, "connect-timeout", connect.DefaultWait, "how long to wait at start for PostgreSQL and NATS to answer before giving up (0: until stopped)")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "serve Prometheus metrics at GET /metrics on `ADDR` (host:port), e.g. 127.0.0.1:9464 (default off; needs --metrics-tokens)")
	fs.StringVar(&f.metricsTokens, "metrics-tokens", os.Getenv("LEDGER_METRICS_TOKENS"), "tokens `FILE` (as 'ledger token add' writes it); /metrics answers only tokens with the metrics scope (env LEDGER_METRICS_TOKENS)")
	fs.StringVar(&f.healthListen, "health-listen", "", "serve the probes GET /healthz (liveness: NATS and the fold loop) and GET /readyz (readiness: PostgreSQL, and this projector's partitions less than --ready-lag behind) on `ADDR` (host:port), no token, e.g. 127.0.0.1:9465 (default off)")
	fs.DurationVar(&f.readyLag, "ready-lag", health.DefaultMaxLag, "with --health-listen: how far behind the stream this projector may be while /readyz answers ready")
	fs.DurationVar(&f.stuckAfter, "stuck-after", projections.StuckAfter, "with --health-listen: how long the projector may fail without a success (NATS or PostgreSQL refusing it, an outage) before /healthz answers down with running stuck")
	logging.AddFlags(fs, &f.log)
	return cmd
}

// execute runs the command line args until ctx ends.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand(stdout, stderr)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}

// run is execute with help, version and log on one writer (the tests').
func run(ctx context.Context, args []string, w io.Writer) error { return execute(ctx, args, w, w) }

// check refuses flags that cannot work together, before anything starts.
func (f flags) check() error {
	switch {
	case f.natsURL == "":
		return errors.New("no NATS address: set NATS_URL or --nats-url")
	case f.databaseURL == "":
		return errors.New("no PostgreSQL address: set DATABASE_URL or --database-url")
	case f.partitions < 0 || f.partitions > projections.MaxPartitions:
		return fmt.Errorf("--partitions %d: want 0 (unpartitioned) or 1 to %d", f.partitions, projections.MaxPartitions)
	case f.pinnedTTL < 2*time.Second:
		return fmt.Errorf("--pinned-ttl %v: want 2s or more", f.pinnedTTL)
	// Out of range, these were taken as something else without a word:
	// --stuck-after 0 made /healthz answer down for a healthy projector
	// (no failure lasts 0s, and 0s >= 0s), --ready-lag 0 or less made
	// /readyz never ready, the counts fell back to their defaults.
	case f.stuckAfter <= 0:
		return fmt.Errorf("--stuck-after %v: want a positive duration", f.stuckAfter)
	case f.readyLag <= 0:
		return fmt.Errorf("--ready-lag %v: want a positive duration", f.readyLag)
	case f.connectWait < 0:
		return fmt.Errorf("--connect-timeout %v: want 0 (until stopped) or a positive duration", f.connectWait)
	case f.batch < 1:
		return fmt.Errorf("--batch %d: want 1 or more events", f.batch)
	case f.pipelineRows < 0:
		return fmt.Errorf("--pipeline-rows %d: want 0 (every batch by COPY) or more rows", f.pipelineRows)
	case f.snapshotEvery < 1:
		return fmt.Errorf("--snapshot-every %d: want 1 or more events", f.snapshotEvery)
	case f.resident < 1:
		return fmt.Errorf("--resident-pools %d: want 1 or more pools", f.resident)
	case f.metricsListen != "" && f.metricsTokens == "":
		return errors.New("--metrics-listen needs --metrics-tokens FILE: /metrics is never open to anyone (create a token with 'ledger token add --scopes metrics')")
	}
	// Taken as they were, a name NATS cannot name a consumer with ("",
	// "a.b") failed only at the consumer's creation, retried for ever,
	// and a listener address without a port only once PostgreSQL and
	// NATS answered.
	if err := (natsauth.Layout{Name: f.name}).Validate(); err != nil {
		return fmt.Errorf("--name %q: letters, digits, '-' and '_', 1 to 64 (the durable consumer's name, as ledger nats init --projector-name)", f.name)
	}
	for _, l := range []struct{ flag, addr string }{{"--health-listen", f.healthListen}, {"--metrics-listen", f.metricsListen}} {
		if l.addr == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(l.addr); err != nil {
			return fmt.Errorf("%s %q: want host:port: %w", l.flag, l.addr, err)
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("%s %q: the port must be 0 to 65535", l.flag, l.addr)
		}
	}
	return nil
}

// runProjector is the whole command; it returns nil when ctx ends.
func runProjector(ctx context.Context, f flags, stderr io.Writer) error {
	log, err := logging.New(stderr, f.log)
	if err != nil {
		return err
	}
	reg, err := serveMetrics(ctx, f, log)
	if err != nil {
		return err
	}
	w := connect.New("projector", log, f.connectWait)
	db, err := w.Postgres(ctx, f.databaseURL, true) // then lazy: an outage is retried by Run
	if err != nil {
		return ignoreStop(ctx, err)
	}
	defer db.Close()
	var auth []nats.Option
	if f.natsCreds != "" {
		o, err := natsauth.Option(f.natsCreds)
		if err != nil {
			return err
		}
		auth = append(auth, o)
	}
	nc, err := w.NATS(ctx, f.natsURL, auth...)
	if err != nil {
		return ignoreStop(ctx, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	opts := []projections.Option{projections.WithBatchSize(f.batch), projections.WithPipelineRows(f.pipelineRows), projections.WithSnapshotEvery(f.snapshotEvery), projections.WithResidentPools(f.resident),
		projections.WithName(f.name), projections.WithLogger(log), projections.WithInstance(f.instance), projections.WithPinnedTTL(f.pinnedTTL),
		projections.WithMetrics(reg.Projector())}
	if f.syncCommit {
		opts = append(opts, projections.WithSynchronousCommit())
	}
	if f.trustedKeys != "" {
		keys, err := signing.LoadKeyring(f.trustedKeys)
		if err != nil {
			return err
		}
		opts = append(opts, projections.WithTrustedKeys(keys))
	} else {
		log.Warn("projector: no --trusted-keys: events are not authenticated; anyone who can publish to ledger.> can change allocations")
	}
	if f.healCreds != "" {
		o, err := natsauth.Option(f.healCreds)
		if err != nil {
			return err
		}
		hnc, err := connect.New("projector-heal", log, f.connectWait).NATS(ctx, f.natsURL, o)
		if err != nil {
			return err
		}
		defer hnc.Close()
		hjs, err := jetstream.New(hnc)
		if err != nil {
			return err
		}
		opts = append(opts, projections.WithHealer(hjs))
	}
	var running atomic.Bool
	running.Store(true)
	failures := projections.NewFailures()
	opts = append(opts, projections.WithFailures(failures))
	stuck := func() bool { return failures.Longest() >= f.stuckAfter }
	if err := serveHealth(ctx, f, nc, js, db, log, running.Load, stuck); err != nil {
		return err
	}
	log.Info("projector: running", "name", f.name, "partitions", f.partitions, "batch", f.batch, "snapshot_every", f.snapshotEvery)
	if f.partitions > 0 {
		g, gerr := projections.NewGroup(js, db, f.partitions, opts...)
		if gerr != nil {
			return gerr
		}
		err = g.Run(ctx)
	} else {
		err = projections.New(js, db, opts...).Run(ctx)
	}
	running.Store(false)
	if err == nil {
		log.Info("projector: stopped")
	}
	return err
}

func ignoreStop(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// serveHealth starts the probes' listener of --health-listen, if set:
// /healthz is NATS connected, the stream answering and the fold loop
// running, not stuck (failing without a success for
// projections.StuckAfter); /readyz is PostgreSQL answering and this projector's rows of
// projector_offsets (its name, or its partitions) less than --ready-lag
// behind the stream. A listener that cannot start is an error at once.
func serveHealth(ctx context.Context, f flags, nc *nats.Conn, js jetstream.JetStream, db *pgxpool.Pool, log *slog.Logger, running, stuck func() bool) error {
	if f.healthListen == "" {
		return nil
	}
	names := map[string]bool{f.name: f.partitions == 0}
	for k := range f.partitions {
		names[projections.PartitionName(f.name, k, f.partitions)] = true
	}
	c := &health.Checker{NC: nc, JS: js, DB: db, Running: running, Stuck: stuck, MaxLag: f.readyLag, Log: log,
		Projectors: func(name string) bool { return names[name] }}
	ready, errc := make(chan struct{}), make(chan error, 1)
	go func() { errc <- health.Serve(ctx, f.healthListen, c, log, func(string) { close(ready) }) }()
	select {
	case <-ready:
		go func() {
			if err := <-errc; err != nil {
				log.Error("projector: health listener stopped", "err", err)
			}
		}()
		return nil
	case err := <-errc:
		return err
	}
}

// serveMetrics starts the /metrics listener of --metrics-listen, if set,
// and returns the registry the projector records in (nil Projector()
// recorder when off). A listener that cannot start is an error at once.
func serveMetrics(ctx context.Context, f flags, log *slog.Logger) (*metrics.Registry, error) {
	if f.metricsListen == "" {
		return nil, nil
	}
	tokens, err := auth.Watch(ctx, f.metricsTokens, auth.DefaultReloadInterval, log)
	if err != nil {
		return nil, err
	}
	reg := metrics.New()
	ready, errc := make(chan struct{}), make(chan error, 1)
	go func() {
		errc <- metrics.Serve(ctx, f.metricsListen, reg, tokens, log, func(string) { close(ready) })
	}()
	select {
	case <-ready:
		go func() {
			if err := <-errc; err != nil {
				log.Error("projector: metrics listener stopped", "err", err)
			}
		}()
		return reg, nil
	case err := <-errc:
		return nil, err
	}
}
