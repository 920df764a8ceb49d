package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/migrations"
	"github.com/cluster-ledger/ledger/projections"
)

// service is a ledger API (httptest) and a projector on fresh NATS and
// PostgreSQL, in this process, each with its production identities.
type service struct {
	ledgerURL, natsURL string
	dbURL              string // the reporting role's, as `ledger dev` prints it
	adminURL           string // PostgreSQL's superuser: tests that stage a state
	roles              testdb.DB
	trustedKeys        string // file of the public key the ledger signs with
	token              string // admin: every scope, every pool
}

func startService(t *testing.T) service {
	t.Helper()
	return startServiceWith(t, false)
}

// startServiceWith is startService; development gives the API and the
// projector the rules version in development, as ledger dev
// --rules-development does.
func startServiceWith(t *testing.T, development bool) service {
	t.Helper()
	return startServiceCfg(t, serviceCfg{development: development})
}

// serviceCfg is how startServiceCfg differs from startService.
type serviceCfg struct {
	development bool
	// projectorTrusts replaces the key the projector trusts (default: the
	// one the API signs with): a projector misconfigured so.
	projectorTrusts *signing.Keyring
}

func startServiceCfg(t *testing.T, cfg serviceCfg) service {
	t.Helper()
	development := cfg.development
	var apiOpts []api.Option
	var projOpts []projections.Option
	if development {
		apiOpts, projOpts = []api.Option{api.WithDevelopmentRules()}, []projections.Option{projections.WithDevelopmentRules()}
	}
	ctx, cancel := context.WithCancel(context.Background())
	natsURL, roles := testenv.NATS(t), testdb.New(t)
	nc := testenv.Connect(t, natsURL, natsauth.Ledger)
	js, _ := jetstream.New(nc)
	db, err := pgxpool.New(ctx, roles.API)
	if err != nil {
		t.Fatal(err)
	}
	pdb, err := pgxpool.New(ctx, roles.Projector)
	if err != nil {
		t.Fatal(err)
	}
	// As in ledger dev: the ledger signs, and its views of the pools and
	// the projector (with its own identity) trust only that key.
	signer := signing.Generate()
	token, tokens := testenv.AdminToken(t)
	srv, err := api.New(ctx, js, db, append(apiOpts, api.WithTokens(tokens), api.WithSigner(signer), api.WithTrustedKeys(signing.NewKeyring(signer.Public())))...)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	pjs, _ := jetstream.New(testenv.Connect(t, natsURL, natsauth.Projector))
	var wg sync.WaitGroup
	wg.Go(func() {
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		keys := signing.NewKeyring(signer.Public())
		if cfg.projectorTrusts != nil {
			keys = cfg.projectorTrusts
		}
		if err := projections.New(pjs, pdb, append(projOpts, projections.WithLogger(quiet), projections.WithTrustedKeys(keys))...).Run(ctx); err != nil {
			t.Errorf("projector: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		hs.Close()
		db.Close()
		pdb.Close()
		nc.Close()
	})
	trusted := filepath.Join(t.TempDir(), "trusted.pub")
	if err := os.WriteFile(trusted, signing.PublicPEM(signer.Public()), 0o644); err != nil {
		t.Fatal(err)
	}
	return service{ledgerURL: hs.URL, natsURL: natsURL, dbURL: roles.Reporting, adminURL: roles.Admin, roles: roles, trustedKeys: trusted, token: token}
}

// runLedger runs the ledger command line with args and stdin, its flags
// reset first (cobra keeps the values of a previous run).
func runLedger(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd, _, ferr := root.Find(args)
	if ferr != nil {
		t.Fatal(ferr)
	}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		_ = f.Value.Set(f.DefValue)
		f.Changed = false
	})
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	defer func() { root.SetArgs(nil); root.SetIn(nil); root.SetOut(nil); root.SetErr(nil) }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd.SetContext(ctx) // cobra keeps a subcommand's first context otherwise
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func exitCode(err error) int {
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return 1
	}
	return 0
}

func TestPublish(t *testing.T) {
	svc := startService(t)
	_, errOut, err := runLedger(t, "", "publish", "--ledger-url="+svc.ledgerURL, "--pool", "p", "--type", "plan",
		"--data", `{"plan":{"consumers":[{"path":"/A"}]}}`)
	if exitCode(err) != 1 || !strings.Contains(errOut, "401 unauthenticated") || !strings.Contains(errOut, "LEDGER_TOKEN") {
		t.Errorf("publish without a token: exit %d, %q", exitCode(err), errOut)
	}
	url, tok := "--ledger-url="+svc.ledgerURL, "--ledger-token="+svc.token
	out, _, err := runLedger(t, "", "publish", url, tok, "--pool", "p", "--type", "plan", "--id", "plan-1",
		"--data", `{"plan":{"consumers":[{"path":"/A"},{"path":"/B"}]}}`)
	if err != nil || out != "1\tplan-1\n" {
		t.Fatalf("publish plan: %q, %v", out, err)
	}
	batch := `[{"type":"host_up","data":{"host":"h1","slots":4}}, {"id":"d1","type":"demand","data":{"demands":{"/A":2}}}]`
	out, _, err = runLedger(t, batch, "publish", url, tok, "--pool", "p", "--file", "-")
	if err != nil || !strings.HasPrefix(out, "2\t") || !strings.HasSuffix(out, "3\td1\n") {
		t.Fatalf("publish array from stdin: %q, %v", out, err)
	}
	file := filepath.Join(t.TempDir(), "ev.json")
	os.WriteFile(file, []byte(`{"id":"d1","type":"demand","data":{"demands":{"/A":2}}}`), 0o644)
	out, _, err = runLedger(t, "", "publish", url, tok, "--pool", "p", "--file", file)
	if err != nil || out != "3\td1\tduplicate\n" {
		t.Errorf("publish a retried event: %q, %v", out, err)
	}
	out, errOut, err = runLedger(t, "", "publish", url, tok, "--pool", "p", "--type", "release", "--data", `{"consumer":"/A","slots":3}`)
	if exitCode(err) != 1 || out != "" || !strings.Contains(errOut, "release_too_many") {
		t.Errorf("refused publish: exit %d, out %q, err %q", exitCode(err), out, errOut)
	}
	_, _, err = runLedger(t, "", "publish", url, tok, "--pool", "p", "--type", "demand", "--data", `{"demands":`)
	if err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("bad --data: %v", err)
	}
}

// publish fails at once, saying so, when nothing listens at the URL.
func TestPublishFailsFast(t *testing.T) {
	addr := freePort(t) // closed again: connections are refused
	start := time.Now()
	_, _, err := runLedger(t, "", "publish", "--ledger-url", "http://"+addr, "--ledger-token", "x", "--pool", "p",
		"--type", "demand", "--data", `{"demands":{"/a":1}}`)
	if took := time.Since(start); err == nil || !strings.Contains(err.Error(), "no ledger listening") || took > 5*time.Second {
		t.Errorf("publish to a closed port: %v after %v", err, took)
	}
}

// publish and load fail at once, saying why, when --ledger-url is not an
// http:// URL (the scheme left out) or the token carries a line end:
// nothing can be sent, so there is nothing to retry until --timeout.
func TestPublishMisconfiguredFailsFast(t *testing.T) {
	svc := startService(t)
	hostPort := strings.TrimPrefix(svc.ledgerURL, "http://")
	seed, _ := filepath.Glob("../../test/scenarios/seed/*.yaml")
	for _, tc := range []struct{ name, url, token, says string }{
		{"no scheme", hostPort, svc.token, "is not an http:// or https:// URL"},
		{"CRLF token", svc.ledgerURL, svc.token + "\r\n", "control character"},
	} {
		for _, args := range [][]string{
			{"publish", "--pool", "p", "--type", "demand", "--data", `{"demands":{"/a":1}}`},
			{"load", "--fresh-pool", seed[0]},
		} {
			start := time.Now()
			out, errOut, err := runLedger(t, "", append(args, "--ledger-url", tc.url, "--ledger-token", tc.token)...)
			took := time.Since(start)
			all := out + errOut
			if err != nil {
				all += err.Error()
			}
			if err == nil || !strings.Contains(all, tc.says) || took > 5*time.Second {
				t.Errorf("%s %s: %v after %v\n%s", tc.name, args[0], err, took, all)
			}
			if strings.Contains(all, svc.token) {
				t.Errorf("%s %s shows the token", tc.name, args[0])
			}
		}
	}
}

// dev and serve refuse a flag out of its range, naming it, before they
// create or start anything, rather than take it as "no limit" or the
// default without a word (a negative --token-rate turned the per-token
// rate limit off).
func TestServerFlagsOutOfRangeRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--token-rate", "-1"}, {"--token-burst", "-1"}, {"--token-concurrency", "-1"}, {"--token-streams", "-3"},
		{"--token-conns", "-1"}, {"--max-conns", "-5"}, {"--max-unauthenticated-conns", "-1"},
	} {
		for _, cmd := range []string{"dev", "serve"} {
			data := filepath.Join(t.TempDir(), "data")
			full := []string{cmd}
			if cmd == "dev" {
				full = append(full, "--data", data, "--http", "127.0.0.1:0", "--nats", "127.0.0.1:0")
			} else {
				full = append(full, "--tokens", filepath.Join(t.TempDir(), "none.jsonl"), "--nats-url", "nats://127.0.0.1:1")
			}
			start := time.Now()
			_, _, err := runLedger(t, "", append(full, args...)...)
			if err == nil || !strings.Contains(err.Error(), args[0]) || time.Since(start) > 2*time.Second {
				t.Errorf("%s %v: %v after %v, want an error naming %s at once", cmd, args, err, time.Since(start), args[0])
			}
			if _, serr := os.Stat(data); cmd == "dev" && serr == nil {
				t.Errorf("dev %v created its data directory before refusing", args)
			}
		}
	}
	for _, args := range [][]string{{"--snapshot-every", "0"}, {"--snapshot-every", "-1"}, {"--duplicate-window", "0s"}, {"--duplicate-window", "-1s"}, {"--replicas", "-1"},
		// Found only once PostgreSQL and NATS were made and started.
		{"--http", "127.0.0.1:99999"}, {"--http", "localhost"}, {"--nats", "127.0.0.1:65535", "--nats-cluster", "3"}} {
		data := filepath.Join(t.TempDir(), "data")
		_, _, err := runLedger(t, "", append([]string{"dev", "--data", data, "--http", "127.0.0.1:0", "--nats", "127.0.0.1:0"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("dev %v: %v, want an error naming %s", args, err, args[0])
		}
		if _, serr := os.Stat(data); serr == nil {
			t.Errorf("dev %v created its data directory before refusing", args)
		}
	}
	// nats setup answered "stream LEDGER ready (duplicate window -1s)"
	// and left the window as it was.
	for _, args := range [][]string{{"--duplicate-window", "-1s"}, {"--duplicate-window", "0s"}, {"--replicas", "0"},
		{"--partitions", "0"}, {"--partitions", "-3"}, {"--partitions", "257"}} { // --partitions 0 made a stream of 48
		_, _, err := runLedger(t, "", append([]string{"nats", "setup", "--nats-url", "nats://127.0.0.1:1"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("nats setup %v: %v, want an error naming %s", args, err, args[0])
		}
	}
	for _, args := range [][]string{{"--read-timeout", "0s"}, {"--connect-timeout", "-1s"}} {
		_, _, err := runLedger(t, "", append([]string{"serve", "--tokens", filepath.Join(t.TempDir(), "none.jsonl"), "--nats-url", "nats://127.0.0.1:1"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("serve %v: %v, want an error naming %s", args, err, args[0])
		}
	}
}

func TestLoadCheck(t *testing.T) {
	svc := startService(t)
	files, _ := filepath.Glob("../../test/scenarios/*/*.yaml")
	own, _ := filepath.Glob("../../internal/scenario/testdata/ownership/*.yaml") // the spec's worked example among them
	format, _ := filepath.Glob("../../internal/scenario/testdata/format/*.yaml") // rule and deadline expectations
	files = append(append(files, own...), format...)
	if len(files) < 10 || len(own) == 0 {
		t.Fatalf("only %d scenario files found", len(files))
	}
	args := append([]string{"load", "--fresh-pool", "--check", "--url", svc.ledgerURL, "--ledger-token", svc.token, "--database-url", svc.dbURL}, files...)
	out, errOut, err := runLedger(t, "", args...)
	if err != nil {
		t.Fatalf("load --check: %v\n%s\n%s", err, out, errOut)
	}
	if want := fmt.Sprintf("%d scenarios: %d passed, 0 failed", len(files), len(files)); !strings.Contains(out, want) {
		t.Errorf("load --check output lacks %q:\n%s", want, out)
	}

	// Loading into the scenario's own pool twice: the second run starts
	// from the first run's state, and the setup is refused (host already up).
	seed, _ := filepath.Glob("../../test/scenarios/seed/*.yaml")
	if _, _, err := runLedger(t, "", "load", "--url", svc.ledgerURL, "--ledger-token", svc.token, seed[0]); err != nil {
		t.Fatalf("load without check: %v", err)
	}
	out, _, err = runLedger(t, "", "load", "--check", "--url", svc.ledgerURL, "--ledger-token", svc.token, "--database-url", svc.dbURL, seed[0])
	if exitCode(err) != 1 || !strings.Contains(out, "FAIL setup event") {
		t.Errorf("second load into the same pool: exit %d\n%s", exitCode(err), out)
	}
}

// TestLoadCheckRulesDevelopment: the hand-worked scenarios of the rules
// version in development pass through a service started with its switch
// (as ledger dev --rules-development starts it), checked against
// PostgreSQL: every d-* file (priority bands, non-preemptable consumers,
// zero shares, refusals) and every r* file naming rules 3; and a service
// without the switch refuses a plan naming rules 4 at append.
func TestLoadCheckRulesDevelopment(t *testing.T) {
	svc := startServiceWith(t, true)
	files, _ := filepath.Glob("../../test/development/v4/d-*.yaml")
	for _, r := range []string{"r02", "r03", "r05", "r06", "r08"} { // part A's clarifications, rules 3
		more, _ := filepath.Glob("../../test/development/v4/" + r + "-*.yaml")
		files = append(files, more...)
	}
	if len(files) != 22 {
		t.Fatalf("%d scenario files found, want the 17 d-* and 5 r* of rules 3", len(files))
	}
	args := append([]string{"load", "--fresh-pool", "--check", "--url", svc.ledgerURL, "--ledger-token", svc.token, "--database-url", svc.dbURL}, files...)
	out, errOut, err := runLedger(t, "", args...)
	if err != nil {
		t.Fatalf("load --check: %v\n%s\n%s", err, out, errOut)
	}
	if want := fmt.Sprintf("%d scenarios: %d passed, 0 failed", len(files), len(files)); !strings.Contains(out, want) {
		t.Errorf("load --check output lacks %q:\n%s", want, out)
	}

	// Without the switch a plan naming rules 4 is refused as an unknown
	// version, whatever it names (decisions.md #261).
	prod := startService(t)
	for _, file := range []string{"d-refusals-rules4.yaml", "d-pin-1-leaf-under-preemptable-parent.yaml"} {
		out, _, err = runLedger(t, "", "load", "--fresh-pool", "--check", "--url", prod.ledgerURL, "--ledger-token", prod.token, "--database-url", prod.dbURL, "../../test/development/v4/"+file)
		if exitCode(err) != 1 || !strings.Contains(out, "FAIL setup event 1 refused: 400 unknown_rules_version") {
			t.Errorf("%s through a service without the switch: exit %d, want the plan refused as an unknown version\n%s", file, exitCode(err), out)
		}
	}
}

func TestLoadReportsMismatch(t *testing.T) {
	svc := startService(t)
	file := filepath.Join(t.TempDir(), "wrong.yaml")
	os.WriteFile(file, []byte(`name: wrong expectation
pool: w
plan:
  consumers:
    - {path: /A}
    - {path: /B}
hosts:
  - {name: h1, slots: 4}
steps:
  - name: A asks
    events:
      - {type: demand, demands: {/A: 3}}
      - {type: release, consumer: /B, slots: 1}
    expect:
      allocations: {/A: 2}
      decisions:
        - {kind: grant, consumer: /A, slots: 3}
      rejected: 1
`), 0o644)
	out, _, err := runLedger(t, "", "load", "--check", "--url", svc.ledgerURL, "--ledger-token", svc.token, "--database-url", svc.dbURL, file)
	if exitCode(err) != 1 || !strings.Contains(out, "FAIL step 1: A asks") || !strings.Contains(out, "allocation /A: want 2, got 3") {
		t.Errorf("exit %d, output:\n%s", exitCode(err), out)
	}
	if strings.Contains(out, "decisions") || strings.Contains(out, "rejected") {
		t.Errorf("decisions and rejected count match, but are reported:\n%s", out)
	}
}

func TestLoadTimesOutWithoutProjector(t *testing.T) {
	ctx := context.Background()
	natsURL, dbURL := testenv.NATS(t), testdb.New(t).Reporting
	js, _ := jetstream.New(testenv.Connect(t, natsURL, natsauth.Ledger))
	token, tokens := testenv.AdminToken(t)
	srv, err := api.New(ctx, js, nil, api.WithTokens(tokens))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	seed, _ := filepath.Glob("../../test/scenarios/seed/*.yaml")
	out, _, err := runLedger(t, "", "load", "--check", "--timeout", "300ms", "--url", hs.URL, "--ledger-token", token, "--database-url", dbURL, seed[0])
	if exitCode(err) != 1 || !strings.Contains(out, "waiting for the projector: pool ") {
		t.Errorf("exit %d, output:\n%s", exitCode(err), out)
	}
}

func TestMigrate(t *testing.T) {
	roles := testdb.Empty(t)
	dbURL := roles.Owner
	if _, _, err := runLedger(t, "", "migrate", "--database-url", roles.API); err == nil {
		t.Error("the API's role migrated an empty database")
	}
	for range 2 {
		out, _, err := runLedger(t, "", "migrate", "--database-url", dbURL)
		if want, _ := migrations.Latest(); err != nil || out != fmt.Sprintf("schema version %d\n", want) {
			t.Errorf("migrate: %q, %v", out, err)
		}
	}
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// `ledger serve` migrates, serves, and stops cleanly when its context ends
// (as on SIGINT).
func TestServe(t *testing.T) {
	natsURL, dbURL := testenv.NATS(t), testdb.New(t).API // its production role: migrating at start checks the version
	addr := freePort(t)
	tokensFile := filepath.Join(t.TempDir(), "tokens.jsonl")
	out, _, err := runLedger(t, "", "token", "add", "--file", tokensFile, "--name", "ops", "--scopes", "all", "--pools", "*")
	token, ok := strings.CutPrefix(strings.TrimSpace(out), "LEDGER_TOKEN=")
	if err != nil || !ok {
		t.Fatalf("token add: %q %v", out, err)
	}
	if b, _ := os.ReadFile(tokensFile); strings.Contains(string(b), token) {
		t.Errorf("the tokens file holds the token itself:\n%s", b)
	}
	if _, _, err := runLedger(t, "", "serve", "--http", addr, "--nats-url", natsURL, "--database-url", dbURL); err == nil || !strings.Contains(err.Error(), "--tokens") {
		t.Errorf("serve without --tokens: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keyDir := t.TempDir()
	signer, err := signing.Init(keyDir)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--http", addr, "--nats-url", natsURL, "--nats-creds", testenv.Creds(t, natsURL, natsauth.Ledger), "--database-url", dbURL, "--tokens", tokensFile,
		"--signing-key", filepath.Join(keyDir, signing.PrivateKeyFile)}
	if cmd, _, err := root.Find(args); err == nil {
		cmd.SetContext(ctx) // cobra keeps a subcommand's first context otherwise
	}
	root.SetArgs(args)
	var logs bytes.Buffer
	root.SetErr(&logs)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	defer func() { root.SetArgs(nil); root.SetErr(nil) }()

	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never became healthy: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	do := func(method, path, body string) int {
		rq, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		rq.Header.Set("Authorization", "Bearer "+token)
		rq.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := do(http.MethodPost, "/v1/pools/s/events", `{"type":"host_up","data":{"host":"h1","slots":2}}`); code != 200 {
		t.Fatalf("append through serve: %d", code)
	}
	if code := do(http.MethodGet, "/v1/pools/s/allocations", ""); code != 200 {
		t.Fatalf("allocations through serve (migrated schema): %d", code)
	}
	// --signing-key signs what serve appends.
	st, err := testenv.JetStream(t, natsURL).Stream(context.Background(), stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.GetLastMsgForSubject(context.Background(), "ledger.s.>")
	if err != nil {
		t.Fatal(err)
	}
	if got := msg.Header.Get(signing.HeaderKeyID); got != signer.ID() {
		t.Errorf("appended event signed by key %q, want %q (--signing-key)", got, signer.ID())
	}
	if err := signing.NewKeyring(signer.Public()).Verify(stream.Published(msg.Subject), msg.Header, msg.Data); err != nil {
		t.Errorf("appended event's signature: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve stopped with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
	if !strings.Contains(logs.String(), "ledger API stopped") {
		t.Errorf("no clean stop in the log:\n%s", logs.String())
	}
}

// A publish whose events reach the ledger but whose answer does not (a
// slow network, a proxy that holds it) cannot tell whether they were
// stored. It said only "context deadline exceeded", and the id of a
// --type event was a random one it never showed: sent again, the event
// was stored twice (helper-41, round 10). Now it says the events may
// have been stored and names their ids; sent again with them, the ledger
// answers duplicate. A --timeout not above 0 is refused, naming it.
func TestPublishWithoutAnswerNamesItsIDs(t *testing.T) {
	svc := startService(t)
	target := strings.TrimPrefix(svc.ledgerURL, "http://")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() { // forwards requests at once, answers after 3 s
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer s.Close()
				go io.Copy(s, c)
				time.Sleep(3 * time.Second)
				io.Copy(c, s)
			}()
		}
	}()
	url, tok := "--ledger-url=http://"+ln.Addr().String(), "--ledger-token="+svc.token
	_, errOut, err := runLedger(t, "", "publish", url, tok, "--pool", "p", "--type", "plan", "--timeout", "1s",
		"--data", `{"plan":{"consumers":[{"path":"/A"}]}}`)
	msg := errOut
	if err != nil {
		msg += err.Error()
	}
	if err == nil || !strings.Contains(msg, "within --timeout 1s") || !strings.Contains(msg, "may have stored") || strings.Contains(msg, "context deadline") {
		t.Fatalf("publish without an answer: %v, %q", err, errOut)
	}
	i := strings.Index(msg, "--id ")
	if i < 0 {
		t.Fatalf("publish without an answer names no id to send again: %q", msg)
	}
	id := strings.Fields(msg[i+len("--id "):])[0]
	direct := "--ledger-url=" + svc.ledgerURL
	out, _, err := runLedger(t, "", "publish", direct, tok, "--pool", "p", "--type", "plan", "--id", id,
		"--data", `{"plan":{"consumers":[{"path":"/A"}]}}`)
	if err != nil || !strings.HasSuffix(out, "\t"+id+"\tduplicate\n") {
		t.Errorf("the same event sent again with id %s: %q, %v (want it answered as a duplicate: stored once)", id, out, err)
	}
	for _, bad := range []string{"0", "-5s"} {
		_, _, err := runLedger(t, "", "publish", direct, tok, "--pool", "p", "--type", "demand", "--timeout", bad, "--data", `{"demands":{"/A":1}}`)
		if err == nil || !strings.Contains(err.Error(), "--timeout") || !strings.Contains(err.Error(), "must be above 0") {
			t.Errorf("publish --timeout %s: %v", bad, err)
		}
	}
}
