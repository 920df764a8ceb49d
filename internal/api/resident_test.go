package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestResidentPoolViews: with room for 3 pools' views, a ledger appending
// to 12 pools holds at most 3, and a pool it let go is folded from the
// log again at its next append: its state (a release beyond what a leaf
// holds is refused, one within is not), its sequences and its duplicate
// window (a retried id is answered as stored) are as if it had stayed.
func TestResidentPoolViews(t *testing.T) {
	l := newLedger(t, testenv.NATS(t), api.WithResidentPools(3))
	pools := make([]string, 12)
	for i := range pools {
		pools[i] = fmt.Sprintf("r%02d", i)
		setup(l, pools[i])
		l.mustPost(pools[i], withID(demand(map[string]int{"/a": 4 + i%3}), "first-"+pools[i]))
	}
	if n := l.srv.ResidentPools(); n > 3 {
		t.Fatalf("%d pools' views in memory, want at most 3", n)
	}
	for i, pool := range pools {
		// Let go long ago: folded again from the log.
		code, _, bad := l.post(pool, release("/a", 5+i%3))
		if code != http.StatusUnprocessableEntity || bad.Reason != "release_too_many" {
			t.Errorf("pool %s: release of more than /a holds: %d %+v, want 422 release_too_many", pool, code, bad)
		}
		res := l.mustPost(pool, withID(demand(map[string]int{"/a": 4 + i%3}), "first-"+pool))
		if !res.Events[0].Duplicate {
			t.Errorf("pool %s: the retried id was appended again: %+v", pool, res.Events[0])
		}
		res = l.mustPost(pool, release("/a", 1))
		if ev := poolEvents(t, l.js, pool); res.Events[0].Seq != ev[len(ev)-1].seq || len(ev) != 4 {
			t.Errorf("pool %s: the release got sequence %d; the pool's events are %d, the last at %d", pool, res.Events[0].Seq, len(ev), ev[len(ev)-1].seq)
		}
		if n := l.srv.ResidentPools(); n > 3 {
			t.Fatalf("%d pools' views in memory, want at most 3", n)
		}
	}
}
