package api_test

import (
	"net/http"
	"testing"

	"github.com/cluster-ledger/ledger/internal/api"
)

// /healthz names the pools the projector halted, with their sequence
// (not the reason: it needs no token), and says "degraded" (the service
// still answers).
func TestHealthzNamesHaltedPools(t *testing.T) {
	base, db := readServer(t)
	var h api.HealthResponse
	if code := getJSON(t, base+"/healthz", &h); code != http.StatusOK || h.Status != "ok" || len(h.HaltedPools) != 0 {
		t.Fatalf("healthy: %d %+v", code, h)
	}
	exec(t, db, `INSERT INTO halted_pools (pool, seq, reason) VALUES ('bad', 42, 'fold failed at sequence 42: boom')`)
	h = api.HealthResponse{}
	code := getJSON(t, base+"/healthz", &h)
	if code != http.StatusOK || h.Status != "degraded" || len(h.HaltedPools) != 1 || h.HaltedPools[0] != (api.HaltedPool{Pool: "bad", Seq: 42}) {
		t.Fatalf("with a halted pool: %d %+v", code, h)
	}
}
