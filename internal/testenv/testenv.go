package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/redact"
	"github.com/cluster-ledger/ledger/internal/stream"

	"github.com/jackc/pgx/v5"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/natsserver"
	"github.com/cluster-ledger/ledger/internal/pgcluster"
)

// EnvDatabaseURL names the server tests use when set.
const EnvDatabaseURL = "DATABASE_URL"

// ContainerImage is the image used when testcontainers provides PostgreSQL.
const ContainerImage = "postgres:15"

// pgServer is where test databases are created.
type pgServer struct {
	adminURL string // a database of the server to run CREATE DATABASE in
	source   string // for messages
	stop     func(context.Context) error
}

var (
	mainInUse atomic.Bool

	pgMu     sync.Mutex
	pgShared *pgServer
	pgErr    error
)

// Main runs the tests and then stops the PostgreSQL server Postgres
// started for this test binary (if any), then exits with the tests' code.
// Call it from TestMain. Each setup runs before the tests, for what a
// package's tests share and cannot start themselves (a service its
// Example functions call, a check of every HTTP answer); the cleanups
// they return run after the tests, before PostgreSQL stops, and one that
// fails fails the binary. A setup that fails ends the binary.
func Main(m *testing.M, setups ...func() (cleanup func() error, err error)) {
	mainInUse.Store(true)
	var cleanups []func() error
	code := 0
	for _, setup := range setups {
		cleanup, err := setup()
		if err != nil {
			fmt.Fprintf(os.Stderr, "testenv: setup: %v\n", err)
			code = 1
			break
		}
		cleanups = append(cleanups, cleanup)
	}
	if code == 0 {
		code = m.Run()
	}
	for _, c := range slices.Backward(cleanups) {
		if err := c(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			code = max(code, 1)
		}
	}
	if err := shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func shutdown() error {
	pgMu.Lock()
	defer pgMu.Unlock()
	if pgShared == nil || pgShared.stop == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := pgShared.stop(ctx)
	pgShared = nil
	return err
}

// Postgres returns the URL of a new, empty database that is dropped when
// the test ends. See the package documentation for which server it is on.
func Postgres(t testing.TB) string {
	t.Helper()
	url, drop, err := NewDatabase(context.Background())
	if err != nil {
		t.Fatalf("testenv.Postgres: %v", err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Logf("testenv: %v", err)
		}
	})
	return url
}

// NewDatabase is Postgres for code without a testing.TB (a setup of
// Main): the URL of a new, empty database and a function that drops it.
func NewDatabase(ctx context.Context) (url string, drop func() error, err error) {
	srv, err := sharedServer()
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	name := "test_" + randomHex(8)
	conn, err := pgx.Connect(ctx, srv.adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("connect to %s: %w", srv.source, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("CREATE DATABASE %s on %s: %w", name, srv.source, err)
	}
	dbURL, err := withDatabase(srv.adminURL, name)
	if err != nil {
		return "", nil, err
	}
	return dbURL, func() error { return dropDatabase(srv, name) }, nil
}

func dropDatabase(srv *pgServer, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, srv.adminURL)
	if err != nil {
		return fmt.Errorf("drop %s: %w", name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		// WITH (FORCE) needs PostgreSQL 13.
		if _, err2 := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name); err2 != nil {
			return fmt.Errorf("drop %s: %w", name, errors.Join(err, err2))
		}
	}
	return nil
}

// sharedServer finds or starts this test binary's server, once.
func sharedServer() (*pgServer, error) {
	pgMu.Lock()
	defer pgMu.Unlock()
	if pgShared != nil || pgErr != nil {
		return pgShared, pgErr
	}
	pgShared, pgErr = findServer()
	return pgShared, pgErr
}

func findServer() (*pgServer, error) {
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		return &pgServer{adminURL: u, source: "$" + EnvDatabaseURL}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, binErr := findBinDir(ctx, "")
	if binErr == nil {
		if !mainInUse.Load() {
			return nil, errNoMain
		}
		return startCluster(ctx)
	}
	if !errors.Is(binErr, pgcluster.ErrBinariesNotFound) {
		return nil, binErr
	}
	engineErr := containerEngine(ctx)
	if engineErr != nil {
		return nil, fmt.Errorf("no PostgreSQL available: $%s is unset; %v; and no container engine answers for testcontainers (%v). "+
			"Set %s, install the PostgreSQL server binaries (apt-get install postgresql), or start Docker/Podman",
			EnvDatabaseURL, binErr, engineErr, EnvDatabaseURL)
	}
	if !mainInUse.Load() {
		return nil, errNoMain
	}
	return startContainer(ctx)
}

// findBinDir is replaced by tests.
var findBinDir = pgcluster.FindBinDir

var errNoMain = errors.New("this package has no TestMain calling testenv.Main(m), which stops the PostgreSQL server testenv starts: add\n\tfunc TestMain(m *testing.M) { testenv.Main(m) }")

func startCluster(ctx context.Context) (*pgServer, error) {
	dir, err := os.MkdirTemp("", "ledger-testenv-pg-")
	if err != nil {
		return nil, err
	}
	// PostgreSQL may run as nobody (when tests run as root): let it in.
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var log bytes.Buffer
	c, err := pgcluster.Start(ctx,
		pgcluster.WithDataDir(filepath.Join(dir, "data")),
		pgcluster.WithFsync(false),
		pgcluster.WithLog(&log))
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start a private PostgreSQL cluster: %w\n%s", err, log.String())
	}
	return &pgServer{
		adminURL: c.URLFor("postgres"),
		source:   "private cluster in " + dir,
		stop: func(ctx context.Context) error {
			err := c.Stop(ctx)
			return errors.Join(err, os.RemoveAll(dir))
		},
	}, nil
}

// containerEngine reports whether testcontainers can reach an engine.
func containerEngine(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("testcontainers: %v", r)
		}
	}()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return err
	}
	defer p.Close()
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return p.Health(hctx)
}

func startContainer(ctx context.Context) (*pgServer, error) {
	ctr, err := tcpostgres.Run(ctx, ContainerImage,
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies())
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, fmt.Errorf("start %s with testcontainers: %w", ContainerImage, err)
	}
	u, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, err
	}
	return &pgServer{
		adminURL: u,
		source:   "container " + ContainerImage,
		stop: func(ctx context.Context) error {
			return testcontainers.TerminateContainer(ctr)
		},
	}, nil
}

// withDatabase returns u with its database (path) replaced by name.
func withDatabase(u, name string) (string, error) {
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "postgres" && parsed.Scheme != "postgresql") {
		return "", fmt.Errorf("$%s must be a postgres:// URL, got %q", EnvDatabaseURL, redact.Conn(u))
	}
	parsed.Path = "/" + name
	parsed.RawPath = ""
	return parsed.String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NATS starts an embedded nats-server with JetStream, its store in
// t.TempDir(), on a random port of 127.0.0.1, shut down when the test
// ends, and returns its URL. Like `ledger dev`, the server refuses
// anonymous connections: every role of internal/natsauth has a seed file
// (see Creds and Connect), and the LEDGER stream is created with the admin
// identity, the only one allowed to.
func NATS(t testing.TB) string {
	t.Helper()
	return StartNATS(t, t.TempDir(), "127.0.0.1:-1").URL()
}

// StartNATS is NATS with its store and seed files in dir and listening
// on listen: a later StartNATS on the same dir (a restart) keeps the
// stream and the identities. Tests may shut it down early.
func StartNATS(t testing.TB, dir, listen string, opts ...natsserver.Option) *natsserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := RunNATS(ctx, dir, listen, opts...)
	if err != nil {
		t.Fatalf("testenv.NATS: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// RunNATS is StartNATS for code without a testing.TB (a setup of Main):
// the caller shuts the server down. Creds and SeedFile name its
// identities' seed files.
func RunNATS(ctx context.Context, dir, listen string, opts ...natsserver.Option) (*natsserver.Server, error) {
	keys, err := natsauth.Init(filepath.Join(dir, "auth"))
	if err != nil {
		return nil, err
	}
	s, err := natsserver.Start(ctx, append([]natsserver.Option{
		natsserver.WithStoreDir(filepath.Join(dir, "store")),
		natsserver.WithListen(listen),
		natsserver.WithName("test"),
		natsserver.WithUsers(natsauth.Users(keys))}, opts...)...)
	if err != nil {
		return nil, err
	}
	credsMu.Lock()
	credsDirs[s.URL()] = filepath.Join(dir, "auth")
	credsMu.Unlock()
	// The stream, created as admin (the only identity allowed to).
	nc, err := natsauth.Connect(s.URL(), natsauth.SeedFile(filepath.Join(dir, "auth"), natsauth.Admin))
	if err == nil {
		defer nc.Close()
		var js jetstream.JetStream
		if js, err = jetstream.New(nc); err == nil {
			_, err = stream.Ensure(ctx, js)
		}
	}
	if err != nil {
		s.Shutdown()
		return nil, err
	}
	return s, nil
}

// SeedFile is the seed file of role on the server NATS, StartNATS or
// RunNATS started at url ("" when it is not one of theirs).
func SeedFile(url string, role natsauth.Role) string {
	credsMu.Lock()
	dir, ok := credsDirs[url]
	credsMu.Unlock()
	if !ok {
		return ""
	}
	return natsauth.SeedFile(dir, role)
}

// NATSCluster starts a JetStream cluster of n embedded servers on
// 127.0.0.1 (free ports, stores in t.TempDir(), routes authenticated with
// a route secret beside the seed files), shut down when the test ends, and
// creates the LEDGER stream with n replicas as admin. Every member knows
// the same identities: c.URL() (all members' URLs, comma-joined) works
// with Creds, Connect and JetStream. Tests may shut members down and
// restart them (c.Server(i).Shutdown(), c.Restart).
func NATSCluster(t testing.TB, n int, opts ...natsserver.Option) *natsserver.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	authDir := filepath.Join(dir, "auth")
	keys, err := natsauth.Init(authDir)
	if err != nil {
		t.Fatalf("testenv.NATSCluster: %v", err)
	}
	route, err := natsauth.InitRoute(authDir)
	if err != nil {
		t.Fatalf("testenv.NATSCluster: %v", err)
	}
	c, err := natsserver.StartCluster(ctx, natsserver.ClusterSpec{Name: "test", Size: n, Dir: filepath.Join(dir, "store")},
		// A member of a cluster waits for its routes; with every test
		// package running at once on two cores that can take longer than
		// the default 10 s (the context bounds it at 30 s).
		append([]natsserver.Option{natsserver.WithUsers(natsauth.Users(keys)),
			natsserver.WithRouteAuth(route.User, route.Password), natsserver.WithReadyTimeout(25 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("testenv.NATSCluster: %v", err)
	}
	t.Cleanup(c.Shutdown)
	credsMu.Lock()
	credsDirs[c.URL()] = authDir
	for _, u := range c.URLs() {
		credsDirs[u] = authDir
	}
	credsMu.Unlock()
	js, err := jetstream.New(Connect(t, c.URL(), natsauth.Admin))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Setup(ctx, js, stream.Settings{Replicas: n, Servers: n}); err != nil {
		t.Fatalf("testenv.NATSCluster: %v", err)
	}
	return c
}

var (
	credsMu   sync.Mutex
	credsDirs = map[string]string{} // NATS URL -> directory of its seed files
)

// Creds is the seed file of role on the server NATS started at url.
func Creds(t testing.TB, url string, role natsauth.Role) string {
	t.Helper()
	credsMu.Lock()
	dir, ok := credsDirs[url]
	credsMu.Unlock()
	if !ok {
		t.Fatalf("testenv.Creds: %s was not started by testenv.NATS", url)
	}
	return natsauth.SeedFile(dir, role)
}

// Connect connects to the server at url as role (reconnecting while the
// test lasts, as services do); the connection closes when the test ends.
func Connect(t testing.TB, url string, role natsauth.Role) *nats.Conn {
	t.Helper()
	nc, err := natsauth.Connect(url, Creds(t, url, role), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("testenv: connect to NATS as %s: %v", role, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream connects to the NATS server at url as admin (tests publish
// raw events and inspect the stream) and returns its JetStream with the
// LEDGER stream in place.
func JetStream(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(Connect(t, url, natsauth.Admin))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Ensure(context.Background(), js); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return js
}

// AdminToken returns a new bearer token with every scope on every pool,
// and the token set that accepts it (for api.WithTokens).
func AdminToken(t testing.TB) (string, *auth.Tokens) {
	t.Helper()
	return Token(t, "admin", auth.Scopes, auth.AllPools)
}

// Token returns a new bearer token named name with scopes on pools, and
// the token set that accepts it.
func Token(t testing.TB, name string, scopes []auth.Scope, pools ...string) (string, *auth.Tokens) {
	t.Helper()
	token, e, err := auth.Generate(name, scopes, pools)
	if err != nil {
		t.Fatalf("testenv.Token: %v", err)
	}
	set, err := auth.New(e)
	if err != nil {
		t.Fatalf("testenv.Token: %v", err)
	}
	return token, set
}

// Authorized wraps an API handler so that a request without an
// Authorization header carries token: tests written against plain URLs
// (http.Get, a browser) reach an API that demands tokens.
func Authorized(h http.Handler, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		h.ServeHTTP(w, r)
	})
}

// As returns a JetStream on the server js is connected to, with the
// identity of role: a test publishes and inspects as admin and runs each
// part (the projector, the API, an auditor's tool) as the identity it
// holds in production, so a right missing there fails the test.
func As(t testing.TB, js jetstream.JetStream, role natsauth.Role) jetstream.JetStream {
	t.Helper()
	// The server it is connected to, or (while it reconnects: a test may
	// have restarted the server) the ones it was given.
	nc := js.Conn()
	candidates := append([]string{nc.ConnectedUrl(), nc.Opts.Url}, nc.Opts.Servers...)
	credsMu.Lock()
	url, ok := "", false
	for _, c := range candidates {
		if _, exact := credsDirs[c]; exact && c != "" {
			url, ok = c, true
			break
		}
	}
	// A cluster's member by the cluster's URL. Only after the exact
	// look-up: the URLs of a cluster a test shut down stay here, and a
	// server started later on one of its ports would otherwise be given
	// the credentials of that cluster, whose files are gone.
	for _, c := range candidates {
		if ok || c == "" {
			break
		}
		for u := range credsDirs {
			if strings.Contains(","+u+",", ","+c+",") {
				url, ok = u, true
				break
			}
		}
	}
	credsMu.Unlock()
	if !ok {
		t.Fatalf("testenv.As: %v was not started by testenv", candidates)
	}
	out, err := jetstream.New(Connect(t, url, role))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// DataDir returns the path of a data directory for `ledger dev --data`
// (or a pgcluster data directory), not created yet, inside a new
// directory that every user may enter (under os.TempDir(), mode 0755),
// removed when the test ends. When the tests run as root PostgreSQL runs
// as its own system user, which must reach its data: t.TempDir() is no
// place for it (its parent is 0700), and neither ledger nor pgcluster
// changes the modes of directories above their data.
func DataDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ledger-data-")
	if err != nil {
		t.Fatalf("testenv.DataDir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("testenv.DataDir: %v", err)
	}
	return filepath.Join(dir, "data")
}

// StreamState is the ledger stream's state (messages, first and last
// sequence) as js sees it.
func StreamState(t testing.TB, js jetstream.JetStream) jetstream.StreamState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

// StreamLast is the ledger stream's last sequence (0: empty): where a
// test waits for a projector, or checks that nothing was appended.
func StreamLast(t testing.TB, js jetstream.JetStream) uint64 {
	t.Helper()
	return StreamState(t, js).LastSeq
}
