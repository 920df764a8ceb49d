//go:build !unix

package pgcluster

func processAlive(pid int) bool { return pid > 0 }
func processGone(pid int) bool  { return true }

func processAnonMemory(pid int) (int64, bool) { return 0, false }
