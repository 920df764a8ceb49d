package api_test

import (
	"net/http"
	"testing"

	"github.com/cluster-ledger/ledger/internal/api"
)

// /readyz names the pools the projector halted, with their sequence
// (not the reason: it needs no token), and says "degraded" (still
// ready: the other pools' reads are current).
func TestReadyzNamesHaltedPools(t *testing.T) {
	base, db := readServer(t)
	var r api.ReadyResponse
	if code := getJSON(t, base+"/readyz", &r); code != http.StatusOK || r.Status != "ok" || len(r.HaltedPools) != 0 {
		t.Fatalf("healthy: %d %+v", code, r)
	}
	exec(t, db, `INSERT INTO halted_pools (pool, seq, reason) VALUES ('bad', 42, 'fold failed at sequence 42: boom')`)
	r = api.ReadyResponse{}
	pastProbeCache()
	code := getJSON(t, base+"/readyz", &r)
	if code != http.StatusOK || r.Status != "degraded" || len(r.HaltedPools) != 1 || r.HaltedPools[0] != (api.ReadyHaltedPool{Pool: "bad", Seq: 42}) {
		t.Fatalf("with a halted pool: %d %+v", code, r)
	}
}
