package benchmark

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/natsserver"
	"github.com/cluster-ledger/ledger/internal/pgcluster"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/migrations"
	"github.com/cluster-ledger/ledger/projections"

	"github.com/cluster-ledger/ledger/projections/query"
)

// Config says what to run against and how much.
type Config struct {
	// NATSURL and DatabaseURL name servers to use; empty: an embedded
	// NATS server and a private PostgreSQL cluster in a temporary
	// directory. The harness creates its own databases on the PostgreSQL
	// server (and drops them at the end unless Keep).
	NATSURL, DatabaseURL string
	// NATSCreds is the seed file of the identity used on NATSURL (the
	// admin's: the harness creates the stream and publishes raw events);
	// the embedded servers accept anonymous clients on a private port.
	NATSCreds string
	// Quick runs every phase with small numbers (for tests).
	Quick bool
	// EventsReplay and EventsProject are the sizes of the logs of the
	// replay and projection phases (0: the default, or the quick size).
	EventsReplay, EventsProject int
	// Keep keeps the temporary directory (and the databases).
	Keep bool
	// Unsigned runs the ledger without signing: no signing key in the
	// API, no trusted keys in the projector and the readers. By default
	// the run is signed, as `ledger dev` and production run, with the
	// unsigned figures of appends, projection and replay beside.
	Unsigned bool
	// Progress receives a line per phase step (nil: discarded).
	Progress io.Writer
	// Phases are the phases to run, by number ("1" to "6"; nil: all).
	// Phase 3 resumes phase 2's projector, so it needs phase 2.
	Phases []string
	// CPUProfile receives a CPU profile of the run (nil: none), each
	// sample labelled with its phase (pprof -tagfocus phase=4).
	CPUProfile io.Writer
	// Rebuild rebuilds the whole projection of the stream at natsURL into
	// the empty, migrated database at intoURL with the ledger's rebuild
	// code path (`ledger replay --into`), trusting the keys of the file
	// trustedKeys ("": none, unsigned).
	Rebuild func(ctx context.Context, natsURL, intoURL, trustedKeys string) error
}

// Defaults.
const (
	DefaultEventsReplay  = 1_000_000
	DefaultEventsProject = 100_000
)

// sizes are the numbers of one run.
type sizes struct {
	clients      int // concurrent clients of the append phase, each on its own pool
	singles      int // events sent one per request
	arrays       int // requests of arrayLen events
	arrayLen     int
	project      int
	latencyRate  int // events/s
	latencyFor   time.Duration
	latencyPools int
	replay       int
	publishBatch int // async publishes in flight before waiting for the acks
	// partitionEvents is the events per pool of phase 5's 64 pools.
	partitionEvents int
	// ownershipEvents is the length of each of phase 6's two logs.
	ownershipEvents int
	projectorName   string
}

func (c Config) sizes() sizes {
	s := sizes{clients: 4, singles: 3000, arrays: 100, arrayLen: 100, project: DefaultEventsProject,
		latencyRate: 1000, latencyFor: 10 * time.Second, latencyPools: 8, replay: DefaultEventsReplay, publishBatch: 1000,
		partitionEvents: 1000, ownershipEvents: 5000}
	if c.Quick {
		s.singles, s.arrays, s.project, s.latencyFor, s.replay, s.partitionEvents, s.ownershipEvents = 200, 8, 2000, time.Second, 5000, 20, 200
	}
	if c.EventsProject > 0 {
		s.project = c.EventsProject
	}
	if c.EventsReplay > 0 {
		s.replay = c.EventsReplay
	}
	return s
}

// bench is one run: its servers, connections, databases and report.
type bench struct {
	cfg   Config
	n     sizes
	runID string
	log   *slog.Logger

	dir     string
	ns      *natsserver.Server
	pg      *pgcluster.Cluster
	natsURL string
	adminDB string // URL of the database the harness's databases are created from
	dbURL   string // the projection and API database
	dbs     []string

	nc *nats.Conn
	js jetstream.JetStream
	db *pgxpool.Pool
	// appendTargets are the servers phase 1 measures: two fresh embedded
	// ones, one per sync policy (or the main server when it is not
	// embedded); appendServers are those this run started.
	appendTargets []appendTarget
	appendServers []*natsserver.Server
	appendCluster *natsserver.Cluster

	apiURL   string
	apiToken string // admin token of the API the harness runs
	http     *http.Client
	stopAPI  func() error // nil when the API is not running

	// signer signs every event the run writes, and the API's; keys
	// (written to keysFile for the rebuild) trusts it. Both nil with
	// Config.Unsigned.
	signer   *signing.Signer
	keys     *signing.Keyring
	keysFile string

	report  *Report
	started time.Time
	// projectRate is phase 2's projector rate, and projectLast the last
	// sequence of its log (the stream's first events), for phase 4.
	projectRate float64
	projectLast uint64
	// perCore is one core's Ed25519 verify rate, once measured
	// (verifyRate), so phases 2 and 4 read the same figure.
	perCore float64
}

// Run runs every phase and returns the report. Servers it started and the
// temporary directory are removed when it returns (unless Keep), also on
// error or cancellation.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.Rebuild == nil {
		return nil, errors.New("benchmark: no Rebuild function")
	}
	b := &bench{cfg: cfg, n: cfg.sizes(), runID: randomHex(4), started: time.Now(),
		log: slog.New(slog.NewTextHandler(cfg.Progress, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	b.n.projectorName = "bench-" + b.runID
	b.report = &Report{Quick: cfg.Quick, Signed: !cfg.Unsigned, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	defer func() {
		if cerr := b.close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	type phase struct {
		name string
		run  func(context.Context) error
	}
	phases := []phase{
		{"2 projection", b.projection},
		{"1 append", b.appends},
		{"3 latency", b.latency},
		{"4 replay", b.replay},
		{"5 partitions", b.partitions},
		{"6 ownership", b.ownership},
	}
	if len(cfg.Phases) > 0 {
		if slices.Contains(cfg.Phases, "3") && !slices.Contains(cfg.Phases, "2") {
			return nil, errors.New("benchmark: phase 3 resumes phase 2's projector: run phase 2 too")
		}
		for _, want := range cfg.Phases {
			if !slices.ContainsFunc(phases, func(ph phase) bool { return strings.Fields(ph.name)[0] == want }) {
				return nil, fmt.Errorf("benchmark: no phase %q (1 to 6)", want)
			}
		}
	}
	if err := b.open(ctx); err != nil {
		return nil, err
	}
	if cfg.CPUProfile != nil {
		if err := pprof.StartCPUProfile(cfg.CPUProfile); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	for _, ph := range phases {
		number := strings.Fields(ph.name)[0]
		if !b.runs(number) {
			continue
		}
		b.progress("phase %s: start", ph.name)
		start := time.Now()
		var err error
		// The phase's goroutines (the projector, the API) inherit the
		// label, so a profile tells the phases apart.
		pprof.Do(ctx, pprof.Labels("phase", number), func(ctx context.Context) { err = ph.run(ctx) })
		if err != nil {
			return nil, fmt.Errorf("phase %s: %w", ph.name, err)
		}
		d := time.Since(start)
		b.report.Phases = append(b.report.Phases, PhaseTime{Phase: ph.name, Seconds: d.Seconds()})
		b.progress("phase %s: done in %s", ph.name, d.Round(100*time.Millisecond))
	}
	b.report.TotalSeconds = time.Since(b.started).Seconds()
	return b.report, nil
}

// step labels what the calling goroutine, and those it starts from now
// on, do next (a profile's "step" tag), within its phase.
func step(ctx context.Context, name string) context.Context {
	ctx = pprof.WithLabels(ctx, pprof.Labels("step", name))
	pprof.SetGoroutineLabels(ctx)
	return ctx
}

// runs says whether the run includes phase number.
func (b *bench) runs(number string) bool {
	return len(b.cfg.Phases) == 0 || slices.Contains(b.cfg.Phases, number)
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.cfg.Progress, "bench %6.1fs  %s\n", time.Since(b.started).Seconds(), fmt.Sprintf(format, args...))
}

// open starts or connects to the servers and prepares the database.
func (b *bench) open(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "ledger-bench-")
	if err != nil {
		return err
	}
	// As root PostgreSQL runs as its own user, which must pass through
	// this directory (its own, made here) to its data in dir/pg.
	if err := os.Chmod(dir, 0o711); err != nil {
		return err
	}
	b.dir = dir
	b.report.TempDir = dir
	if !b.cfg.Unsigned {
		// A key of the run's own, as `ledger dev` makes one: the API
		// signs with it, the projector and the readers trust it.
		b.signer = signing.Generate()
		b.keys = signing.NewKeyring(b.signer.Public())
		b.keysFile = filepath.Join(dir, signing.TrustedKeysFile)
		if err := os.WriteFile(b.keysFile, signing.PublicPEM(b.signer.Public()), 0o644); err != nil {
			return err
		}
	}
	b.natsURL = b.cfg.NATSURL
	if b.natsURL == "" {
		b.progress("starting embedded NATS (JetStream in %s)", filepath.Join(b.dir, "nats"))
		// The logs of phases 2 to 4 (up to a million events) are written
		// to a server that syncs in the background: syncing each of them
		// would only measure the disk (phase 1 shows what it costs).
		ns, err := natsserver.Start(ctx, natsserver.WithStoreDir(filepath.Join(b.dir, "nats")), natsserver.WithListen("127.0.0.1:0"),
			natsserver.WithSync(unsynced))
		if err != nil {
			return fmt.Errorf("start NATS: %w", err)
		}
		b.ns, b.natsURL = ns, ns.URL()
		b.report.NATS = "embedded, file store; phase 1 on two fresh servers (sync always, and " + unsynced.String() +
			"), phases 2-4 on one with " + unsynced.String()
	} else {
		b.report.NATS = redact(b.natsURL)
		b.report.Notes = append(b.report.Notes, "with --nats-url, phase 1 runs on that server only, under its own sync policy: no sync always / unsynced comparison")
	}
	b.adminDB = b.cfg.DatabaseURL
	if b.adminDB == "" {
		b.progress("starting a private PostgreSQL in %s", filepath.Join(b.dir, "pg"))
		pg, err := pgcluster.Start(ctx, pgcluster.WithDataDir(filepath.Join(b.dir, "pg")))
		if err != nil {
			return fmt.Errorf("start PostgreSQL: %w", err)
		}
		b.pg, b.adminDB = pg, pg.URLFor(pgcluster.DefaultDatabase) // the superuser: the harness creates databases
		b.report.Postgres = "private cluster, fsync on"
	} else {
		b.report.Postgres = redact(b.adminDB)
	}
	if b.dbURL, err = b.createDatabase(ctx, "bench_"+b.runID); err != nil {
		return err
	}
	if err := migrations.Up(ctx, b.dbURL); err != nil {
		return err
	}
	if b.db, err = pgxpool.New(ctx, b.dbURL); err != nil {
		return err
	}
	var version string
	if err := b.db.QueryRow(ctx, `SHOW server_version`).Scan(&version); err != nil {
		return err
	}
	b.report.Postgres = "PostgreSQL " + strings.Fields(version)[0] + ", " + b.report.Postgres
	if b.nc, err = b.connect(b.natsURL, nats.Name("ledger-bench"), nats.Timeout(5*time.Second)); err != nil {
		return fmt.Errorf("NATS %s: %w", redact(b.natsURL), err)
	}
	if b.js, err = jetstream.New(b.nc); err != nil {
		return err
	}
	s, err := stream.Ensure(ctx, b.js)
	if err != nil {
		return err
	}
	if b.runs("1") {
		if err := b.openAppendTargets(ctx); err != nil {
			return err
		}
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	if n := info.State.Msgs; n > 0 {
		note := fmt.Sprintf("the stream %s already held %d messages: the projection and replay phases process them too", stream.Name, n)
		b.report.Notes = append(b.report.Notes, note)
		b.progress("note: %s", note)
	}
	return nil
}

// unsynced is the main embedded server's policy: nats-server's default.
var unsynced = natsserver.Sync{Interval: 2 * time.Minute}

// openAppendTargets starts phase 1's servers, each with the LEDGER stream
// and a database of its own for its API (whose hold check compares that
// stream with that database's projector offsets: none): one server per
// sync policy, and a 3-server cluster with the stream at 3 replicas.
// Fresh servers, so that they are compared on equal streams.
func (b *bench) openAppendTargets(ctx context.Context) error {
	if b.ns == nil {
		b.appendTargets = []appendTarget{{label: "the server's own sync policy", natsURL: b.natsURL, dbURL: b.dbURL, nc: b.nc, js: b.js}}
		return nil
	}
	for k, policy := range []natsserver.Sync{natsserver.SyncAlways, unsynced} {
		dir := filepath.Join(b.dir, fmt.Sprintf("nats-append-%d", k))
		b.progress("starting an embedded NATS for phase 1, sync %s (JetStream in %s)", policy, dir)
		ns, err := natsserver.Start(ctx, natsserver.WithStoreDir(dir), natsserver.WithListen("127.0.0.1:0"), natsserver.WithSync(policy))
		if err != nil {
			return fmt.Errorf("start NATS: %w", err)
		}
		b.appendServers = append(b.appendServers, ns)
		label := "unsynced, " + policy.String()
		if policy.Always {
			label = "sync always"
		}
		if err := b.addAppendTarget(ctx, label, ns.URL(), 1); err != nil {
			return err
		}
	}
	dir := filepath.Join(b.dir, "nats-append-r3")
	b.progress("starting a 3-server embedded NATS cluster for phase 1, sync %s (JetStream in %s)", unsynced, dir)
	c, err := natsserver.StartCluster(ctx, natsserver.ClusterSpec{Name: "bench", Size: 3, Dir: dir},
		natsserver.WithSync(unsynced), natsserver.WithRouteAuth("bench", randomHex(16)))
	if err != nil {
		return fmt.Errorf("start NATS cluster: %w", err)
	}
	b.appendCluster = c
	return b.addAppendTarget(ctx, "R3, "+unsynced.String(), c.URL(), 3)
}

// addAppendTarget opens a phase 1 target: a connection to natsURL, the
// stream with replicas, and a database for its API.
func (b *bench) addAppendTarget(ctx context.Context, label, natsURL string, replicas int) error {
	t := appendTarget{label: label, natsURL: natsURL}
	var err error
	if t.dbURL, err = b.createDatabase(ctx, fmt.Sprintf("bench_%s_append%d", b.runID, len(b.appendTargets))); err != nil {
		return err
	}
	if err := migrations.Up(ctx, t.dbURL); err != nil {
		return err
	}
	if t.nc, err = b.connect(t.natsURL, nats.Name("ledger-bench-append"), nats.Timeout(5*time.Second)); err != nil {
		return fmt.Errorf("NATS %s: %w", t.natsURL, err)
	}
	if t.js, err = jetstream.New(t.nc); err != nil {
		return err
	}
	b.appendTargets = append(b.appendTargets, t)
	_, err = stream.Setup(ctx, t.js, stream.Settings{Replicas: replicas, Servers: replicas})
	return err
}

// createDatabase creates an empty database on the PostgreSQL server and
// returns its URL.
func (b *bench) createDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, b.adminDB)
	if err != nil {
		return "", fmt.Errorf("PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	b.dbs = append(b.dbs, name)
	u, err := url.Parse(b.adminDB)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// close stops what open started, in reverse order, whatever happened.
func (b *bench) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if b.stopAPI != nil {
		if err := b.stopAPI(); err != nil {
			errs = append(errs, fmt.Errorf("API: %w", err))
		}
	}
	if b.js != nil {
		for _, name := range []string{b.n.projectorName} {
			if err := b.js.DeleteConsumer(ctx, stream.Name, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				errs = append(errs, fmt.Errorf("delete consumer %s: %w", name, err))
			}
		}
	}
	if b.nc != nil {
		b.nc.Close()
	}
	for _, t := range b.appendTargets {
		if t.nc != nil && t.nc != b.nc {
			t.nc.Close()
		}
	}
	for _, ns := range b.appendServers {
		ns.Shutdown()
	}
	if b.appendCluster != nil {
		b.appendCluster.Shutdown()
	}
	if b.db != nil {
		b.db.Close()
	}
	if b.pg == nil && !b.cfg.Keep && len(b.dbs) > 0 {
		// Someone else's server: drop the databases made for the run.
		if conn, err := pgx.Connect(ctx, b.adminDB); err == nil {
			for _, name := range b.dbs {
				if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
					errs = append(errs, fmt.Errorf("drop database %s: %w", name, err))
				}
			}
			conn.Close(ctx)
		} else {
			errs = append(errs, err)
		}
	}
	if b.pg != nil {
		b.progress("stopping PostgreSQL")
		if err := b.pg.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop PostgreSQL: %w", err))
		}
	}
	if b.ns != nil {
		b.ns.Shutdown()
	}
	if b.dir != "" {
		if b.cfg.Keep {
			b.progress("kept %s", b.dir)
		} else if err := os.RemoveAll(b.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// runningProjector is a projector running in this process, on its own
// NATS connection, as cmd/projector would.
type runningProjector struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// startProjector runs a projector named name on the run's database until
// stop is called, as deployed (trusting the run's key).
func (b *bench) startProjector(ctx context.Context, name string) (*runningProjector, error) {
	return b.startProjectorOn(ctx, name, b.db, b.keys)
}

// startProjectorOn runs a projector named name on db, trusting keys (nil:
// unsigned), until stop is called.
func (b *bench) startProjectorOn(ctx context.Context, name string, db *pgxpool.Pool, keys *signing.Keyring) (*runningProjector, error) {
	nc, err := b.connect(b.natsURL, nats.Name("ledger-bench-projector"))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	rp := &runningProjector{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(rp.done)
		defer nc.Close()
		rp.err = projections.New(js, db, projections.WithName(name), projections.WithLogger(b.log), projections.WithTrustedKeys(keys)).Run(pctx)
	}()
	return rp, nil
}

// stop stops the projector and returns what Run returned.
func (rp *runningProjector) stop() error {
	rp.cancel()
	<-rp.done
	return rp.err
}

// lastSeq is the stream's last sequence.
func (b *bench) lastSeq(ctx context.Context) (uint64, error) {
	s, err := b.js.Stream(ctx, stream.Name)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// waitOffset polls projector_offsets every interval until the projector
// name has committed last, and returns when it saw it.
func (b *bench) waitOffset(ctx context.Context, name string, last uint64, every time.Duration, stopped <-chan struct{}) (time.Time, error) {
	return waitOffsetIn(ctx, b.db, name, last, every, stopped)
}

// waitOffsetIn is waitOffset in db.
func waitOffsetIn(ctx context.Context, db *pgxpool.Pool, name string, last uint64, every time.Duration, stopped <-chan struct{}) (time.Time, error) {
	for {
		seq, err := query.ProjectorOffset(ctx, db, name)
		now := time.Now()
		if err != nil {
			return now, err
		}
		if seq >= last {
			return now, nil
		}
		select {
		case <-ctx.Done():
			return now, ctx.Err()
		case <-stopped:
			return now, errors.New("the projector stopped")
		case <-time.After(every):
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}

// creds is the identity for url: the configured one on the given server.
func (b *bench) creds(url string) string {
	if url != "" && url == b.cfg.NATSURL {
		return b.cfg.NATSCreds
	}
	return ""
}

// connect connects to url with its identity.
func (b *bench) connect(url string, opts ...nats.Option) (*nats.Conn, error) {
	return natsauth.Connect(url, b.creds(url), opts...)
}
