package auth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/auth"
)

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *logBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// within polls cond for up to 5s (the watcher looks every 20ms here).
func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
	}
}

// A watched tokens file takes each change (add, rotate, revoke, every
// token revoked) and refuses a malformed or public file, keeping the
// last good set and logging why; no log line shows a token or a hash.
func TestWatchReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.jsonl")
	opsToken, ops, _ := auth.Generate("ops", auth.Scopes, []string{auth.AllPools})
	if err := auth.AppendFile(path, ops); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, err := auth.Watch(ctx, path, 20*time.Millisecond, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	known := func(tok string) bool { _, ok := f.Authenticate(tok); return ok }
	if !known(opsToken) {
		t.Fatal("ops not known at start")
	}

	schedToken, sched, _ := auth.Generate("scheduler", []auth.Scope{auth.ScopeAppend}, []string{"gpu"})
	if err := auth.AppendFile(path, sched); err != nil {
		t.Fatal(err)
	}
	within(t, "an added token", func() bool { return known(schedToken) })

	newToken, _, err := auth.RotateFile(path, "scheduler")
	if err != nil {
		t.Fatal(err)
	}
	within(t, "a rotated token", func() bool { return known(newToken) && !known(schedToken) })

	good, _ := os.ReadFile(path)
	for _, bad := range []struct{ what, content string }{
		{"half a line", string(good) + `{"name":"x","sha2`},
		{"an unknown scope", `{"name":"x","sha256":"` + strings.Repeat("ab", 32) + `","scopes":["root"],"pools":["*"]}` + "\n"},
		{"two entries of one name", string(good) + string(good)},
	} {
		before := strings.Count(logs.String(), "malformed")
		if err := os.WriteFile(path, []byte(bad.content), 0o600); err != nil {
			t.Fatal(err)
		}
		within(t, bad.what+" logged", func() bool { return strings.Count(logs.String(), "malformed") > before })
		if !known(opsToken) || !known(newToken) {
			t.Fatalf("%s: the last good tokens are no longer in force", bad.what)
		}
		if err := os.WriteFile(path, good, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A file anyone may write is not taken either.
	if _, err := auth.RevokeFile(path, "ops"); err != nil {
		t.Fatal(err)
	}
	within(t, "a revoked token", func() bool { return !known(opsToken) })
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, good, 0o666); err != nil {
		t.Fatal(err)
	}
	within(t, "a public file logged", func() bool { return strings.Contains(logs.String(), "chmod 600") })
	if known(opsToken) {
		t.Fatal("a public file's entries were taken")
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	within(t, "the file made private again", func() bool { return known(opsToken) })

	// Every token revoked: everyone is refused.
	for _, n := range []string{"ops", "scheduler"} {
		if _, err := auth.RevokeFile(path, n); err != nil {
			t.Fatal(err)
		}
	}
	within(t, "every token revoked", func() bool { return !known(opsToken) && !known(newToken) })

	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		for _, secret := range []string{opsToken, schedToken, newToken, ops.SHA256, sched.SHA256} {
			if strings.Contains(line, secret) {
				t.Errorf("log line shows a token or its hash: %s", line)
			}
		}
	}
	if !strings.Contains(logs.String(), `"added":["scheduler"]`) || !strings.Contains(logs.String(), `"removed":["ops"]`) {
		t.Errorf("reloads do not name what changed:\n%s", logs.String())
	}
}

// Watch refuses to start on a file Load refuses.
func TestWatchStartsOnlyOnAGoodFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.jsonl")
	if err := os.WriteFile(path, []byte("{not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Watch(context.Background(), path, 0, nil); err == nil {
		t.Fatal("a malformed file was watched")
	}
}

// The file's mutators rewrite it whole (a reader never sees half) and
// keep it private.
func TestRevokeRotate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.jsonl")
	_, a, _ := auth.Generate("a", []auth.Scope{auth.ScopeRead}, []string{"p"})
	_, b, _ := auth.Generate("b", []auth.Scope{auth.ScopeAppend}, []string{"*"})
	for _, e := range []auth.Entry{a, b} {
		if err := auth.AppendFile(path, e); err != nil {
			t.Fatal(err)
		}
	}
	tok, e, err := auth.RotateFile(path, "a")
	if err != nil || e.SHA256 != auth.Hash(tok) || e.SHA256 == a.SHA256 || e.Scopes[0] != auth.ScopeRead || e.Pools[0] != "p" {
		t.Fatalf("rotate: %+v %v", e, err)
	}
	if _, _, err := auth.RotateFile(path, "nobody"); err == nil {
		t.Error("rotated a name not in the file")
	}
	if gone, err := auth.RevokeFile(path, "b"); err != nil || gone.Name != "b" {
		t.Fatalf("revoke: %+v %v", gone, err)
	}
	if _, err := auth.RevokeFile(path, "b"); err == nil {
		t.Error("revoked a name twice")
	}
	entries, err := auth.ReadFile(path)
	if err != nil || len(entries) != 1 || entries[0].Name != "a" || entries[0].SHA256 != e.SHA256 {
		t.Fatalf("after revoke: %+v %v", entries, err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A tokens file caught while it is written (truncated first, as
// os.WriteFile, shells and many editors do) never takes the tokens out of
// force: new content is taken only when the next look reads it again.
func TestWatchIgnoresAFileCaughtMidWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.jsonl")
	opsToken, ops, _ := auth.Generate("ops", auth.Scopes, []string{auth.AllPools})
	if err := auth.AppendFile(path, ops); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, err := auth.Watch(ctx, path, time.Hour, slog.New(slog.NewJSONHandler(&logBuffer{}, nil))) // looks only when Check is called
	if err != nil {
		t.Fatal(err)
	}
	known := func() bool { _, ok := f.Authenticate(opsToken); return ok }
	if err := os.WriteFile(path, nil, 0o600); err != nil { // the writer has truncated the file
		t.Fatal(err)
	}
	f.Check()
	if !known() {
		t.Fatal("an empty file seen once (a writer between truncate and write) revoked the tokens")
	}
	if err := os.WriteFile(path, good, 0o600); err != nil { // and written it again
		t.Fatal(err)
	}
	f.Check()
	f.Check()
	if !known() {
		t.Fatal("the tokens are not in force after the file was written back")
	}
	// A file that stays empty is every token revoked, taken at the
	// second look.
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f.Check()
	if !known() {
		t.Fatal("an empty file was taken at the first look")
	}
	f.Check()
	if known() {
		t.Fatal("a file left empty was not taken at the second look: every token should be revoked")
	}
}
