//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the file in a data directory that `ledger dev` holds an
// exclusive flock on while it runs.
const LockFile = "ledger.lock"

// errLocked: another process holds the data directory.
var errLocked = errors.New("data directory in use")

// lockDataDir takes an exclusive, non-blocking flock on DATA/ledger.lock
// so that a second `ledger dev` on the same directory is refused at once
// instead of running a second projector on the same JetStream store and
// stopping the first one's PostgreSQL on exit. The kernel drops the lock
// when the process dies, so a crash leaves nothing to clean up. The file
// holds the owner's pid, for the message.
func lockDataDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is used by another `ledger dev` (pid %s); stop it first or give another --data",
				errLocked, dir, strings.TrimSpace(string(owner)))
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}
