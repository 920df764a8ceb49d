package console_test

import (
	"context"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/contract"
	"github.com/cluster-ledger/ledger/internal/metrics"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/projections"
)

func TestMain(m *testing.M) { testenv.Main(m, contract.InstallDefault) }

// service is the whole ledger of a test: embedded NATS, a fresh migrated
// database, a projector running, and the API (console included) over
// HTTP.
type service struct {
	shutdown func() // ends the live streams, as the HTTP server's shutdown does
	url      string
	db       *pgxpool.Pool
	js       jetstream.JetStream // admin: the tests publish raw events and inspect the stream
	c        *client.Client
	// readToken has the read scope on pool "p" only: what a person
	// looking at the console holds.
	readToken string
}

func newService(t *testing.T, opts ...api.Option) *service {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	natsURL := testenv.NATS(t)
	js := testenv.JetStream(t, natsURL)
	// The projector and the API run with their own identities, NATS and
	// PostgreSQL, as `ledger dev` and production run them.
	projJS, err := jetstream.New(testenv.Connect(t, natsURL, natsauth.Projector))
	if err != nil {
		t.Fatal(err)
	}
	ledgerJS, err := jetstream.New(testenv.Connect(t, natsURL, natsauth.Ledger))
	if err != nil {
		t.Fatal(err)
	}
	roles := testdb.New(t)
	db, pdb := testdb.Pool(t, roles.API), testdb.Pool(t, roles.Projector)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- projections.New(projJS, pdb, projections.WithLogger(quiet)).Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	// The events' claimed producer is console-test: the token's name.
	token, all, err := auth.Generate("console-test", auth.Scopes, []string{auth.AllPools})
	if err != nil {
		t.Fatal(err)
	}
	readToken, read, err := auth.Generate("viewer", []auth.Scope{auth.ScopeRead}, []string{"p"})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.New(all, read)
	if err != nil {
		t.Fatal(err)
	}
	// With a metrics registry, as `ledger serve` and `ledger dev` run it:
	// its middleware wraps every ResponseWriter (the live stream must
	// still flush through it).
	srv, err := api.New(ctx, ledgerJS, db, append([]api.Option{api.WithTokens(tokens), api.WithMetrics(metrics.New())}, append(opts, api.WithLogger(quiet))...)...)
	if err != nil {
		t.Fatal(err)
	}
	// Every answer, the browser's included, is checked against the API's
	// contract.
	hs := httptest.NewUnstartedServer(contract.ForTest(t).Handler(testenv.Authorized(srv, token)))
	hs.Config.RegisterOnShutdown(srv.Shutdown)
	hs.Start()
	t.Cleanup(func() { srv.Shutdown(); hs.Close() })
	return &service{shutdown: srv.Shutdown, url: hs.URL, db: db, js: js, c: client.New(hs.URL), readToken: readToken}
}

// send appends events one by one and returns the sequence of each.
func (s *service) send(t *testing.T, pool string, ps ...events.Payload) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var seqs []uint64
	for _, p := range ps {
		ev, err := client.NewEvent(p)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.c.Append(ctx, pool, ev)
		if err != nil {
			t.Fatalf("append %T: %v", p, err)
		}
		seqs = append(seqs, res[0].Seq)
	}
	return seqs
}

// waitProjected waits until the projector has applied seq of pool.
func (s *service) waitProjected(t *testing.T, pool string, seq uint64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var last int64
		err := s.db.QueryRow(context.Background(), `SELECT coalesce(max(last_seq), 0) FROM checkpoints WHERE pool = $1`, pool).Scan(&last)
		if err != nil {
			t.Fatal(err)
		}
		if uint64(last) >= seq {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("projector did not apply seq %d of %s (at %d)", seq, pool, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requireToken is a stand-in for the API's read-scope check: the
// console's data endpoints must go through the hook it is plugged into.
func requireToken(tok string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+tok {
				// Answered as the API answers it (its contract).
				w.Header().Set("WWW-Authenticate", `Bearer realm="ledger"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"error":"missing or wrong bearer token","reason":"unauthenticated"}`)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// browser starts headless Chromium (Debian's chromium; `make test`
// installs it where it is missing) with a fresh profile.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed: `make test` installs it (apt-get install -y chromium): %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// The page's exceptions and console messages go to the test log.
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		switch ev := ev.(type) {
		case *cdpruntime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			t.Logf("page exception at %s:%d: %s", d.URL, d.LineNumber+1, msg)
		case *cdpruntime.EventConsoleAPICalled:
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			t.Logf("page console.%s: %s", ev.Type, strings.Join(args, " "))
		}
	}))
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // start the browser now
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// run runs browser actions with a timeout.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx0 := ctx
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		screenshot(t, ctx0, "failed-"+nonToken.ReplaceAllString(t.Name()+"-"+what, "_"))
		t.Fatalf("%s: %v", what, err)
	}
}

// waitText waits until the element of sel shows want.
func waitText(sel, want string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](`(() => { const e = document.querySelector(`+jsString(sel)+`); return !!e && e.textContent.trim() === `+jsString(want)+`; })()`,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))
}

func jsString(s string) string {
	b := []byte{'"'}
	for _, r := range s {
		switch r {
		case '"', '\\':
			b = append(b, '\\', byte(r))
		default:
			b = append(b, string(r)...)
		}
	}
	return string(append(b, '"'))
}

// artifacts is where screenshots go: $TEST_ARTIFACTS/console, or
// test/artifacts/console in the repository (gitignored).
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "test", "artifacts")
	}
	dir = filepath.Join(dir, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot saves the page as name.png among the artifacts.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(artifacts(t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
}
