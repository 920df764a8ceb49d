//go:build !unix

package main

import "errors"

// LockFile is not used where flock is missing.
const LockFile = "ledger.lock"

var errLocked = errors.New("data directory in use")

// lockDataDir does nothing where flock is missing (not a supported
// platform for `ledger dev`'s private cluster anyway).
func lockDataDir(string) (func(), error) { return func() {}, nil }
