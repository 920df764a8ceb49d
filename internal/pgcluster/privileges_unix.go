//go:build unix

package pgcluster

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// SystemUser is the user the PostgreSQL programs run as when the calling
// process is root (PostgreSQL refuses root): a system user of its own,
// with no login shell and no home, created when missing as a package's
// install step creates its user. Never a shared user such as nobody,
// whose other processes could then read the cluster's files.
const SystemUser = "ledger-postgres"

// credential is who the PostgreSQL programs run as; nil means the
// calling user.
type credential struct {
	name     string
	uid, gid uint32
}

// needUnprivileged reports whether initdb and postgres would refuse to
// run as the current user.
func needUnprivileged() bool { return os.Geteuid() == 0 }

// systemUser returns the credential of SystemUser, creating the user
// (and its group) when missing; log hears of a creation.
func systemUser(log io.Writer) (*credential, error) {
	c, err := lookupUser(SystemUser)
	if err == nil {
		return c, nil
	}
	var unknown user.UnknownUserError
	if !errors.As(err, &unknown) {
		return nil, err
	}
	out, addErr := addSystemUser(SystemUser)
	// Another process (a test binary beside this one) may have created
	// it meanwhile: what counts is that it exists now.
	if c, err := lookupUser(SystemUser); err == nil {
		if addErr == nil {
			fmt.Fprintf(log, "pgcluster: created the system user %s to run PostgreSQL\n", c)
		}
		return c, nil
	}
	return nil, fmt.Errorf("create the system user %s (PostgreSQL refuses to run as root): %v: %s\n"+
		"create it yourself, e.g.: useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin %s",
		SystemUser, addErr, strings.TrimSpace(out), SystemUser)
}

// addSystemUser runs the system's own tool: useradd (shadow-utils, on
// Debian, Red Hat, SUSE, Arch...) or BusyBox's adduser (Alpine).
func addSystemUser(name string) (string, error) {
	shell := "/bin/false"
	for _, s := range []string{"/usr/sbin/nologin", "/sbin/nologin"} {
		if fileExists(s) {
			shell = s
			break
		}
	}
	var cmd *exec.Cmd
	if path, err := exec.LookPath("useradd"); err == nil {
		cmd = exec.Command(path, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
			"--shell", shell, "--comment", "private PostgreSQL of the ledger", name)
	} else if path, err := exec.LookPath("adduser"); err == nil {
		cmd = exec.Command(path, "-S", "-D", "-H", "-h", "/nonexistent", "-s", shell, name)
	} else {
		return "", errors.New("neither useradd nor adduser is installed")
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func lookupUser(name string) (*credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: gid %q: %w", name, u.Gid, err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("user %s has uid 0: PostgreSQL refuses to run as root", name)
	}
	return &credential{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
}

func (c *credential) String() string {
	return fmt.Sprintf("%s (uid %d, gid %d)", c.name, c.uid, c.gid)
}

// apply makes cmd run as c, with no supplementary groups.
func (c *credential) apply(cmd *exec.Cmd) {
	if c == nil {
		return
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: c.uid, Gid: c.gid, Groups: []uint32{}},
	}
}

// chownAll gives root and everything below it to c (chown -R).
func (c *credential) chownAll(root string) error {
	if c == nil {
		return nil
	}
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == c.uid && st.Gid == c.gid {
			return nil
		}
		return os.Lchown(path, int(c.uid), int(c.gid))
	})
}

// ErrUnreachable: the user PostgreSQL runs as cannot reach its data
// directory through the directories above it.
var ErrUnreachable = errors.New("PostgreSQL's user cannot reach the data directory")

// checkReachable returns an error naming the first directory above dir
// that c may not search (its mode lets neither c as owner, nor c's
// group, nor others through). pgcluster never changes those modes: the
// caller must put the cluster where its user can reach it.
func (c *credential) checkReachable(dir string) error {
	if c == nil {
		return nil
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		mode := fi.Mode().Perm()
		var search bool
		switch {
		case st.Uid == c.uid:
			search = mode&0o100 != 0
		case st.Gid == c.gid:
			search = mode&0o010 != 0
		default:
			search = mode&0o001 != 0
		}
		if !search {
			return fmt.Errorf("%w: PostgreSQL runs as %s, which may not enter %s (mode %#o, owner uid %d, group gid %d) to reach %s; "+
				"pgcluster does not change the modes of directories it did not create: put the data directory under directories every user may enter (o+x), "+
				"or inside one owned by %s",
				ErrUnreachable, c, p, mode, st.Uid, st.Gid, dir, c.name)
		}
		if parent := filepath.Dir(p); parent == p {
			return nil
		}
	}
}

// owners are the uids that may own the data directory and its files:
// c's (PostgreSQL's user, as root) and the calling user's.
func (c *credential) owners() []int {
	if c == nil {
		return []int{os.Geteuid()}
	}
	return []int{int(c.uid), os.Geteuid()}
}

// ownerUID is fi's owner uid.
func ownerUID(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
