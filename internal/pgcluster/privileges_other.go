//go:build !unix

package pgcluster

import (
	"errors"
	"io"
	"io/fs"
	"os/exec"
)

// SystemUser is the user PostgreSQL runs as under root on Unix; other
// systems run it as the calling user.
const SystemUser = "ledger-postgres"

// ErrUnreachable: the user PostgreSQL runs as cannot reach its data
// directory (Unix only).
var ErrUnreachable = errors.New("PostgreSQL's user cannot reach the data directory")

type credential struct{}

func needUnprivileged() bool                          { return false }
func systemUser(io.Writer) (*credential, error)       { return nil, nil }
func (c *credential) String() string                  { return "" }
func (c *credential) apply(*exec.Cmd)                 {}
func (c *credential) chownAll(string) error           { return nil }
func (c *credential) checkReachable(dir string) error { return nil }

func (c *credential) owners() []int    { return nil }
func ownerUID(fs.FileInfo) (int, bool) { return 0, false }
