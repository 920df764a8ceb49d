package api_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// A ledger that starts (a restart, a new instance) folds a pool's whole
// log before its first append to it. Found in round 10 (helper-41): with
// a pool of 2,048 consumers and 4,000 hosts, the first append after a
// restart answered 503 after 11 s and the next one 200 after 24 s,
// though the read of the log is bounded by the publish timeout (5 s):
// the events already read were all folded past the deadline. Now the
// fold stops at the deadline too; what was folded stays, so each retry
// goes on from there, and the pool is taken up after a few of them.
func TestColdPoolAnswersWithinItsTimeout(t *testing.T) {
	token, tokens := testenv.Token(t, "scheduler", []auth.Scope{auth.ScopeAppend, auth.ScopePlan}, "big")
	url := testenv.NATS(t)
	l := newLedger(t, url, api.WithTokens(tokens))
	l.token = token
	var cons []map[string]any
	var leaves []string
	for g := range 20 {
		for j := range 20 {
			p := fmt.Sprintf("/g%d/l%d", g, j)
			cons = append(cons, consumer(p))
			leaves = append(leaves, p)
		}
	}
	l.mustPost("big", []any{plan(cons...)})
	var hosts []any
	for h := range 400 {
		hosts = append(hosts, hostUp(fmt.Sprintf("h%d", h), 16))
	}
	l.mustPost("big", hosts)
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		var batch []any
		for range 100 {
			d := map[string]int{}
			for _, p := range leaves {
				d[p] = rnd.IntN(40)
			}
			batch = append(batch, demand(d))
		}
		l.mustPost("big", batch)
	}
	probe := []any{demand(map[string]int{"/g0/l0": 1})}

	// A fresh instance with time enough: how long taking the pool up costs.
	full := newLedger(t, url, api.WithTokens(tokens), api.WithPublishTimeout(2*time.Minute))
	full.token = token
	start := time.Now()
	full.mustPost("big", probe)
	whole := time.Since(start)
	t.Logf("taking the pool up (2,000 events of 400 demands on 400 hosts): %v", whole)
	if whole < 500*time.Millisecond {
		t.Fatalf("the fold took %v: too little to tell a bounded answer from an unbounded one", whole)
	}

	// A fresh instance whose timeout is a tenth of that answers within
	// about its timeout, and its retries take the pool up.
	timeout := whole / 10
	cold := newLedger(t, url, api.WithTokens(tokens), api.WithPublishTimeout(timeout))
	cold.token = token
	start = time.Now()
	code, _, bad := cold.post("big", probe)
	first := time.Since(start)
	t.Logf("first append with a timeout of %v: %d after %v", timeout, code, first)
	if code != http.StatusServiceUnavailable || bad.Reason != api.ReasonUnavailable {
		t.Fatalf("first append to the cold pool: %d %+v, want 503 unavailable", code, bad)
	}
	if limit := timeout + whole/8; first > limit {
		t.Errorf("the first append answered after %v, past its timeout %v (limit %v): the fold went on past the deadline", first, timeout, limit)
	}
	for try := 1; ; try++ {
		code, _, bad = cold.post("big", probe)
		if code == http.StatusOK {
			t.Logf("taken up after %d retries", try)
			break
		}
		if code != http.StatusServiceUnavailable || try == 100 {
			t.Fatalf("retry %d: %d %+v", try, code, bad)
		}
	}
}
