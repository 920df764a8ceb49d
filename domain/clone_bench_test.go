package domain_test

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
)

// BenchmarkClone is the copy an array append folds on (internal/api), of
// a busy pool without and with ownership.
func BenchmarkClone(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			p, _, _ := benchPool(b, n, events.Policy{})
			benchClone(b, p)
		})
		b.Run("owned/"+strconv.Itoa(n), func(b *testing.B) {
			p, _, _, _ := ownedBenchPool(b, n, events.Policy{})
			benchClone(b, p)
		})
	}
}

func benchClone(b *testing.B, p *domain.Pool) {
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for range b.N {
		_ = p.Clone()
	}
	// CPU time as well as wall time: on a shared machine the wall time
	// also counts the waits for a core.
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's CPU time so far (user and system, every
// thread: the collector's work counts).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
