package datadir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var layout = Layout{
	Dirs:    []string{"keys"},
	Secrets: []string{"admin.token", "keys/*.nk"},
	Owned:   []string{"keys/trusted.pub"},
}

// good is a data directory its user may trust.
func good(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	must(t, os.Mkdir(dir, 0o700))
	must(t, os.Mkdir(filepath.Join(dir, "keys"), 0o700))
	must(t, os.WriteFile(filepath.Join(dir, "admin.token"), []byte("t"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "keys", "a.nk"), []byte("s"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "keys", "trusted.pub"), []byte("p"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "other.log"), []byte("l"), 0o666)) // not in the layout
	return dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	if err := Check(good(t), layout); err != nil {
		t.Fatalf("a good data directory: %v", err)
	}
	foreign := 4242
	if os.Geteuid() == foreign {
		foreign++
	}
	for name, tc := range map[string]struct {
		spoil      func(dir string) error
		path, says string
	}{
		"mode 0777":      {func(dir string) error { return os.Chmod(dir, 0o777) }, "", "mode 0777"},
		"group-writable": {func(dir string) error { return os.Chmod(dir, 0o770) }, "", "group or others may write"},
		"other owner":    {func(dir string) error { return os.Chown(dir, foreign, foreign) }, "", "owned by uid 4242"},
		"foreign key file": {func(dir string) error { return os.Chown(filepath.Join(dir, "keys", "a.nk"), foreign, foreign) },
			"keys/a.nk", "owned by uid 4242"},
		"loose seed":           {func(dir string) error { return os.Chmod(filepath.Join(dir, "keys", "a.nk"), 0o644) }, "keys/a.nk", "read or write"},
		"foreign subdirectory": {func(dir string) error { return os.Chown(filepath.Join(dir, "keys"), foreign, foreign) }, "keys", "owned by uid 4242"},
		"token as a link": {func(dir string) error {
			os.Remove(filepath.Join(dir, "admin.token"))
			return os.Symlink("/tmp/theirs", filepath.Join(dir, "admin.token"))
		}, "admin.token", "not a regular file"},
		"writable trusted keys": {func(dir string) error { return os.Chmod(filepath.Join(dir, "keys", "trusted.pub"), 0o666) }, "keys/trusted.pub", "may write"},
		"foreign trusted keys": {func(dir string) error { return os.Chown(filepath.Join(dir, "keys", "trusted.pub"), foreign, foreign) },
			"keys/trusted.pub", "owned by uid 4242"},
	} {
		if os.Geteuid() != 0 && strings.Contains(name, "foreign") || os.Geteuid() != 0 && name == "other owner" {
			t.Fatalf("%s needs root to chown (the tests run as root)", name)
		}
		dir := good(t)
		must(t, tc.spoil(dir))
		err := Check(dir, layout)
		want := filepath.Join(dir, tc.path)
		var e *Error
		if !errors.Is(err, ErrUntrusted) || !errors.As(err, &e) || e.Path != want || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want a refusal of %s saying %q", name, err, want, tc.says)
		}
	}
}

// A directory above the data directory that another user owns, or that
// group or others may write without the sticky bit, could let them rename
// the data directory and put their own in its place: refused, naming it
// (as ssh's StrictModes); a sticky world-writable parent (/tmp) is fine.
func TestCheckParents(t *testing.T) {
	foreign := 4242
	if os.Geteuid() == foreign {
		foreign++
	}
	if os.Geteuid() != 0 {
		t.Fatal("chown needs root (the tests run as root)")
	}
	for name, tc := range map[string]struct {
		spoil func(parent string) error
		says  string
	}{
		"foreign parent":          {func(p string) error { return os.Chown(p, foreign, foreign) }, "owned by uid 4242"},
		"world-writable parent":   {func(p string) error { return os.Chmod(p, 0o777) }, "without the sticky bit"},
		"sticky parent (as /tmp)": {func(p string) error { return os.Chmod(p, 0o777|fs.ModeSticky) }, ""},
	} {
		parent := t.TempDir()
		dir := filepath.Join(parent, "data")
		must(t, os.Mkdir(dir, 0o700))
		must(t, tc.spoil(parent))
		err := Check(dir, layout)
		var e *Error
		switch {
		case tc.says == "" && err != nil:
			t.Errorf("%s: %v, want accepted", name, err)
		case tc.says != "" && (!errors.As(err, &e) || e.Path != parent || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("%s: %v; want a refusal of %s saying %q", name, err, parent, tc.says)
		}
	}
}
