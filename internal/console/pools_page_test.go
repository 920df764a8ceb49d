package console_test

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/console"
)

// TestPoolsPaged: /v1/pools answers pages in name order with a cursor to
// the next one (every pool exactly once), honours a prefix, refuses bad
// paging parameters, and the console's pools list pages and filters with
// it.
func TestPoolsPaged(t *testing.T) {
	s := newService(t)
	const n = 250
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var last [n]uint64
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			last[i] = s.send(t, fmt.Sprintf("pool-%03d", i), &events.HostUp{Host: "h1", Slots: int64(i + 1)})[0]
		}()
	}
	wg.Wait()
	for i := range n {
		s.waitProjected(t, fmt.Sprintf("pool-%03d", i), last[i])
	}

	page := func(q string) console.PoolsResponse {
		t.Helper()
		var res console.PoolsResponse
		getJSON(t, s.url+"/v1/pools"+q, "", &res)
		return res
	}
	var seen []string
	after, pages := "", 0
	for {
		res := page("?after=" + url.QueryEscape(after))
		pages++
		for _, p := range res.Pools {
			seen = append(seen, p.Pool)
		}
		if want := min(console.DefaultPoolsLimit, n-len(seen)+len(res.Pools)); len(res.Pools) != want {
			t.Fatalf("page %d has %d pools, want %d", pages, len(res.Pools), want)
		}
		if res.After == "" {
			break
		}
		if res.After != res.Pools[len(res.Pools)-1].Pool {
			t.Fatalf("page %d: cursor %q is not its last pool", pages, res.After)
		}
		after = res.After
	}
	if pages != 3 || len(seen) != n {
		t.Fatalf("%d pages, %d pools; want 3 pages of every one of the %d pools", pages, len(seen), n)
	}
	for i, p := range seen {
		if want := fmt.Sprintf("pool-%03d", i); p != want {
			t.Fatalf("pool %d of the pages is %s, want %s (name order, each once)", i, p, want)
		}
	}
	if res := page("?limit=250"); len(res.Pools) != n || res.After != "" {
		t.Fatalf("one page of 250: %d pools, cursor %q", len(res.Pools), res.After)
	}
	res := page("?prefix=pool-24&limit=4")
	if len(res.Pools) != 4 || res.Pools[0].Pool != "pool-240" || res.After != "pool-243" || res.Pools[3].Capacity != 244 {
		t.Fatalf("prefix pool-24, limit 4: %+v (cursor %q)", res.Pools, res.After)
	}
	if res := page("?prefix=pool-24&after=pool-247"); len(res.Pools) != 2 || res.Pools[0].Pool != "pool-248" || res.After != "" {
		t.Fatalf("prefix pool-24 after pool-247: %+v (cursor %q)", res.Pools, res.After)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x", "?after=a.b", "?prefix=a%20b"} {
		if status, body := get(t, s.url+"/v1/pools"+q, ""); status != 400 || !strings.Contains(string(body), `"reason":"bad_request"`) {
			t.Errorf("GET /v1/pools%s: %d %s, want 400 bad_request", q, status, body)
		}
	}

	// The console: the first page, the next, then a prefix.
	ctx := browser(t)
	rows := `document.querySelectorAll('table.pools tbody tr').length`
	firstRow := `document.querySelector('table.pools tbody tr').dataset.pool`
	run(t, ctx, "the first page of pools",
		chromedp.Navigate(s.url+"/console/#/"),
		chromedp.WaitVisible(`tr[data-pool="pool-000"]`),
		chromedp.Poll[chromedp.Void](rows+` === 100`, chromedp.WithPollingTimeout(10*time.Second)),
	)
	run(t, ctx, "the next page",
		chromedp.Click(`#pools-next`),
		chromedp.WaitVisible(`tr[data-pool="pool-100"]`),
		chromedp.Poll[chromedp.Void](rows+` === 100 && `+firstRow+` === 'pool-100'`, chromedp.WithPollingTimeout(10*time.Second)),
	)
	run(t, ctx, "the pools starting with pool-24",
		chromedp.SendKeys(`#pool-prefix`, "pool-24\r"),
		chromedp.WaitVisible(`tr[data-pool="pool-249"]`),
		chromedp.Poll[chromedp.Void](rows+` === 10 && `+firstRow+` === 'pool-240' && !document.getElementById('pools-next')`, chromedp.WithPollingTimeout(10*time.Second)),
	)
	screenshot(t, ctx, "pools-paged")
}
