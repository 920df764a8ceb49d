package testservice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/contract"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/migrations"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
)

// The roles of the service's tokens, each named after its role (the
// producer the ledger records is the token's name).
const (
	Producer = "producer" // append: demand and release
	Planner  = "planner"  // plan: plan, host_up, host_down
	Reader   = "reader"   // read: allocations, decisions, what-if, the console
)

// Config is what differs between tests.
type Config struct {
	// Pools the role tokens cover (default: every pool).
	Pools []string
	// SnapshotEvery is the projector's snapshot interval (default the
	// projector's).
	SnapshotEvery int
	// Options are given to the API after the service's own.
	Options []api.Option
	// Signer is the key the API signs with and the projector trusts
	// (nil: one generated for the service), for tests that write signed
	// events around the API.
	Signer *signing.Signer
}

// Service is a running ledger.
type Service struct {
	// URL is the API's address (http://127.0.0.1:PORT).
	URL string
	// NATSURL is the NATS server's; testenv.SeedFile names its identities.
	NATSURL string
	// DB is the projection's database (as its owner: tests look).
	DB *pgxpool.Pool
	// JS is the log, as the admin identity (tests look at what it holds;
	// nothing of the service uses it).
	JS jetstream.JetStream

	tokens   map[string]string
	closers  []func()
	contract *contract.Checker
}

// Start starts a service that stops when the test ends.
func Start(t testing.TB, cfg Config) *Service {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := New(ctx, t.TempDir(), cfg)
	if err != nil {
		t.Fatalf("testservice: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// New starts a service with its NATS store in dir; Close stops it.
func New(ctx context.Context, dir string, cfg Config) (s *Service, err error) {
	c, err := contract.New()
	if err != nil {
		return nil, err
	}
	s = &Service{tokens: map[string]string{}, contract: c}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	ns, err := testenv.RunNATS(ctx, dir, "127.0.0.1:-1")
	if err != nil {
		return nil, err
	}
	s.NATSURL = ns.URL()
	s.closers = append(s.closers, ns.Shutdown)
	dbURL, drop, err := testenv.NewDatabase(ctx)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { _ = drop() })
	if err := migrations.Up(ctx, dbURL); err != nil {
		return nil, err
	}
	if s.DB, err = pgxpool.New(ctx, dbURL); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.DB.Close)
	if s.JS, err = s.connect(natsauth.Admin); err != nil {
		return nil, err
	}
	signer := cfg.Signer
	if signer == nil {
		signer = signing.Generate()
	}
	trusted := signing.NewKeyring(signer.Public())
	if err := s.startProjector(cfg, trusted); err != nil {
		return nil, err
	}
	return s, s.startAPI(ctx, cfg, signer, trusted)
}

// connect returns the JetStream of a connection as role, closed with the
// service.
func (s *Service) connect(role natsauth.Role) (jetstream.JetStream, error) {
	nc, err := natsauth.Connect(s.NATSURL, testenv.SeedFile(s.NATSURL, role), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, nc.Close)
	return jetstream.New(nc)
}

func (s *Service) startProjector(cfg Config, trusted *signing.Keyring) error {
	js, err := s.connect(natsauth.Projector)
	if err != nil {
		return err
	}
	opts := []projections.Option{projections.WithLogger(quiet()), projections.WithTrustedKeys(trusted)}
	if cfg.SnapshotEvery > 0 {
		opts = append(opts, projections.WithSnapshotEvery(cfg.SnapshotEvery))
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- projections.New(js, s.DB, opts...).Run(ctx) }()
	s.closers = append(s.closers, func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(os.Stderr, "testservice: the projector stopped: %v\n", err)
		}
	})
	return nil
}

func (s *Service) startAPI(ctx context.Context, cfg Config, signer *signing.Signer, trusted *signing.Keyring) error {
	pools := cfg.Pools
	if len(pools) == 0 {
		pools = []string{auth.AllPools}
	}
	var entries []auth.Entry
	for _, role := range []struct {
		name  string
		scope auth.Scope
	}{{Producer, auth.ScopeAppend}, {Planner, auth.ScopePlan}, {Reader, auth.ScopeRead}} {
		token, e, err := auth.Generate(role.name, []auth.Scope{role.scope}, pools)
		if err != nil {
			return err
		}
		s.tokens[role.name] = token
		entries = append(entries, e)
	}
	tokens, err := auth.New(entries...)
	if err != nil {
		return err
	}
	js, err := s.connect(natsauth.Ledger)
	if err != nil {
		return err
	}
	srv, err := api.New(ctx, js, s.DB, append([]api.Option{api.WithTokens(tokens), api.WithSigner(signer),
		api.WithTrustedKeys(trusted), api.WithLogger(quiet())}, cfg.Options...)...)
	if err != nil {
		return err
	}
	hs := httptest.NewUnstartedServer(s.contract.Handler(srv))
	hs.Config.RegisterOnShutdown(srv.Shutdown)
	hs.Start()
	s.URL = hs.URL
	s.closers = append(s.closers, func() { srv.Shutdown(); hs.Close() })
	return nil
}

// Close stops everything, in the reverse order of starting, and returns
// the answers that broke the API's contract (nil when none did).
func (s *Service) Close() error {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
	return s.contract.Err()
}

// Checked is how many answers of the API were checked against its
// contract.
func (s *Service) Checked() int { return s.contract.Checked() }

// Token is the bearer token of role (Producer, Planner, Reader).
func (s *Service) Token(role string) string {
	t, ok := s.tokens[role]
	if !ok {
		panic("testservice: no token of role " + role)
	}
	return t
}

// Client is a client of the API holding role's token.
func (s *Service) Client(role string) *client.Client {
	return client.New(s.URL, client.WithToken(s.Token(role)), client.WithRetryWait(50*time.Millisecond))
}

// LastSeq is the stream's last sequence.
func (s *Service) LastSeq(ctx context.Context) (uint64, error) {
	st, err := s.JS.Stream(ctx, stream.Name)
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// WaitProjected waits until the projector has applied pool's event at seq.
func (s *Service) WaitProjected(ctx context.Context, pool string, seq uint64) error {
	for {
		got, err := query.ProjectedSeq(ctx, s.DB, pool)
		if err != nil {
			return err
		}
		if got >= seq {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pool %s is projected up to %d, not %d: %w", pool, got, seq, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
