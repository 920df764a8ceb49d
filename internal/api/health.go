package api

import (
	"context"
	"fmt"

	"github.com/cluster-ledger/ledger/internal/health"
	"github.com/cluster-ledger/ledger/projections/query"
)

// The probes, GET /healthz (liveness: an append would be stored) and GET
// /readyz (readiness: the projection is current), are internal/health's;
// New mounts them.

// maxHalted bounds how many halted pools /v1/status and the console
// list, as the probes do.
const maxHalted = health.MaxHalted

// haltedPools reads halted_pools (none when it cannot: a database not
// migrated yet, or down; status reports PostgreSQL on its own).
func (s *Server) haltedPools(ctx context.Context) []HaltedPool {
	rows, err := query.HaltedPools(ctx, s.db, maxHalted)
	if err != nil {
		return nil
	}
	out := make([]HaltedPool, len(rows))
	for i, h := range rows {
		out[i] = HaltedPool{Pool: h.Pool, Seq: h.Seq, Reason: h.Reason}
	}
	return out
}

// haltedByPool is halted_pools as the console wants it: pool -> reason.
func (s *Server) haltedByPool(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, h := range s.haltedPools(ctx) {
		out[h.Pool] = fmt.Sprintf("halted at sequence %d: %s", h.Seq, h.Reason)
	}
	return out, nil
}
