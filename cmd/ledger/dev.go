package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/connect"
	"github.com/cluster-ledger/ledger/internal/connlimit"
	"github.com/cluster-ledger/ledger/internal/datadir"
	"github.com/cluster-ledger/ledger/internal/logging"
	"github.com/cluster-ledger/ledger/internal/metrics"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/natsserver"
	"github.com/cluster-ledger/ledger/internal/pgcluster"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/migrations"
	"github.com/cluster-ledger/ledger/projections"
)

// Directories `ledger dev` keeps in its data directory, beside nats/ and pg/.
const (
	devAuthDir    = "nats-auth" // natsauth seed files, one per role
	devSigningDir = "signing"   // the ledger's signing key and the trusted keys
	devPGDir      = "pg"        // the private PostgreSQL cluster (as root: SystemUser's)
	devPGAuthDir  = "pg-auth"   // the PostgreSQL roles' passwords, the invoking user's only
)

// devLayout is what `ledger dev` keeps in its data directory that decides
// what it trusts: checked before anything of it is used (datadir.Check).
var devLayout = datadir.Layout{
	Dirs: []string{devAuthDir, devSigningDir, devPGAuthDir, devNATSDir, devClusterDir},
	Secrets: []string{devAdminFile, devTokensFile,
		filepath.Join(devAuthDir, "*.nk"), filepath.Join(devAuthDir, natsauth.RouteFile),
		filepath.Join(devSigningDir, signing.PrivateKeyFile), filepath.Join(devPGAuthDir, "*.password")},
	Owned: []string{filepath.Join(devSigningDir, signing.TrustedKeysFile), LockFile},
}

type devConfig struct {
	data, httpAddr, natsAddr, databaseURL string
	snapshotEvery                         int
	natsCluster, replicas                 int
	duplicateWindow                       time.Duration
	natsSync                              natsserver.Sync
	origins                               []string
	log                                   logging.Options
	development                           bool // --rules-development
	conns                                 api.ConnLimits
	tokenLimits                           api.TokenLimits
	// reportingBounds shortens, where not zero, what the reporting
	// role's sessions are held to (migrations.Reporting*; tests).
	reportingBounds pgcluster.SessionBounds
}

func init() {
	cfg := devConfig{natsSync: natsserver.SyncAlways, natsCluster: 1, log: logging.Defaults()}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole service on this machine (what `make run` starts)",
		Long: `dev starts everything on one machine, in one process:

  - an embedded NATS server with JetStream on disk (DATA/nats), listening for
    producers on --nats, syncing every acknowledged write to disk (--nats-sync).
    It refuses anonymous connections: each identity (admin, ledger,
    projector, auditor) has an nkey seed in DATA/nats-auth (0600) and only
    the rights its job needs; dev creates the LEDGER stream with the admin
    identity;
  - the ledger's Ed25519 signing key (DATA/signing/ledger.key, 0600) and the
    trusted public keys (DATA/signing/trusted.pub): the projector refuses
    events no trusted key signed;
  - a private PostgreSQL cluster started from this machine's PostgreSQL
    binaries (initdb/pg_ctl; data in DATA/pg; when dev runs as root, run
    as the system user ledger-postgres, created when missing), unless
    --database-url names one (DATABASE_URL in the environment is ignored:
    it may be the line an earlier run printed). Each identity has its
    PostgreSQL role: the owner ledger migrates, ledger_projector writes,
    ledger_api reads for the API, and ledger_reporting (printed as
    DATABASE_URL) reads the documented tables only; their passwords are
    in DATA/pg-auth (the invoking user's only);
  - the schema migrations, the projector and the HTTP API on --http, with
    the web console at http://ADDR/console/ and the Prometheus metrics of
    both at http://ADDR/metrics (the admin token may read them).

Once ready it prints export lines for LEDGER_URL, LEDGER_TOKEN, NATS_URL,
LEDGER_NATS_CREDS (the auditor's identity, for audit, replay and explain),
LEDGER_TRUSTED_KEYS and DATABASE_URL, to paste into another shell (or
eval). LEDGER_TOKEN is an admin
token (every scope, every pool) kept in DATA/admin.token (mode 0600); the
API accepts the tokens of DATA/tokens.jsonl (add more with 'ledger token
add', revoke or rotate them with 'ledger token revoke|rotate': the running
dev takes each change within seconds). A second run reuses DATA: nothing
is lost on restart. DATA must be the invoking user's, not writable by
group or others, and its keys, seeds, tokens and passwords that user's
alone, and its PostgreSQL cluster (DATA/pg) that user's (or PostgreSQL's)
with the configuration dev wrote (no trust rules, no settings that load
code or run programs), or dev refuses it, naming the path and why; as
root, PostgreSQL's
user must be able to enter every directory above DATA (dev never changes
their modes). A second dev on
the same DATA is refused (a lock on DATA/ledger.lock). Ctrl-C stops
everything cleanly.

With --nats-cluster 3, dev runs three JetStream servers in the process
instead of one, a cluster on loopback to try failover on one machine: they
listen for clients on --nats and the two next ports, for each other on free
ports of 127.0.0.1 with routes authenticated by DATA/nats-auth/route.secret
(0600), and keep their stores in DATA/nats-cluster/ledger-{1,2,3}. The
LEDGER stream then has 3 replicas (--replicas): an append is acknowledged
once two servers stored it, and the log survives the loss of any one.
NATS_URL lists the three servers. A DATA directory is either single-server
or cluster: dev refuses to switch it.

With --rules-development the API and the projector also fold plans that
name the rules version in development (today version 4: priority_bands,
preemptable and zero shares; with ownership it folds as version 3), to try
it through the whole service (ledger load --check). A plan that names no
version is still stamped with the newest released one. The log then holds
plans that a ledger or projector without the switch refuses (it stops on
them): keep such a DATA directory for development.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(cmd.Context(), cmd.OutOrStdout(), cfg)
		},
	}
	cmd.Flags().StringVar(&cfg.data, "data", "./.ledger", "data `DIR`: JetStream and PostgreSQL data, credentials and keys")
	cmd.Flags().StringVar(&cfg.httpAddr, "http", "127.0.0.1:8080", "`ADDR` (host:port) the HTTP API listens on")
	cmd.Flags().StringVar(&cfg.natsAddr, "nats", "127.0.0.1:4222", "`ADDR` (host:port) where the embedded NATS listens (with --nats-cluster 3: the first server; the others take the two next ports)")
	cmd.Flags().Var(&cfg.natsSync, "nats-sync", "when JetStream syncs its writes to disk: always (every write, before the publish is acknowledged: an acknowledged event survives a power loss) or interval:DURATION (in the background, faster, but a crash of the machine may lose up to DURATION of acknowledged events); with --nats-cluster 3 it applies to each server, and always means an acknowledged event is synced on two of them")
	cmd.Flags().IntVar(&cfg.natsCluster, "nats-cluster", 1, "number of embedded JetStream servers: 1, or 3 for a replicated log on loopback")
	cmd.Flags().IntVar(&cfg.replicas, "replicas", 0, "copies of the LEDGER stream, at most --nats-cluster (default: one per server, 1 or 3); a different count scales the existing stream")
	cmd.Flags().IntVar(&cfg.snapshotEvery, "snapshot-every", projections.DefaultSnapshotEvery, "the projector snapshots a pool's engine state every this many of its events")
	cmd.Flags().DurationVar(&cfg.duplicateWindow, "duplicate-window", stream.DuplicateWindow,
		"how long JetStream recognises a retried event id and stores it once (a later retry is stored and refused by the projector as duplicate_id)")
	cmd.Flags().StringArrayVar(&cfg.origins, "allow-origin", nil, "browser `ORIGIN` (scheme://host[:port]) allowed to call the API; repeatable; none by default")
	addHTTPLimitFlags(cmd, &cfg.conns, &cfg.tokenLimits)
	cmd.Flags().BoolVar(&cfg.development, "rules-development", false, fmt.Sprintf("the API and the projector accept plans naming rules version %d, in development (for tests: the log then needs the switch to be folded)", int(domain.RulesDevelopment)))
	// Never from the environment: a DATABASE_URL exported from an earlier
	// run names that run's PostgreSQL, stopped with it.
	logging.AddFlags(cmd.Flags(), &cfg.log)
	cmd.Flags().StringVar(&cfg.databaseURL, "database-url", "", "use the PostgreSQL database at `URL` instead of a private cluster, for everything (migrations, projector, API and the printed DATABASE_URL); the environment's DATABASE_URL is ignored")
	root.AddCommand(cmd)
}

// checkRanges refuses a flag out of its range, naming it, before
// anything is created or started (the projector and the stream would
// take such a value as their default without a word).
func (cfg devConfig) checkRanges() error {
	switch {
	case cfg.snapshotEvery < 1:
		return fmt.Errorf("--snapshot-every %d: want 1 or more events", cfg.snapshotEvery)
	case cfg.duplicateWindow <= 0:
		return fmt.Errorf("--duplicate-window %v: want a positive duration", cfg.duplicateWindow)
	case cfg.replicas < 0:
		return fmt.Errorf("--replicas %d: want 0 (one per server) or more", cfg.replicas)
	}
	// A bad --http or --nats was found only once the data directory,
	// PostgreSQL and NATS were made and started.
	if err := checkListenAddr("--http", cfg.httpAddr, 1); err != nil {
		return err
	}
	if err := checkListenAddr("--nats", cfg.natsAddr, cfg.natsCluster); err != nil {
		return err
	}
	return checkHTTPLimits(cfg.conns, cfg.tokenLimits)
}

// checkListenAddr refuses an address that is not host:port with a port
// (0: any free one) leaving room for n servers on it and the ports after.
func checkListenAddr(flag, addr string, n int) error {
	_, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: want host:port: %w", flag, addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || (port > 0 && port+n-1 > 65535) || port > 65535 {
		if n > 1 {
			return fmt.Errorf("%s %q: the port and the %d after it must be ports (0 to 65535; 0: free ones)", flag, addr, n-1)
		}
		return fmt.Errorf("%s %q: the port must be 0 to 65535 (0: a free one)", flag, addr)
	}
	return nil
}

func runDev(ctx context.Context, out io.Writer, cfg devConfig) error {
	log, err := logging.New(os.Stderr, cfg.log)
	if err != nil {
		return err
	}
	if err := cfg.checkCluster(); err != nil {
		return err
	}
	if err := cfg.checkRanges(); err != nil {
		return err
	}
	data, err := filepath.Abs(cfg.data)
	if err != nil {
		return err
	}
	if err := makeDataDir(data, cfg.databaseURL == ""); err != nil {
		return err
	}
	if err := datadir.Check(data, devLayout); err != nil {
		return fmt.Errorf("--data %s: %w", cfg.data, err)
	}
	unlock, err := lockDataDir(data)
	if err != nil {
		return err
	}
	defer unlock()
	token, _, err := devTokens(data)
	if err != nil {
		return err
	}
	// The API takes the file's changes while it runs (ledger token add,
	// revoke, rotate).
	tokens, err := auth.Watch(ctx, filepath.Join(data, devTokensFile), auth.DefaultReloadInterval, log)
	if err != nil {
		return err
	}
	authDir := filepath.Join(data, devAuthDir)
	keys, err := natsauth.Init(authDir)
	if err != nil {
		return fmt.Errorf("NATS credentials: %w", err)
	}
	signer, err := signing.Init(filepath.Join(data, devSigningDir))
	if err != nil {
		return fmt.Errorf("signing key: %w", err)
	}
	trustedPath := filepath.Join(data, devSigningDir, signing.TrustedKeysFile)
	trusted, err := signing.LoadKeyring(trustedPath)
	if err != nil {
		return err
	}
	natsURL, stopNATS, err := startDevNATS(ctx, log, cfg, data, keys)
	if err != nil {
		return err
	}
	defer stopNATS()
	if err := setupStream(ctx, natsURL, natsauth.SeedFile(authDir, natsauth.Admin),
		stream.Settings{Window: cfg.duplicateWindow, Replicas: cfg.replicas, Servers: cfg.natsCluster}); err != nil {
		return err
	}
	// One URL for everything with --database-url; else a role for each.
	var pgAuthDir string
	db := devDatabases{owner: cfg.databaseURL, projector: cfg.databaseURL, api: cfg.databaseURL, reporting: cfg.databaseURL}
	if cfg.databaseURL == "" {
		log.Info("starting PostgreSQL", "dir", filepath.Join(data, devPGDir))
		// pgcluster says what it does in plain lines: each becomes a record.
		pg, err := pgcluster.Start(ctx, append(devPGPolicy(cfg.reportingBounds), pgcluster.WithDataDir(filepath.Join(data, devPGDir)),
			pgcluster.WithAuthDir(filepath.Join(data, devPGAuthDir)), pgcluster.WithRoles(migrations.Roles...),
			pgcluster.WithLog(logging.Lines(log, slog.LevelInfo, "component", "pgcluster")))...)
		if err != nil {
			return fmt.Errorf("start PostgreSQL: %w", err)
		}
		defer stopPostgres(log, pg)
		guardCtx, stopGuard := context.WithCancel(ctx)
		guarded := make(chan struct{})
		go func() {
			defer close(guarded)
			guardRoles(guardCtx, log, pg)
		}()
		defer func() { stopGuard(); <-guarded }()
		db = devDatabases{owner: pg.URL(), projector: pg.URLAs(migrations.RoleProjector),
			api: pg.URLAs(migrations.RoleAPI), reporting: pg.URLAs(migrations.RoleReporting)}
		pgAuthDir = pg.AuthDir()
	}
	// The owner migrates, once; the services then run as their roles,
	// which may not change the schema.
	if err := migrations.Up(ctx, db.owner); err != nil {
		return err
	}
	sv := services{metrics: metrics.New(),
		natsURL: natsURL, authDir: authDir, db: db, pgAuthDir: pgAuthDir, httpAddr: cfg.httpAddr, snapshotEvery: cfg.snapshotEvery,
		signer: signer, trusted: trusted, trustedPath: trustedPath,
		token: token, options: []api.Option{api.WithTokens(tokens), api.WithAllowedOrigins(cfg.origins...), api.WithTokenLimits(cfg.tokenLimits)},
		conns: cfg.conns,
	}
	// The embedded NATS servers' connections come out of this process's
	// file descriptors too: the HTTP server's budget leaves them out, so
	// a flood of HTTP connections cannot take NATS's (connlimit).
	sv.conns.Reserve = connlimit.DefaultReserve + cfg.natsCluster*natsserver.DefaultMaxConns
	if cfg.development {
		sv.options = append(sv.options, api.WithDevelopmentRules())
		sv.projector = append(sv.projector, projections.WithDevelopmentRules())
		fmt.Fprintf(os.Stderr, "rules version %d (in development) accepted: the log may hold plans only a development build folds\n", int(domain.RulesDevelopment))
	}
	return runServices(ctx, out, log, sv)
}

// setupStream creates the LEDGER stream (or sets its duplicate window
// and replicas) as admin, the only identity allowed to.
func setupStream(ctx context.Context, url, adminCreds string, set stream.Settings) error {
	nc, err := natsauth.Connect(url, adminCreds, nats.Name("ledger-admin"), nats.Timeout(5*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = stream.Setup(ctx, js, set)
	return err
}

// services is what runServices runs.
type services struct {
	natsURL, authDir, httpAddr string
	db                         devDatabases
	pgAuthDir                  string // the private PostgreSQL's passwords ("" with --database-url)
	snapshotEvery              int
	signer                     *signing.Signer
	trusted                    *signing.Keyring
	trustedPath                string
	token                      string               // the admin token to print
	options                    []api.Option         // who may use the API
	projector                  []projections.Option // the projector's further options
	metrics                    *metrics.Registry    // the API's and the projector's, served at the API's /metrics
	conns                      api.ConnLimits       // the HTTP server's bounds
}

// runServices runs the projector and the API until ctx ends, then waits
// for both to stop.
func runServices(ctx context.Context, out io.Writer, log *slog.Logger, sv services) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	ready := make(chan string, 1)
	wg.Add(2)
	go func() {
		defer wg.Done()
		errs <- api.Serve(ctx, api.ServeConfig{HTTPAddr: sv.httpAddr, NATSURL: sv.natsURL, DatabaseURL: sv.db.api, Logger: log,
			NATSCreds: natsauth.SeedFile(sv.authDir, natsauth.Ledger), Options: append([]api.Option{api.WithSigner(sv.signer), api.WithTrustedKeys(sv.trusted), api.WithMetrics(sv.metrics)}, sv.options...),
			Conns: sv.conns, Ready: func(addr string) { ready <- addr }})
	}()
	go func() {
		defer wg.Done()
		errs <- runProjector(ctx, log, sv)
	}()
	var err error
	select {
	case addr := <-ready:
		printExports(out, [][2]string{
			{EnvLedgerURL, "http://" + addr},
			{EnvLedgerToken, sv.token},
			{EnvNATSURL, sv.natsURL},
			{EnvNATSCreds, natsauth.SeedFile(sv.authDir, natsauth.Auditor)},
			{EnvTrustedKeys, sv.trustedPath},
			{EnvDatabaseURL, sv.db.reporting},
		})
		fmt.Fprintf(out, "# console: http://%s/console/\n", addr)
		fmt.Fprintf(out, "# ready. In another shell: paste the export lines above; psql \"$DATABASE_URL\" to query. Ctrl-C stops.\n")
		if sv.pgAuthDir != "" {
			fmt.Fprintf(out, "# DATABASE_URL reads only; PostgreSQL roles' passwords (the owner %s's for ledger migrate): %s\n", migrations.RoleOwner, sv.pgAuthDir)
		}
		fmt.Fprintf(out, "# NATS identities (nkey seeds) of the other roles: %s/{admin,ledger,projector}.nk; with the nats CLI: nats --server \"$NATS_URL\" --nkey \"$%s\" ...\n", sv.authDir, EnvNATSCreds)
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

// runProjector runs the projector in-process, as cmd/projector would,
// with the projector's identity and the trusted keys.
func runProjector(ctx context.Context, log *slog.Logger, sv services) error {
	w := connect.New("projector", log, 0) // the servers are this process's own
	auth, err := natsauth.Option(natsauth.SeedFile(sv.authDir, natsauth.Projector))
	if err != nil {
		return err
	}
	nc, err := w.NATS(ctx, sv.natsURL, auth)
	if err != nil {
		return err
	}
	defer nc.Close()
	// Healing a stream that lost its tail appends events again: with the
	// ledger's identity, the one allowed to publish.
	ledgerAuth, err := natsauth.Option(natsauth.SeedFile(sv.authDir, natsauth.Ledger))
	if err != nil {
		return err
	}
	hnc, err := connect.New("projector-heal", log, 0).NATS(ctx, sv.natsURL, ledgerAuth)
	if err != nil {
		return err
	}
	defer hnc.Close()
	db, err := w.Postgres(ctx, sv.db.projector, false)
	if err != nil {
		return err
	}
	defer db.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	hjs, err := jetstream.New(hnc)
	if err != nil {
		return err
	}
	err = projections.New(js, db, append([]projections.Option{projections.WithLogger(log), projections.WithSnapshotEvery(sv.snapshotEvery),
		projections.WithTrustedKeys(sv.trusted), projections.WithHealer(hjs), projections.WithMetrics(sv.metrics.Projector())}, sv.projector...)...).Run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// devPGPolicy is what the private cluster's roles may hold of the
// server, and the built-in functions they may not call
// (migrations/cluster.go; decisions #150-#153).
func devPGPolicy(reporting pgcluster.SessionBounds) []pgcluster.Option {
	opts := []pgcluster.Option{pgcluster.WithSetupSQL(migrations.ClusterSQL)}
	for role, limit := range migrations.ConnLimits {
		p := pgcluster.RolePolicy{ConnLimit: limit}
		if role == migrations.RoleReporting {
			p.Settings = migrations.ReportingSettings
			p.Bounds = pgcluster.SessionBounds{
				Statement:         cmp.Or(reporting.Statement, migrations.ReportingStatement),
				IdleInTransaction: cmp.Or(reporting.IdleInTransaction, migrations.ReportingIdleInTransaction),
				Transaction:       cmp.Or(reporting.Transaction, migrations.ReportingTransaction),
				Memory:            cmp.Or(reporting.Memory, migrations.ReportingMemory),
				NotifyQueue:       cmp.Or(reporting.NotifyQueue, migrations.ReportingNotifyQueue),
				ReadOnly:          true,
			}
		}
		opts = append(opts, pgcluster.WithRolePolicy(role, p))
	}
	return opts
}

// guardRoles keeps the roles' passwords, limits and settings as dev set
// them while it runs: PostgreSQL 15 lets a login role change its own
// password and session defaults, so the holder of the printed
// DATABASE_URL could lock the other users of it out or lift its
// timeouts; the guard puts them back within a second and says so. A
// session may still SET its own timeouts: the guard cancels and ends
// the reporting sessions past their bounds (pgcluster.SessionBounds,
// decision 253), and says so too.
func guardRoles(ctx context.Context, log *slog.Logger, pg *pgcluster.Cluster) {
	err := pg.GuardRoles(ctx, roleGuardInterval, func(role, what string) {
		log.Warn("PostgreSQL role changed by its holder; restored as ledger dev set it", "role", role, "changed", what)
	}, func(role string, pid int, what string) {
		log.Warn("PostgreSQL session held the server past its role's bound", "role", role, "pid", pid, "what", what)
	})
	if err != nil && ctx.Err() == nil {
		log.Error("PostgreSQL roles: the guard stopped; a role that changes its own password or settings is no longer restored", "err", err)
	}
}

// roleGuardInterval is how often dev compares the roles with what it set.
const roleGuardInterval = 250 * time.Millisecond

func stopPostgres(log *slog.Logger, pg *pgcluster.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pg.Stop(ctx); err != nil {
		log.Error("stop PostgreSQL", "err", err)
	}
}

// printExports writes one `export NAME='VALUE'` line per variable, so
// the lines can be pasted into a shell or eval'd as they are: every
// value is single-quoted (URLs hold `?` and `&`, paths may hold spaces).
func printExports(out io.Writer, vars [][2]string) {
	for _, v := range vars {
		fmt.Fprintf(out, "export %s=%s\n", v[0], shellQuote(v[1]))
	}
}

// shellQuote quotes s for a POSIX shell: inside single quotes nothing is
// special but the single quote, which closes the quotes, is written
// escaped and opens them again.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// devDatabases are the URLs of the projection's database for each
// identity of `ledger dev` (docs/decisions.md #142).
type devDatabases struct {
	owner     string // migrates
	projector string // the in-process projector
	api       string // the API and the console
	reporting string // printed as DATABASE_URL
}

// makeDataDir creates the data directory when missing, readable by the
// invoking user only. As root with a private PostgreSQL, PostgreSQL's
// own user must pass through it to DATA/pg: others may then enter it
// (o+x) but not list it. An existing directory is left as it is:
// datadir.Check judges it, pgcluster refuses one its user cannot enter.
func makeDataDir(data string, privatePG bool) error {
	if _, err := os.Stat(data); err == nil {
		return nil
	}
	mode := os.FileMode(0o700)
	if privatePG && os.Geteuid() == 0 {
		mode = 0o711
	}
	if err := os.MkdirAll(data, mode); err != nil {
		return err
	}
	return os.Chmod(data, mode) // whatever the umask
}
