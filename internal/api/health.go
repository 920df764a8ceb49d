package api

import (
	"context"
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
		}
	}
	status := http.StatusOK
	if res.Status != "ok" {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, res)
}
