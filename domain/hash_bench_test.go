package domain_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
)

// BenchmarkChain: the hash chain's link of a demand event's Result on a
// 1,000-leaf pool (what every reader computes per event), and of a host
// event's (every consumer and host).
func BenchmarkChain(b *testing.B) {
	p, leaves, rng := benchPool(b, 1000, benchPolicies[2].policy)
	raw := make([]byte, 300) // about a stored demand envelope
	var results []domain.Result
	seq := p.Seq()
	for i := range 64 {
		seq++
		r, err := p.Apply(domain.Event{Seq: seq, Time: time.Unix(int64(seq), 0),
			Payload: &events.Demand{Demands: map[string]int64{leaves[rng.IntN(len(leaves))]: int64(i % 7)}}})
		if err != nil {
			b.Fatal(err)
		}
		results = append(results, r)
	}
	seq++
	host, err := p.Apply(domain.Event{Seq: seq, Time: time.Unix(int64(seq), 0), Payload: &events.HostDown{Host: fmt.Sprintf("h%05d", 3)}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("demand", func(b *testing.B) {
		b.ReportAllocs()
		var link domain.Hash
		for i := 0; b.Loop(); i++ {
			link = domain.Chain(link, raw, &results[i%len(results)])
		}
	})
	b.Run("host", func(b *testing.B) {
		b.ReportAllocs()
		var link domain.Hash
		for b.Loop() {
			link = domain.Chain(link, raw, &host)
		}
	})
}
