//go:build unix

package auth_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/auth"
)

// TestTokensFileMustBeRegular: the token commands rewrite the file and
// rename over it, which replaced whatever the path was: `ledger token
// add --file /dev/null` as root left /dev/null a regular file of mode
// 0600, and a FIFO was read until a writer came. They now refuse
// anything but a regular file, naming it, and follow a symbolic link to
// rewrite its target (renamed over, the link itself became a file the
// servers reading the target never saw).
func TestTokensFileMustBeRegular(t *testing.T) {
	dir := t.TempDir()
	_, e, _ := auth.Generate("a", auth.Scopes, []string{auth.AllPools})
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "missing"), dangling); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, dir, dangling} {
		done := make(chan error, 1)
		go func() { done <- auth.AppendFile(path, e) }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "is not a regular file") {
				t.Errorf("AppendFile(%s): %v, want a refusal", path, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("AppendFile(%s) still waiting after 5s", path)
		}
		if fi, err := os.Lstat(path); err != nil || fi.Mode().IsRegular() {
			t.Errorf("%s after the refusal: %v, %v", path, fi, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); err == nil {
		t.Error("AppendFile wrote through a dangling link")
	}

	real := filepath.Join(dir, "tokens.jsonl")
	if err := auth.AppendFile(real, e); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	_, e2, _ := auth.Generate("b", auth.Scopes, []string{auth.AllPools})
	if err := auth.AppendFile(link, e2); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link after AppendFile through it: %v, %v", fi, err)
	}
	if set, err := auth.Load(real); err != nil || len(set.Entries()) != 2 {
		t.Errorf("the link's target after AppendFile through it: %v", err)
	}
}
