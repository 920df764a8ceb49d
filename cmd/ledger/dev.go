package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/connect"
	"github.com/cluster-ledger/ledger/internal/natsserver"
	"github.com/cluster-ledger/ledger/internal/pgcluster"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

type devConfig struct {
	data, httpAddr, natsAddr, databaseURL string
	snapshotEvery                         int
	origins                               []string
	natsSync                              natsserver.Sync
}

func init() {
	cfg := devConfig{natsSync: natsserver.SyncAlways}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole service on this machine (what `make run` starts)",
		Long: `dev starts everything on one machine, in one process:

  - an embedded NATS server with JetStream on disk (DATA/nats), listening for
    producers on --nats, syncing every acknowledged write to disk (--nats-sync);
  - a private PostgreSQL cluster started from this machine's PostgreSQL
    binaries (initdb/pg_ctl; data in DATA/pg; run as user nobody when dev
    runs as root), unless --database-url or DATABASE_URL names one;
  - the schema migrations, the projector and the HTTP API on --http, with
    the web console at http://ADDR/console/.

Once ready it prints LEDGER_URL=, LEDGER_TOKEN=, NATS_URL= and DATABASE_URL=
lines to export in another shell. LEDGER_TOKEN is an admin token (every
scope, every pool) kept in DATA/admin.token (mode 0600); the API accepts
the tokens of DATA/tokens.jsonl (add more with 'ledger token add'). A second run reuses DATA: nothing is lost on
restart. Ctrl-C stops everything cleanly.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(cmd.Context(), cmd.OutOrStdout(), cfg)
		},
	}
	cmd.Flags().StringVar(&cfg.data, "data", "./.ledger", "directory for JetStream and PostgreSQL data")
	cmd.Flags().StringVar(&cfg.httpAddr, "http", "127.0.0.1:8080", "address of the HTTP API")
	cmd.Flags().StringVar(&cfg.natsAddr, "nats", "127.0.0.1:4222", "address where the embedded NATS listens")
	cmd.Flags().Var(&cfg.natsSync, "nats-sync", "when JetStream syncs its writes to disk: always (every write, before the publish is acknowledged: an acknowledged event survives a power loss) or interval:DURATION (in the background, faster, but a crash of the machine may lose up to DURATION of acknowledged events)")
	cmd.Flags().IntVar(&cfg.snapshotEvery, "snapshot-every", projections.DefaultSnapshotEvery, "the projector snapshots a pool's engine state every this many of its events")
	cmd.Flags().StringArrayVar(&cfg.origins, "allow-origin", nil, "browser origin (scheme://host[:port]) allowed to call the API; repeatable; none by default")
	cmd.Flags().StringVar(&cfg.databaseURL, "database-url", envDefault(EnvDatabaseURL, ""), "use this PostgreSQL instead of a private cluster (env "+EnvDatabaseURL+")")
	root.AddCommand(cmd)
}

func runDev(ctx context.Context, out io.Writer, cfg devConfig) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := os.MkdirAll(cfg.data, 0o755); err != nil {
		return err
	}
	data, err := filepath.Abs(cfg.data)
	if err != nil {
		return err
	}
	token, tokens, err := devTokens(data)
	if err != nil {
		return err
	}
	access := devAccess{token: token, options: []api.Option{api.WithTokens(tokens), api.WithAllowedOrigins(cfg.origins...)}}
	ns, err := natsserver.Start(ctx, natsserver.WithStoreDir(filepath.Join(data, "nats")), natsserver.WithListen(cfg.natsAddr),
		natsserver.WithSync(cfg.natsSync))
	if err != nil {
		return fmt.Errorf("start NATS: %w", err)
	}
	defer ns.Shutdown()
	dbURL := cfg.databaseURL
	if dbURL == "" {
		fmt.Fprintln(os.Stderr, "starting PostgreSQL in", filepath.Join(data, "pg"), "...")
		pg, err := pgcluster.Start(ctx, pgcluster.WithDataDir(filepath.Join(data, "pg")), pgcluster.WithLog(os.Stderr))
		if err != nil {
			return fmt.Errorf("start PostgreSQL: %w", err)
		}
		defer stopPostgres(pg)
		dbURL = pg.URL()
	}
	return runServices(ctx, out, log, ns.URL(), dbURL, cfg.httpAddr, cfg.snapshotEvery, access)
}

// devAccess is who may use dev's API: its options, and the admin token
// to print.
type devAccess struct {
	token   string
	options []api.Option
}

// runServices runs the projector and the API until ctx ends, then waits
// for both to stop.
func runServices(ctx context.Context, out io.Writer, log *slog.Logger, natsURL, dbURL, httpAddr string, snapshotEvery int, access devAccess) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	ready := make(chan string, 1)
	wg.Add(2)
	go func() {
		defer wg.Done()
		errs <- api.Serve(ctx, api.ServeConfig{HTTPAddr: httpAddr, NATSURL: natsURL, DatabaseURL: dbURL, Migrate: true, Logger: log,
			Ready: func(addr string) { ready <- addr }, Options: access.options})
	}()
	go func() {
		defer wg.Done()
		errs <- runProjector(ctx, log, natsURL, dbURL, snapshotEvery)
	}()
	var err error
	select {
	case addr := <-ready:
		fmt.Fprintf(out, "LEDGER_URL=http://%s\nLEDGER_TOKEN=%s\nNATS_URL=%s\nDATABASE_URL=%s\n", addr, access.token, natsURL, dbURL)
		fmt.Fprintf(out, "# console: http://%s/console/\n", addr)
		fmt.Fprintf(out, "# ready. In another shell: export the four lines above; psql \"$DATABASE_URL\" to query. Ctrl-C stops.\n")
		err = <-errs
	case err = <-errs:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// runProjector runs the projector in-process, as cmd/projector would.
func runProjector(ctx context.Context, log *slog.Logger, natsURL, dbURL string, snapshotEvery int) error {
	w := connect.New("projector", log, 0) // the servers are this process's own
	nc, err := w.NATS(ctx, natsURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	db, err := w.Postgres(ctx, dbURL, true)
	if err != nil {
		return err
	}
	defer db.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	err = projections.New(js, db, projections.WithLogger(log), projections.WithSnapshotEvery(snapshotEvery)).Run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func stopPostgres(pg *pgcluster.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pg.Stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "stop PostgreSQL:", err)
	}
}
