//go:build linux

package benchmark

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// pgCPU is the CPU time the private PostgreSQL has used so far: its
// postmaster, the backends it has reaped and those still running (0 when
// bench uses a server of its own, or it cannot be read). A difference of
// two readings is what a step cost PostgreSQL: a backend that exits in
// between moves from the running ones into the reaped.
func (b *bench) pgCPU() time.Duration {
	if b.pg == nil {
		return 0
	}
	raw, err := os.ReadFile(filepath.Join(b.dir, "pg", "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid := strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0])
	own, _, ok := procTimes(pid)
	if !ok {
		return 0
	}
	total := own
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' || p.Name() == pid {
			continue
		}
		if t, parent, ok := procTimes(p.Name()); ok && parent == pid {
			total += t
		}
	}
	return total
}

// procTimes reads a process's CPU time (its own, and its reaped
// children's) and its parent's pid from /proc/<pid>/stat.
func procTimes(pid string) (time.Duration, string, bool) {
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, "", false
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')') // the command may hold spaces
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(s[i+1:]) // from field 3, state
	if len(f) < 15 {
		return 0, "", false
	}
	var ticks int64
	for _, k := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime: fields 14-17
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return 0, "", false
		}
		ticks += v
	}
	return time.Duration(ticks) * clockTick, f[1], true
}
