package test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/testenv"
)

// outputAndStatus runs cmd and returns its combined output and exit
// status; a command that cannot be run fails the test.
func outputAndStatus(t *testing.T, cmd *exec.Cmd) (string, int) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return string(out), 0
}

// ledgerBinary builds cmd/ledger once per test binary.
func ledgerBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ledger")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/ledger").CombinedOutput()
	if err != nil {
		t.Fatalf("build ledger: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", freePort(t))
}

// handedOut is every port freePort gave this test binary: the port a
// closed listener had is often the next one the kernel gives, so two
// calls in a row (a deployment's HTTP and NATS addresses) could get the
// same one, and `ledger dev` failed with "address already in use".
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePort is a loopback port nobody listens on now, never one it gave
// before in this test binary.
func freePort(t *testing.T) int {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		handedOut.Lock()
		seen := handedOut.ports[port]
		handedOut.ports[port] = true
		handedOut.Unlock()
		if !seen {
			return port
		}
	}
}

// devProcess is a running `ledger dev`.
type devProcess struct {
	cmd    *exec.Cmd
	env    map[string]string
	stderr *bytes.Buffer
}

// staleDatabaseURL is what a shell holds after an earlier `ledger dev`
// printed its lines and stopped: dev must not take it.
const staleDatabaseURL = "postgres://ledger_reporting:stale@127.0.0.1:1/ledger?sslmode=disable"

func startDev(t *testing.T, bin, data, httpAddr, natsAddr string) *devProcess {
	t.Helper()
	return startDevEnv(t, bin, data, httpAddr, natsAddr, append(os.Environ(), "DATABASE_URL="+staleDatabaseURL))
}

// startDevEnv starts `ledger dev` (with any more flags of args) in the
// environment env and waits for the lines it prints once ready; they must
// be shell export lines that a shell reads back to the same values.
func startDevEnv(t *testing.T, bin, data, httpAddr, natsAddr string, env []string, args ...string) *devProcess {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"dev", "--data", data, "--http", httpAddr, "--nats", natsAddr}, args...)...)
	cmd.Env = env
	stdout, _ := cmd.StdoutPipe()
	p := &devProcess{cmd: cmd, env: map[string]string{}, stderr: &bytes.Buffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var exports []string
	deadline := time.After(90 * time.Second)
	for p.env["DATABASE_URL"] == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("ledger dev exited before it was ready:\n%s", p.stderr)
			}
			if k, v, found := parseExport(l); found {
				p.env[k] = v
				exports = append(exports, l)
			} else if !strings.HasPrefix(l, "#") {
				t.Errorf("ledger dev printed a line that is neither an export nor a comment: %q", l)
			}
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("ledger dev not ready after 90s:\n%s", p.stderr)
		}
	}
	go func() {
		for range lines {
		}
	}()
	if p.env["DATABASE_URL"] == staleDatabaseURL {
		t.Errorf("ledger dev took the DATABASE_URL of the environment")
	}
	// The lines as a shell reads them (pasted, or eval'd).
	script := strings.Join(exports, "\n") + "\nenv\n"
	out, err := exec.Command("sh", "-c", script).Output()
	if err != nil {
		t.Fatalf("sh on the printed lines: %v\n%s", err, script)
	}
	got := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	for k, v := range p.env {
		if got[k] != v {
			t.Errorf("a shell reads %s=%q from the printed lines, want %q", k, got[k], v)
		}
	}
	return p
}

// stop sends Ctrl-C and requires a clean exit.
func (p *devProcess) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ledger dev did not exit cleanly on Ctrl-C: %v\n%s", err, p.stderr)
		}
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Fatalf("ledger dev did not stop within 60s of Ctrl-C:\n%s", p.stderr)
	}
}

// devToken is the admin token of the running `ledger dev` under test.
var devToken string

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	rq, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	rq.Header.Set("Content-Type", "application/json")
	rq.Header.Set("Authorization", "Bearer "+devToken)
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func get(t *testing.T, url string) string {
	t.Helper()
	rq, _ := http.NewRequest(http.MethodGet, url, nil)
	rq.Header.Set("Authorization", "Bearer "+devToken)
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// waitAllocations polls the allocations endpoint until it reports seq.
func waitAllocations(t *testing.T, base, pool string, seq int) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	want := fmt.Sprintf(`"seq":%d`, seq)
	for time.Now().Before(deadline) {
		if body := get(t, base+"/v1/pools/"+pool+"/allocations"); strings.Contains(body, want) {
			return body
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("pool %s never reached sequence %d", pool, seq)
	return ""
}

// TestDevRestartKeepsEverything runs `ledger dev`, appends events, stops
// it with Ctrl-C, starts it again on the same data directory and requires
// the same log, projection and API answers, then more appends.
func TestDevRestartKeepsEverything(t *testing.T) {
	bin := ledgerBinary(t)
	data := testenv.DataDir(t)
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	dev := startDev(t, bin, data, httpAddr, natsAddr)
	base := dev.env["LEDGER_URL"]
	devToken = dev.env["LEDGER_TOKEN"]
	resp, err := http.Post(base+"/v1/pools/demo/events", "application/json", strings.NewReader(`{"type":"host_up","data":{"host":"x","slots":1}}`))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("append without the printed token: %v %v", resp, err)
	}
	resp.Body.Close()
	for _, f := range []string{"admin.token", "tokens.jsonl"} {
		if fi, err := os.Stat(filepath.Join(data, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, fi.Mode(), err)
		}
	}
	for _, ev := range []string{
		`{"id":"p1","type":"plan","data":{"plan":{"consumers":[{"path":"/A","priority":3},{"path":"/B","priority":1},{"path":"/C","priority":2}]}}}`,
		`{"id":"h1","type":"host_up","data":{"host":"h1","slots":12}}`,
		`{"id":"d1","type":"demand","data":{"demands":{"/A":7,"/B":5}}}`,
	} {
		if code, body := post(t, base+"/v1/pools/demo/events", ev); code != 200 {
			t.Fatalf("append: %d %s", code, body)
		}
	}
	before := waitAllocations(t, base, "demo", 3)
	dev.stop(t)

	// Restarted from the shell that exported the first run's lines: its
	// DATABASE_URL named the PostgreSQL that stopped with it.
	dev = startDevEnv(t, bin, data, httpAddr, natsAddr, dev.environ())
	defer dev.stop(t)
	if dev.env["LEDGER_TOKEN"] != devToken {
		t.Errorf("the admin token changed across a restart")
	}
	if after := waitAllocations(t, base, "demo", 3); after != before {
		t.Fatalf("after restart the allocations differ:\nbefore %s\nafter  %s", before, after)
	}
	// The retried append of d1 is recognised; a new event continues the log.
	if code, body := post(t, base+"/v1/pools/demo/events", `{"id":"d1","type":"demand","data":{"demands":{"/A":7,"/B":5}}}`); code != 200 || !strings.Contains(body, `"duplicate":true`) {
		t.Fatalf("retry after restart: %d %s", code, body)
	}
	if code, body := post(t, base+"/v1/pools/demo/events", `{"id":"d2","type":"demand","data":{"demands":{"/C":1}}}`); code != 200 || !strings.Contains(body, `"seq":4`) {
		t.Fatalf("append after restart: %d %s", code, body)
	}
	after := waitAllocations(t, base, "demo", 4)
	if !strings.Contains(after, `"path":"/C","leaf":true,"demand":1`) {
		t.Fatalf("C's demand not projected after restart: %s", after)
	}
	// The console is served at LEDGER_URL too, with its data.
	if page := get(t, base+"/console/"); !strings.Contains(page, "<title>ledger console</title>") {
		t.Errorf("GET /console/ of ledger dev: %.200s", page)
	}
	if pools := get(t, base+"/v1/pools"); !strings.Contains(pools, `"pool":"demo","seq":4`) {
		t.Errorf("GET /v1/pools of ledger dev: %s", pools)
	}
	verify := exec.CommandContext(context.Background(), bin, "audit", "verify")
	verify.Env = dev.environ()
	if out, err := verify.CombinedOutput(); err != nil {
		t.Fatalf("audit verify after restart: %v\n%s", err, out)
	}
}

// environ is the environment with the lines dev printed.
func (p *devProcess) environ() []string {
	env := os.Environ()
	for k, v := range p.env {
		env = append(env, k+"="+v)
	}
	return env
}

// parseExport reads a line `ledger dev` prints, export NAME='VALUE', as
// a POSIX shell would.
func parseExport(line string) (name, value string, ok bool) {
	rest, found := strings.CutPrefix(line, "export ")
	if !found {
		return "", "", false
	}
	name, quoted, found := strings.Cut(rest, "=")
	if !found || len(quoted) < 2 || quoted[0] != '\'' || quoted[len(quoted)-1] != '\'' {
		return "", "", false
	}
	return name, strings.ReplaceAll(quoted[1:len(quoted)-1], `'\''`, "'"), true
}

// TestDevKilledDuringInitdbStartsAgain: the first start of a data
// directory killed (kill -9, a power cut) while initdb runs. Its initdb,
// orphaned, went on and finished, with a superuser password no file
// kept; every later start then waited forever for a server that refused
// it, printing nothing (decision 399). Now initdb writes beside the data
// directory and its cluster is moved in only once the password is kept:
// the next start initialises again and is ready, and the next after
// that keeps it.
func TestDevKilledDuringInitdbStartsAgain(t *testing.T) {
	bin := ledgerBinary(t)
	data := testenv.DataDir(t)
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "dev", "--data", data, "--http", httpAddr, "--nats", natsAddr)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	initdb := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "pgcluster: initdb ") {
				initdb <- true
				break
			}
		}
		initdb <- false
		for sc.Scan() {
		}
	}()
	select {
	case ok := <-initdb:
		if !ok {
			t.Fatal("ledger dev ended before it ran initdb")
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("ledger dev did not run initdb within 60s")
	}
	// Killed once initdb has begun to write the cluster (past its
	// start, where a write to its closed output would end it).
	begun := func() bool {
		m, _ := filepath.Glob(filepath.Join(data, "pg*", "PG_VERSION"))
		return len(m) > 0
	}
	for start := time.Now(); !begun(); time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			_ = cmd.Process.Kill()
			t.Fatal("initdb wrote no PG_VERSION within 30s of its log line")
		}
	}
	_ = cmd.Process.Kill() // as kill -9: initdb, its child, goes on
	_ = cmd.Wait()
	// Wait for the orphaned initdb to finish, as it would.
	deadline := time.Now().Add(60 * time.Second)
	for initdbRunning(t, data) {
		if time.Now().After(deadline) {
			t.Fatal("the orphaned initdb still runs after 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	dev := startDev(t, bin, data, httpAddr, natsAddr)
	dev.stop(t)
	dev = startDev(t, bin, data, httpAddr, natsAddr)
	dev.stop(t)
}

// initdbRunning reports whether an initdb writing under data runs.
func initdbRunning(t *testing.T, data string) bool {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == "initdb" && strings.Contains(string(b), data) {
			return true
		}
	}
	return false
}
