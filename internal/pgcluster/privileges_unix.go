//go:build unix

package pgcluster

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// unprivilegedName is the user the PostgreSQL programs run as when the
// calling process is root; nobodyID is its uid and gid when the user
// database does not know it.
const (
	unprivilegedName = "nobody"
	nobodyID         = 65534
)

// credential is who the PostgreSQL programs run as; nil means the
// calling user.
type credential struct {
	name     string
	uid, gid uint32
}

// needUnprivileged reports whether initdb and postgres would refuse to
// run as the current user.
func needUnprivileged() bool { return os.Geteuid() == 0 }

// lookupUnprivileged returns the credential of user nobody.
func lookupUnprivileged() *credential {
	c := &credential{name: unprivilegedName, uid: nobodyID, gid: nobodyID}
	u, err := user.Lookup(unprivilegedName)
	if err != nil {
		return c
	}
	if uid, err := strconv.ParseUint(u.Uid, 10, 32); err == nil {
		c.uid = uint32(uid)
	}
	if gid, err := strconv.ParseUint(u.Gid, 10, 32); err == nil {
		c.gid = uint32(gid)
	}
	return c
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

// makeTraversable adds o+x to every ancestor of dir that lacks it, so that
// c can reach dir, and reports each change on log.
func (c *credential) makeTraversable(dir string, log io.Writer) error {
	if c == nil {
		return nil
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			mode := fi.Mode().Perm() | 0o001
			if err := os.Chmod(p, mode); err != nil {
				return err
			}
			fmt.Fprintf(log, "pgcluster: added o+x to %s (now %#o) so that user %s can reach the data directory\n", p, mode, c.name)
		}
		if parent := filepath.Dir(p); parent == p {
			return nil
		}
	}
}
