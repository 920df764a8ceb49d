package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/internal/api"
)

// addHTTPLimitFlags adds the flags of the HTTP server's bounds (README,
// "HTTP limits"): connections, and what one token may take.
func addHTTPLimitFlags(cmd *cobra.Command, conns *api.ConnLimits, tokens *api.TokenLimits) {
	*tokens = api.DefaultTokenLimits
	fs := cmd.Flags()
	fs.IntVar(&conns.Max, "max-conns", 0, "most HTTP connections at once (0: the file descriptors the process may open, less a reserve for NATS, PostgreSQL and files); past it new connections wait")
	fs.IntVar(&conns.Unauthenticated, "max-unauthenticated-conns", 0, "most HTTP connections that have not presented a valid token (0: half of --max-conns); past it the oldest of them is closed")
	fs.Float64Var(&tokens.Rate, "token-rate", tokens.Rate, "requests a second one token may make, sustained (0: no limit); past it 429 rate_limited with Retry-After")
	fs.IntVar(&tokens.Burst, "token-burst", tokens.Burst, "requests one token may make at once above --token-rate")
	fs.IntVar(&tokens.Concurrent, "token-concurrency", tokens.Concurrent, "requests of one token in progress at once (0: no limit); past it 429 too_many_requests")
	fs.IntVar(&tokens.Streams, "token-streams", tokens.Streams, "live streams (console pages following a pool) one token may hold open (0: no limit); past it 429 too_many_streams")
	fs.IntVar(&tokens.Conns, "token-conns", tokens.Conns, "keep-alive connections one token may hold (0: no limit); past it a connection the token authenticates is closed after its answer and may be evicted for a newer one")
}

// checkHTTPLimits refuses a bound below zero, naming its flag: 0 leaves a
// bound to its default or off, as each flag says, and a negative value
// would be taken as the same without a word (a negative --token-rate
// turned the per-token rate limit off).
func checkHTTPLimits(conns api.ConnLimits, tokens api.TokenLimits) error {
	for _, f := range []struct {
		name  string
		value float64
	}{
		{"--max-conns", float64(conns.Max)}, {"--max-unauthenticated-conns", float64(conns.Unauthenticated)},
		{"--token-rate", tokens.Rate}, {"--token-burst", float64(tokens.Burst)}, {"--token-concurrency", float64(tokens.Concurrent)},
		{"--token-streams", float64(tokens.Streams)}, {"--token-conns", float64(tokens.Conns)},
	} {
		if f.value < 0 {
			return fmt.Errorf("%s %v: want 0 or more (0: as the flag's help says)", f.name, f.value)
		}
	}
	return nil
}
