package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrUntrusted: the data directory, or something in it, may have been
// put there or changed by another user.
var ErrUntrusted = errors.New("data directory not trusted")

// Error names what was refused and why.
type Error struct {
	Path   string
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%v: %s %s", ErrUntrusted, e.Path, e.Reason)
}

// Is makes errors.Is(err, ErrUntrusted) true.
func (e *Error) Is(target error) bool { return target == ErrUntrusted }

// Layout says what a data directory holds, as paths relative to it
// (filepath.Match patterns for files).
type Layout struct {
	// Dirs must be the calling user's and not writable by group or
	// others, when they exist.
	Dirs []string
	// Secrets are files only the calling user may read: the user's,
	// regular files (no symbolic link), mode without group or other bits.
	Secrets []string
	// Owned are files others may read but only the calling user may
	// write (public keys that decide what is trusted).
	Owned []string
}

// Check refuses dir when it, or what layout names in it, could have been
// placed or changed by another user than the one running this process;
// see the package documentation. Missing entries are fine (they are
// created later by their owner); a missing dir is an error.
func Check(dir string, layout Layout) error {
	uid := os.Geteuid()
	fi, err := os.Stat(dir) // a symbolic link to the data directory is followed
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &Error{Path: dir, Reason: "is not a directory"}
	}
	if err := ownedAndClosed(dir, fi, uid, 0o022); err != nil {
		return err
	}
	if err := parentsClosed(dir, uid); err != nil {
		return err
	}
	for _, d := range layout.Dirs {
		path := filepath.Join(dir, d)
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return &Error{Path: path, Reason: "is not a directory (a symbolic link, or a file)"}
		}
		if err := ownedAndClosed(path, fi, uid, 0o022); err != nil {
			return err
		}
	}
	for _, rule := range []struct {
		patterns []string
		open     fs.FileMode // bits others must not have
		what     string
	}{
		{layout.Secrets, 0o077, "a secret"},
		{layout.Owned, 0o022, "a file that decides what is trusted"},
	} {
		for _, pattern := range rule.patterns {
			paths, err := filepath.Glob(filepath.Join(dir, pattern))
			if err != nil {
				return err
			}
			for _, path := range paths {
				fi, err := os.Lstat(path)
				if err != nil {
					return err
				}
				if !fi.Mode().IsRegular() {
					return &Error{Path: path, Reason: fmt.Sprintf("is %s but not a regular file (%v): it may point at someone else's", rule.what, fi.Mode().Type())}
				}
				if err := ownedAndClosed(path, fi, uid, rule.open); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// parentsClosed refuses dir when a directory above it could let another
// user rename or replace it, as ssh's StrictModes refuses a key below
// such a directory: each parent must be owned by uid or root, and be
// writable by group or others only with the sticky bit (as /tmp is, where
// only an entry's owner may rename it).
func parentsClosed(dir string, uid int) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if owner, ok := ownerOf(fi); ok && owner != uid && owner != 0 {
			return &Error{Path: p, Reason: fmt.Sprintf("(a directory above the data directory) is owned by uid %d, not by you (uid %d) or root: that user could rename the data directory and put their own in its place; use a data directory below directories of your own", owner, uid)}
		}
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
			return &Error{Path: p, Reason: fmt.Sprintf("(a directory above the data directory) has mode %#o without the sticky bit: group or others could rename the data directory and put their own in its place", fi.Mode().Perm())}
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// ownedAndClosed refuses path unless uid owns it and it has none of the
// mode bits open.
func ownedAndClosed(path string, fi fs.FileInfo, uid int, open fs.FileMode) error {
	if owner, ok := ownerOf(fi); ok && owner != uid {
		return &Error{Path: path, Reason: fmt.Sprintf("is owned by uid %d, not by you (uid %d): another user could have put their own tokens, keys or seeds there; use a data directory of your own", owner, uid)}
	}
	if perm := fi.Mode().Perm(); perm&open != 0 {
		who := "group or others may write it"
		if open&0o044 != 0 {
			who = "group or others may read or write it"
		}
		return &Error{Path: path, Reason: fmt.Sprintf("has mode %#o: %s; chmod %s it (go-%s)", perm, who, modeFix(perm&^open), perms(open))}
	}
	return nil
}

func modeFix(m fs.FileMode) string { return fmt.Sprintf("%o", m) }

func perms(open fs.FileMode) string {
	if open&0o044 != 0 {
		return "rwx"
	}
	return "w"
}
