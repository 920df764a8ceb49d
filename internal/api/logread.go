package api

import (
	"context"
	"fmt"

	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections"
)

// readLog calls fn with each message of pool stored from sequence from up
// to to, in order, decoded and authenticated against the trusted keys as
// the projector does (projections.ReadDecoded: over every core, ahead of
// fn), read with direct gets (stream.Read): the ledger's identity may
// create no consumer (internal/natsauth), so no number of reads, the
// API's catch-ups or what-ifs, can fill the server's consumer limit or
// leave anything behind. An error of fn ends the read.
func (s *Server) readLog(ctx context.Context, pool string, from, to uint64, fn func(*projections.Decoded) error) error {
	if from > to {
		return nil
	}
	err := projections.ReadDecoded(ctx, s.nc, s.trusted, nil, stream.PoolFilter(pool), from, to, fn)
	if err != nil {
		return fmt.Errorf("read pool %s from %d: %w", pool, from, err)
	}
	return nil
}
