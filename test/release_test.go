package test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// lockedBuffer is a process's stderr, read while the process runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tokenCmd runs `ledger token ARGS` and returns what it printed.
func tokenCmd(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"token"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ledger token %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// printedToken is the LEDGER_TOKEN= line of token add or rotate.
func printedToken(t *testing.T, out string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if tok, ok := strings.CutPrefix(strings.TrimSpace(l), "LEDGER_TOKEN="); ok && tok != "" {
			return tok
		}
	}
	t.Fatalf("no LEDGER_TOKEN= line in %q", out)
	return ""
}

// statusOf sends an authenticated request and returns the status.
func statusOf(t *testing.T, method, url, token, body string) int {
	t.Helper()
	rq, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	rq.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		rq.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// tokenChangeDeadline is how long a running server may take to act on a
// change of its tokens file (it looks every second).
const tokenChangeDeadline = 5 * time.Second

// untilStatus repeats a request until it is answered want, and returns
// how long that took; past tokenChangeDeadline the test fails.
func untilStatus(t *testing.T, what string, want int, req func() int) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got := req()
		if got == want {
			return time.Since(start)
		}
		if time.Since(start) > tokenChangeDeadline {
			t.Fatalf("%s: still %d after %v, want %d", what, got, tokenChangeDeadline, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tokenLifecycle drives a running server's tokens through its tokens
// file with the ledger binary, as an operator does: a token added while
// it runs is accepted, a revoked one refused, a rotated one's old secret
// refused and its new one accepted, a malformed file changes nothing;
// `token list` shows no token. It returns every token it saw (to look
// for in the logs).
func tokenLifecycle(t *testing.T, bin, file, base string) []string {
	t.Helper()
	appendAs := func(token string) func() int {
		return func() int {
			return statusOf(t, http.MethodPost, base+"/v1/pools/lifecycle/events", token, `{"type":"host_up","data":{"host":"h1","slots":4}}`)
		}
	}
	readAs := func(token string) func() int {
		return func() int { return statusOf(t, http.MethodGet, base+"/v1/pools/lifecycle/decisions", token, "") }
	}
	// Added while the server runs: no restart.
	sched := printedToken(t, tokenCmd(t, bin, "add", "--file", file, "--name", "scheduler", "--scopes", "append,plan", "--pools", "lifecycle"))
	took := untilStatus(t, "a token added to a running server", 200, appendAs(sched))
	t.Logf("a token added was accepted after %v", took.Round(time.Millisecond))
	reader := printedToken(t, tokenCmd(t, bin, "add", "--file", file, "--name", "reporting", "--scopes", "read", "--pools", "*"))
	untilStatus(t, "a read token added", 200, readAs(reader))

	// Revoked: refused within seconds.
	if out := tokenCmd(t, bin, "revoke", "--file", file, "--name", "scheduler"); strings.Contains(out, sched) {
		t.Errorf("token revoke shows the token: %s", out)
	}
	took = untilStatus(t, "a revoked token", 401, appendAs(sched))
	t.Logf("a revoked token was refused after %v", took.Round(time.Millisecond))

	// Rotated: the old secret refused, the new one accepted.
	newReader := printedToken(t, tokenCmd(t, bin, "rotate", "--file", file, "--name", "reporting"))
	took = untilStatus(t, "a rotated token's old secret", 401, readAs(reader))
	if code := readAs(newReader)(); code != 200 {
		t.Fatalf("a rotated token's new secret: %d", code)
	}
	t.Logf("a rotated token's old secret was refused (and the new one accepted) after %v", took.Round(time.Millisecond))

	// A malformed file keeps the last good set: nobody locked out, nobody let in.
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, append(append([]byte{}, good...), `{"name":"intruder","sha256":"`...), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // past a reload
	if code := readAs(newReader)(); code != 200 {
		t.Errorf("after a malformed tokens file, a good token is answered %d", code)
	}
	if code := appendAs(sched)(); code != 401 {
		t.Errorf("after a malformed tokens file, a revoked token is answered %d", code)
	}
	if err := os.WriteFile(file, good, 0o600); err != nil {
		t.Fatal(err)
	}

	list := tokenCmd(t, bin, "list", "--file", file)
	for _, tok := range []string{sched, reader, newReader} {
		if strings.Contains(list, tok) {
			t.Errorf("token list shows a token:\n%s", list)
		}
	}
	if !strings.Contains(list, "reporting") || strings.Contains(list, "scheduler") {
		t.Errorf("token list after revoking scheduler:\n%s", list)
	}
	return []string{sched, reader, newReader}
}

// accessFields are the fields of every access line.
var accessFields = []string{"request_id", "token", "pool", "method", "route", "status", "latency_ms", "bytes"}

// checkJSONLog parses every line of a process's log: each must be a JSON
// object with time, level and msg, none may hold any of secrets (nor an
// Authorization header's "Bearer"); access lines must have every field.
// It returns the access lines.
func checkJSONLog(t *testing.T, what, log string, secrets []string) []map[string]any {
	t.Helper()
	var access []map[string]any
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		lines++
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("%s: a log line is not JSON: %q", what, line)
			continue
		}
		for _, k := range []string{"time", "level", "msg"} {
			if rec[k] == nil {
				t.Errorf("%s: a log line without %s: %s", what, k, line)
			}
		}
		for _, s := range append(secrets, "Bearer ") {
			if s != "" && strings.Contains(line, s) {
				t.Errorf("%s: a log line shows a secret (%.12s...): %s", what, s, line)
			}
		}
		if rec["msg"] == "http request" {
			for _, k := range accessFields {
				if _, ok := rec[k]; !ok {
					t.Errorf("%s: access line without %s: %s", what, k, line)
				}
			}
			access = append(access, rec)
		}
	}
	if lines == 0 {
		t.Errorf("%s: no log at all", what)
	}
	return access
}

// checkAccessNames: the access lines name each token used by its name.
func checkAccessNames(t *testing.T, what string, access []map[string]any, names ...string) {
	t.Helper()
	for _, n := range names {
		found := false
		for _, rec := range access {
			if rec["token"] == n && rec["pool"] != nil {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no access line names the token %s", what, n)
		}
	}
}

// stopProcess sends SIGINT and requires a clean exit.
func stopProcess(t *testing.T, what string, cmd *exec.Cmd, stderr fmt.Stringer) {
	t.Helper()
	_ = cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s did not exit cleanly: %v\n%s", what, err, stderr)
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("%s did not stop within 60s\n%s", what, stderr)
	}
}

func waitHealthy(t *testing.T, url string, stderr fmt.Stringer) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not healthy after 90s: %v\n%s", url, err, stderr)
		}
	}
}

// `ledger serve` and `projector` started as an operator starts them
// (their binaries, --log-format json, the ledger's and the projector's
// NATS identities, a tokens file made with `ledger token add`): tokens
// added, revoked and rotated take effect while they run, on the API and
// on the projector's /metrics alike; every log line of both is JSON with
// time, level and msg, every request has an access line with its
// fields, and no line shows a token, the database's password or a seed.
func TestTokensAndLogsOfRunningServeAndProjector(t *testing.T) {
	bin, projector := ledgerBinary(t), projectorBinary(t)
	natsURL, dbURL := testenv.NATS(t), testenv.Postgres(t)
	ledgerCreds, projectorCreds := testenv.Creds(t, natsURL, natsauth.Ledger), testenv.Creds(t, natsURL, natsauth.Projector)
	file := filepath.Join(t.TempDir(), "tokens.jsonl")
	ops := printedToken(t, tokenCmd(t, bin, "add", "--file", file, "--name", "ops", "--scopes", "all", "--pools", "*"))
	prom := printedToken(t, tokenCmd(t, bin, "add", "--file", file, "--name", "prometheus", "--scopes", "metrics", "--pools", "*"))

	httpAddr, metricsAddr := freeAddr(t), freeAddr(t)
	env := append(os.Environ(), "DATABASE_URL=", "LEDGER_TOKEN=")
	serve := exec.Command(bin, "serve", "--http", httpAddr, "--nats-url", natsURL, "--nats-creds", ledgerCreds,
		"--database-url", dbURL, "--tokens", file, "--log-format", "json")
	serve.Env = env
	var serveLog, projectorLog lockedBuffer
	serve.Stderr = &serveLog
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = serve.Process.Kill() }()
	waitHealthy(t, "http://"+httpAddr+"/healthz", &serveLog)
	proj := exec.Command(projector, "--nats-url", natsURL, "--nats-creds", projectorCreds, "--database-url", dbURL,
		"--metrics-listen", metricsAddr, "--metrics-tokens", file, "--log-format", "json", "--log-level", "debug")
	proj.Env = env
	proj.Stderr = &projectorLog
	if err := proj.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = proj.Process.Kill() }()
	metricsURL := "http://" + metricsAddr + "/metrics"
	scrape := func() int { return statusOf(t, http.MethodGet, metricsURL, prom, "") }
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		rq, _ := http.NewRequest(http.MethodGet, metricsURL, nil)
		rq.Header.Set("Authorization", "Bearer "+prom)
		if resp, err := http.DefaultClient.Do(rq); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the projector's /metrics never answered\n%s", &projectorLog)
		}
	}

	base := "http://" + httpAddr
	if code := statusOf(t, http.MethodGet, base+"/v1/status", ops, ""); code != 200 {
		t.Fatalf("status as ops: %d", code)
	}
	seen := tokenLifecycle(t, bin, file, base)
	// The projector's /metrics takes the file's changes too.
	tokenCmd(t, bin, "revoke", "--file", file, "--name", "prometheus")
	took := untilStatus(t, "a revoked metrics token on the projector", 401, scrape)
	t.Logf("the projector's /metrics refused a revoked token after %v", took.Round(time.Millisecond))

	stopProcess(t, "projector", proj, &projectorLog)
	stopProcess(t, "ledger serve", serve, &serveLog)
	seed, err := os.ReadFile(ledgerCreds)
	if err != nil {
		t.Fatal(err)
	}
	pseed, _ := os.ReadFile(projectorCreds)
	secrets := append(seen, ops, prom, strings.TrimSpace(string(seed)), strings.TrimSpace(string(pseed)), dbPassword(dbURL))
	access := checkJSONLog(t, "ledger serve", serveLog.String(), secrets)
	if len(access) < 10 {
		t.Errorf("ledger serve: %d access lines", len(access))
	}
	checkAccessNames(t, "ledger serve", access, "ops", "scheduler", "reporting")
	checkJSONLog(t, "projector", projectorLog.String(), secrets)
	if !strings.Contains(serveLog.String(), `"msg":"tokens file reloaded"`) || !strings.Contains(serveLog.String(), `"msg":"tokens file not reloaded: malformed; keeping the tokens in force"`) {
		t.Errorf("ledger serve's log does not tell the reloads:\n%s", serveLog.String())
	}
}

// dbPassword is the password of a PostgreSQL URL ("" when none).
func dbPassword(u string) string {
	_, rest, ok := strings.Cut(u, "://")
	if !ok {
		return ""
	}
	userinfo, _, ok := strings.Cut(rest, "@")
	if !ok {
		return ""
	}
	_, pw, _ := strings.Cut(userinfo, ":")
	return pw
}

// The same against `ledger dev` started as `make run` starts it (with
// --log-format json): its tokens file (DATA/tokens.jsonl) is watched
// while it runs, and its log, the private PostgreSQL's lines included,
// is JSON without a secret.
func TestTokensAndLogsOfRunningDev(t *testing.T) {
	bin := ledgerBinary(t)
	data := testenv.DataDir(t) // PostgreSQL's own user must reach it
	dev := startDevEnv(t, bin, data, freeAddr(t), freeAddr(t), append(os.Environ(), "DATABASE_URL="+staleDatabaseURL), "--log-format", "json")
	admin := dev.env["LEDGER_TOKEN"]
	base := dev.env["LEDGER_URL"]
	if code := statusOf(t, http.MethodGet, base+"/v1/status", admin, ""); code != 200 {
		t.Fatalf("status as admin: %d", code)
	}
	seen := tokenLifecycle(t, bin, filepath.Join(data, "tokens.jsonl"), base)
	dev.stop(t)
	seed, err := os.ReadFile(filepath.Join(data, "nats-auth", "ledger.nk"))
	if err != nil {
		t.Fatal(err)
	}
	access := checkJSONLog(t, "ledger dev", dev.stderr.String(), append(seen, admin, strings.TrimSpace(string(seed)), dbPassword(dev.env["DATABASE_URL"])))
	checkAccessNames(t, "ledger dev", access, "admin", "scheduler", "reporting")
}

// `ledger completion SHELL` writes each shell's script (bash's parses),
// and the completions the scripts ask the binary for (its hidden
// __complete command) name the commands.
func TestCompletionScripts(t *testing.T) {
	bin := ledgerBinary(t)
	for shell, want := range map[string]string{
		"bash":       "__start_ledger",
		"zsh":        "#compdef ledger",
		"fish":       "complete -c ledger",
		"powershell": "Register-ArgumentCompleter",
	} {
		out, err := exec.Command(bin, "completion", shell).Output()
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("ledger completion %s: %v; no %q in:\n%.300s", shell, err, want, out)
			continue
		}
		if shell == "bash" {
			script := filepath.Join(t.TempDir(), "ledger.bash")
			if err := os.WriteFile(script, out, 0o600); err != nil {
				t.Fatal(err)
			}
			if msg, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
				t.Errorf("bash -n on the completion script: %v\n%s", err, msg)
			}
		}
	}
	for args, want := range map[string][]string{
		"tok":         {"token"},
		"token r":     {"revoke", "rotate"},
		"serve --log": {"--log-format", "--log-level"},
	} {
		// The last word is the one being completed, as a shell sends it.
		out, err := exec.Command(bin, append([]string{"__complete"}, strings.Fields(args)...)...).Output()
		if err != nil {
			t.Fatalf("ledger __complete %s: %v", args, err)
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("completing %q offers no %s:\n%s", args, w, out)
			}
		}
	}
}

// --version prints what the build recorded: the module version and the
// commit `go build` stamped (checked with the toolchain's own reading,
// `go version -m`, and with git in a clone), or (devel) and "unknown"
// when it stamped none, never a guess. A build with -buildvcs=false
// always says so.
func TestVersionFromBuildInfo(t *testing.T) {
	dir := t.TempDir()
	for _, vcs := range []string{"true", "false"} {
		bin := filepath.Join(dir, "ledger-vcs-"+vcs)
		build := exec.Command("go", "build", "-buildvcs="+vcs, "-o", bin, "../cmd/ledger")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build -buildvcs=%s: %v\n%s", vcs, err, out)
		}
		out, err := exec.Command(bin, "--version").Output()
		if err != nil {
			t.Fatalf("ledger --version: %v", err)
		}
		var commit string
		for _, l := range strings.Split(string(out), "\n") {
			if c, ok := strings.CutPrefix(l, "commit: "); ok {
				commit = strings.TrimSuffix(c, " (modified)")
			}
		}
		// The module version: (devel) without VCS information, else what
		// go build derives from it (a tag, or a pseudo-version naming the
		// commit; +dirty for uncommitted changes).
		first, _, _ := strings.Cut(string(out), "\n")
		version := strings.TrimPrefix(first, "ledger ")
		if !strings.HasPrefix(first, "ledger ") || commit == "" || (version != "(devel)" && !regexp.MustCompile(`^v\d+\.\d+\.\d+\S*$`).MatchString(version)) {
			t.Fatalf("ledger --version of a build of this checkout:\n%s", out)
		}
		if commit == "unknown" && version != "(devel)" {
			t.Errorf("version %s without a commit", version)
		}
		if len(commit) >= 12 && commit != "unknown" && strings.HasPrefix(version, "v0.0.0-") && !strings.Contains(version, commit[:12]) {
			t.Errorf("pseudo-version %s does not name commit %s", version, commit)
		}
		meta, err := exec.Command("go", "version", "-m", bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		stamped := ""
		for _, l := range strings.Split(string(meta), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision=") {
				stamped = strings.TrimPrefix(f[1], "vcs.revision=")
			}
		}
		switch {
		case vcs == "false" || stamped == "":
			if commit != "unknown" {
				t.Errorf("-buildvcs=%s, no revision stamped, yet --version says commit %q", vcs, commit)
			}
		case commit != stamped:
			t.Errorf("--version says commit %q, the build recorded %q", commit, stamped)
		}
		// In a clone (.git a directory) go build stamps the checkout's
		// HEAD; a git worktree (.git a file) it does not stamp at all.
		if fi, err := os.Stat("../.git"); vcs == "true" && err == nil && fi.IsDir() {
			head, err := exec.Command("git", "rev-parse", "HEAD").Output()
			if err != nil {
				t.Fatal(err)
			}
			if commit != strings.TrimSpace(string(head)) {
				t.Errorf("a build of a clone at %s says commit %q", strings.TrimSpace(string(head)), commit)
			}
		}
		t.Logf("-buildvcs=%s: %s", vcs, strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", "; "))
	}
}
