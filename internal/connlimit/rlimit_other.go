//go:build !unix

package connlimit

// RaiseFileLimit: outside Unix there is no RLIMIT_NOFILE; the budget
// assumes the 16,384 handles a Windows process opens comfortably.
func RaiseFileLimit() (uint64, error) { return 16384, nil }
