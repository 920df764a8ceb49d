package api

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"net/http"
	"time"
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	res := HealthResponse{Status: "ok", NATS: "ok", Postgres: "ok"}
	if !s.nc.IsConnected() {
		res.NATS = "down: " + s.nc.Status().String()
		res.Status = "down"
	}
	switch {
	case s.db == nil:
		res.Postgres = "not configured"
	default:
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.db.Ping(ctx); err != nil {
			res.Postgres = "down: " + err.Error()
			res.Status = "down"
		} else if halted := s.haltedPools(ctx); len(halted) > 0 {
			res.HaltedPools = halted
			if res.Status == "ok" {
				res.Status = "degraded"
			}
		}
	}
	status := http.StatusOK
	if res.Status == "down" {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, res)
}

// haltedPools reads halted_pools (none when the table is missing: a
// database not migrated yet).
func (s *Server) haltedPools(ctx context.Context) []HaltedPool {
	rows, err := s.db.Query(ctx, `SELECT pool, seq, left(reason, 500) FROM halted_pools ORDER BY pool`)
	if err != nil {
		return nil
	}
	var out []HaltedPool
	var h HaltedPool
	var seq int64
	_, _ = pgx.ForEachRow(rows, []any{&h.Pool, &seq, &h.Reason}, func() error {
		h.Seq = uint64(seq)
		out = append(out, h)
		return nil
	})
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
