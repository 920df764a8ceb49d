package auth

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultReloadInterval is how often a File looks at its tokens file: a
// token added, revoked or rotated takes effect within about this long.
const DefaultReloadInterval = time.Second

// File is the token set of a tokens file, reloaded while it runs: every
// interval it compares the file's identity, size and modification time
// with the last it read, and reads it again when any changed. A file that
// cannot be read or is malformed (or made readable by others) is not
// taken: the last good set stays in force, and the error is logged, so a
// bad edit neither locks everyone out nor lets anyone in. A well-formed
// file with no entries is taken (every token revoked: everyone is
// refused), with a warning.
//
// Polling is deliberate (docs/decisions.md): a stat of one small file a
// second costs nothing, and it sees every way a file is replaced (an
// editor's rename, `ledger token`'s rename, a Kubernetes secret's
// symlink swap, a network file system), which file-change notifications
// do not all report.
type File struct {
	path string
	log  *slog.Logger
	cur  atomic.Pointer[Tokens]

	mu   sync.Mutex        // serialises Check
	seen os.FileInfo       // of the last content read, good or not
	sum  [sha256.Size]byte // of the last content read
	// pending is new content seen once: it is taken only when the next
	// look reads it again, so a file caught while it is being written (an
	// editor or a shell truncating it first) is never put in force.
	pending [sha256.Size]byte
}

// Watch loads the tokens file at path (as Load: an error here is
// returned, the caller should not start) and reloads it every interval
// (DefaultReloadInterval when 0) until ctx ends.
func Watch(ctx context.Context, path string, interval time.Duration, log *slog.Logger) (*File, error) {
	if log == nil {
		log = slog.Default()
	}
	if interval <= 0 {
		interval = DefaultReloadInterval
	}
	f := &File{path: path, log: log}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	t, err := Load(path)
	if err != nil {
		return nil, err
	}
	f.cur.Store(t)
	f.seen = fi
	if b, err := os.ReadFile(path); err == nil {
		f.sum = sha256.Sum256(b)
	}
	go f.watch(ctx, interval)
	return f, nil
}

// Authenticate is the current set's Authenticate.
func (f *File) Authenticate(token string) (*Identity, bool) { return f.cur.Load().Authenticate(token) }

// Tokens is the set in force now.
func (f *File) Tokens() *Tokens { return f.cur.Load() }

func (f *File) watch(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			f.Check()
		}
	}
}

// Check reloads the file now if it changed since it was last read (the
// watcher calls it every interval), once two looks in a row read the same
// new content. A file whose identity, size, mode
// and time are those last seen is not read again unless its time is
// recent: on a file system with coarse timestamps two writes within one
// tick keep the time, so a recently changed file is read and its content
// compared until its time is old enough to trust.
func (f *File) Check() {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err != nil {
		if f.seen != nil {
			f.log.Error("tokens file unreadable; keeping the tokens in force", "file", f.path, "err", err, "tokens", f.cur.Load().Len())
			f.seen = nil
		}
		return
	}
	same := f.seen != nil && os.SameFile(fi, f.seen) && fi.Size() == f.seen.Size() && fi.ModTime().Equal(f.seen.ModTime()) && fi.Mode() == f.seen.Mode()
	if same && time.Since(fi.ModTime()) > trustTimesAfter {
		return
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		f.log.Error("tokens file unreadable; keeping the tokens in force", "file", f.path, "err", err, "tokens", f.cur.Load().Len())
		f.seen = nil
		return
	}
	sum := sha256.Sum256(b)
	if same && sum == f.sum {
		return
	}
	switch {
	case sum == f.sum:
		f.pending = [sha256.Size]byte{}
	case sum != f.pending:
		// New content: wait one look for it to stay. An empty file read
		// between a writer's truncate and its write would otherwise
		// revoke every token until the next look (a test under load
		// caught it).
		f.pending = sum
		return
	}
	modeChanged := f.seen == nil || fi.Mode() != f.seen.Mode()
	f.seen = fi
	if sum == f.sum && !modeChanged {
		return // replaced by the same content
	}
	f.sum = sum
	if fi.Mode().Perm()&0o077 != 0 {
		f.log.Error("tokens file not reloaded: others may read or write it (chmod 600); keeping the tokens in force", "file", f.path, "mode", fi.Mode().Perm().String(), "tokens", f.cur.Load().Len())
		f.sum = [sha256.Size]byte{} // read it again once the mode is fixed
		return
	}
	t, err := Parse(b)
	if err != nil {
		f.log.Error("tokens file not reloaded: malformed; keeping the tokens in force", "file", f.path, "err", err, "tokens", f.cur.Load().Len())
		return
	}
	old := f.cur.Swap(t)
	added, removed, changed := diff(old, t)
	if len(added)+len(removed)+len(changed) == 0 {
		return
	}
	f.log.Info("tokens file reloaded", "file", f.path, "tokens", t.Len(), "added", added, "removed", removed, "changed", changed)
	if t.Len() == 0 {
		f.log.Warn("tokens file has no entries: every request is refused", "file", f.path)
	}
}

// trustTimesAfter is the age past which a file's unchanged modification
// time is taken to mean unchanged content.
const trustTimesAfter = 2 * time.Second

// diff names the entries added, removed and changed (a new hash, scopes
// or pools) between two sets: names only, never a hash.
func diff(old, cur *Tokens) (added, removed, changed []string) {
	byName := map[string]Entry{}
	for _, e := range old.entries {
		byName[e.Name] = e
	}
	for _, e := range cur.entries {
		o, ok := byName[e.Name]
		switch {
		case !ok:
			added = append(added, e.Name)
		case o.SHA256 != e.SHA256 || !slices.Equal(o.Scopes, e.Scopes) || !slices.Equal(o.Pools, e.Pools):
			changed = append(changed, e.Name)
		}
		delete(byName, e.Name)
	}
	for n := range byName {
		removed = append(removed, n)
	}
	slices.Sort(removed)
	return added, removed, changed
}
