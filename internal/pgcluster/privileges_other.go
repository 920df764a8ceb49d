//go:build !unix

package pgcluster

import (
	"io"
	"os/exec"
)

type credential struct{}

func needUnprivileged() bool                                  { return false }
func lookupUnprivileged() *credential                         { return nil }
func (c *credential) String() string                          { return "" }
func (c *credential) apply(*exec.Cmd)                         {}
func (c *credential) chownAll(string) error                   { return nil }
func (c *credential) makeTraversable(string, io.Writer) error { return nil }
