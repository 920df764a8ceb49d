//go:build unix

package pgcluster

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processAlive reports whether pid runs and is not a zombie (a killed
// postmaster that its new parent has not reaped yet still answers kill 0,
// so pg_ctl status calls it running).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		// pid (comm) state ...; comm may contain spaces and parentheses.
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
			return s[i+2] != 'Z'
		}
		return true
	} else if _, statErr := os.Stat("/proc/self"); statErr == nil {
		return false // /proc works and has no such process
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// processGone reports whether pid has disappeared entirely (reaped).
func processGone(pid int) bool {
	if pid <= 0 {
		return true
	}
	err := syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}

// processAnonMemory is the private memory pid holds (RssAnon of
// /proc/PID/status: its heap and anonymous mappings, not the shared
// buffers every backend maps nor its files), in bytes; ok is false where
// /proc cannot tell it (not Linux, or the process is gone).
func processAnonMemory(pid int) (bytes int64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, found := strings.CutPrefix(line, "RssAnon:"); found {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, false
			}
			return kb << 10, true
		}
	}
	return 0, false
}
