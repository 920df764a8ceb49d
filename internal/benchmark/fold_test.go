package benchmark

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections"
)

// BenchmarkReplayFold is phase 4(b) without NATS: decode a stored
// message, fold it and chain it, per event.
func BenchmarkReplayFold(b *testing.B) {
	var raws [][]byte
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	add := func(p events.Payload) {
		env, err := events.New(fmt.Sprint(len(raws)), "bench", "bench", at.Add(time.Duration(len(raws))*time.Millisecond), p)
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := json.Marshal(env)
		raws = append(raws, raw)
	}
	for _, p := range setup() {
		add(p)
	}
	g := newGenerator(1)
	for n := len(raws) + max(b.N, 1000); len(raws) < n; {
		add(g.next())
	}
	pool, prev := domain.NewPool("bench"), domain.Hash{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < len(raws); i++ {
		_, st, _ := projections.DecodeMessage(uint64(i+1), stream.Subject("bench", events.TypeDemand), at, raws[i])
		_, prev, _ = projections.Fold(pool, st, prev)
	}
}
