package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections/query"
)

// healthTimeout bounds each check of /healthz.
const healthTimeout = 2 * time.Second

// healthz reports whether the ledger can do its job: NATS connected, the
// LEDGER stream present and accepting writes, PostgreSQL answering. It
// needs no token, so it says only ok or a short fixed word per part;
// the details (addresses, users, errors) go to the log.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	res := HealthResponse{Status: "ok", NATS: "ok", Stream: "ok", Postgres: "ok"}
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	if !s.nc.IsConnected() {
		res.NATS, res.Stream = "down", "unknown"
	} else if state, err := s.streamWritable(ctx); err != nil {
		res.Stream = state
		s.log.Warn("healthz: stream", "state", state, "err", err)
	}
	switch {
	case s.db == nil:
		res.Postgres = "not configured"
	default:
		if err := s.db.Ping(ctx); err != nil {
			res.Postgres = "down"
			s.log.Warn("healthz: PostgreSQL", "err", err)
		} else {
			// Pool and sequence only: /healthz needs no token, and the
			// reason (in halted_pools and the console) may say too much.
			for _, h := range s.haltedPools(ctx) {
				res.HaltedPools = append(res.HaltedPools, HaltedPool{Pool: h.Pool, Seq: h.Seq})
			}
		}
	}
	if res.NATS != "ok" || res.Stream != "ok" || (res.Postgres != "ok" && res.Postgres != "not configured") {
		res.Status = "down"
	} else if len(res.HaltedPools) > 0 {
		res.Status = "degraded" // still serving; some pools' projections stopped
	}
	status := http.StatusOK
	if res.Status == "down" {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, res)
}

// streamWritable checks that the stream exists and that an append would
// be stored: not sealed, not at its own limits, and the account not out
// of storage. It returns a one-word state for the answer.
func (s *Server) streamWritable(ctx context.Context) (string, error) {
	st, err := s.js.Stream(ctx, stream.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return "missing", err
	}
	if err != nil {
		return "down", err
	}
	info := st.CachedInfo()
	cfg, state := info.Config, info.State
	switch {
	case cfg.Sealed:
		return "not writable", errors.New("stream is sealed")
	case cfg.MaxBytes > 0 && state.Bytes >= uint64(cfg.MaxBytes):
		return "full", fmt.Errorf("stream holds %d bytes of at most %d", state.Bytes, cfg.MaxBytes)
	case cfg.MaxMsgs > 0 && state.Msgs >= uint64(cfg.MaxMsgs):
		return "full", fmt.Errorf("stream holds %d messages of at most %d", state.Msgs, cfg.MaxMsgs)
	}
	acc, err := s.js.AccountInfo(ctx)
	if err != nil {
		return "down", fmt.Errorf("account info: %w", err)
	}
	if max := acc.Limits.MaxStore; max > 0 && acc.Store >= uint64(max) {
		return "full", fmt.Errorf("account stores %d bytes of at most %d", acc.Store, max)
	}
	return "ok", nil
}

// maxHalted bounds how many halted pools /healthz, /v1/status and the
// console list: a few are an incident, thousands a bug to fix first.
const maxHalted = 1000

// haltedPools reads halted_pools (none when it cannot: a database not
// migrated yet, or down; /healthz reports PostgreSQL on its own).
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
