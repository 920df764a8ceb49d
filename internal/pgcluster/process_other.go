//go:build !unix

package pgcluster

func processAlive(pid int) bool { return pid > 0 }
func processGone(pid int) bool  { return true }
