package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/console"
)

// The console's endpoints that name no pool (the pools list, the live
// stream) show a read token only its pools, as the read scope promises
// (README, "Tokens and scopes"); a live stream of another pool is refused.
func TestConsoleShowsOnlyTheTokensPools(t *testing.T) {
	onlyP, e1 := mustToken(t, "p-reader", []auth.Scope{auth.ScopeRead}, "p")
	every, e2 := mustToken(t, "reader", []auth.Scope{auth.ScopeRead}, auth.AllPools)
	tokens, err := auth.New(e1, e2)
	if err != nil {
		t.Fatal(err)
	}
	base, db := readServer(t, api.WithTokens(tokens))
	exec(t, db, `INSERT INTO checkpoints (pool, last_seq, state_hash, chain_hash) VALUES ('p', 7, '\x00', '\x00'), ('q', 9, '\x00', '\x00')`)
	// Pools on both sides of p, more than a page: a token of p still gets
	// p alone, on one page.
	exec(t, db, `INSERT INTO checkpoints (pool, last_seq, state_hash, chain_hash)
		SELECT x || lpad(i::text, 3, '0'), i + 10, '\x00', '\x00' FROM generate_series(0, 149) i, (VALUES ('o'), ('r')) v(x)`)

	pools := func(token string) ([]string, string) {
		t.Helper()
		resp, raw := send(t, http.MethodGet, base+"/v1/pools", "", token, nil)
		var res console.PoolsResponse
		if resp.StatusCode != 200 || json.Unmarshal(raw, &res) != nil {
			t.Fatalf("GET /v1/pools: %d %s", resp.StatusCode, raw)
		}
		var names []string
		for _, p := range res.Pools {
			names = append(names, p.Pool)
		}
		return names, res.After
	}
	if got, after := pools(onlyP); strings.Join(got, ",") != "p" || after != "" {
		t.Errorf("pools list for a token of pool p: %q (next page after %q), want p alone", got, after)
	}
	if got, after := pools(every); len(got) != console.DefaultPoolsLimit || got[0] != "o000" || after != "o099" {
		t.Errorf("pools list for a token of every pool: %d pools from %q, next page after %q; want the first %d", len(got), got[0], after, console.DefaultPoolsLimit)
	}
	resp, raw := send(t, http.MethodGet, base+"/v1/pools/q", "", onlyP, nil)
	errorOf(t, "pool q for a token of pool p", resp, raw, 403, "pool_not_allowed")

	// The live stream of q is refused; the stream of every pool carries p only.
	resp, raw = getWithin(t, 5*time.Second, base+"/v1/live?pool=q", onlyP)
	errorOf(t, "live stream of q for a token of pool p", resp, raw, 403, "pool_not_allowed")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/live", nil)
	req.Header.Set("Authorization", "Bearer "+onlyP)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("live stream: %d", res.StatusCode)
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() { // until the context ends the stream
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev console.LiveEvent
			if json.Unmarshal([]byte(data), &ev) == nil {
				seen[ev.Pool] = true
			}
		}
	}
	if !seen["p"] || seen["q"] {
		t.Errorf("live stream for a token of pool p carried %v, want p only", seen)
	}
}

// getWithin GETs url with token ("" for the server's default) and fails
// the test when no whole answer comes within d (a read that hangs, or a
// stream opened where a refusal was due).
func getWithin(t *testing.T, d time.Duration, url, token string) (*http.Response, []byte) {
	t.Helper()
	rq, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		rq.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: d}).Do(rq)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp, raw
}
