package console_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cluster-ledger/ledger/internal/console"
)

// TestHostsShowTheirOwners reads who owns each host on the pool page, now
// and as of an earlier event. Ownership is rules version 3, in development,
// which the ledger refuses at append; so seed 001 is loaded through the
// API and ownership rows are written beside it as the projector writes
// them (projections/ownership_test.go checks that the projector does).
func TestHostsShowTheirOwners(t *testing.T) {
	s := newService(t)
	step1, step2 := loadSeed001(t, s, "p")
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := s.db.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	// /B owns 30 slots of h1 from step 1 and 40 from step 2, /B/B1 10 of
	// them; /A owns 5 of h1 from step 1 until step 2.
	exec(`INSERT INTO ownership (pool, consumer, host, slots) VALUES ('p', '/B', 'h1', 40), ('p', '/B/B1', 'h1', 10)`)
	exec(`INSERT INTO ownership_history (pool, consumer, host, slots, valid_from_seq, valid_from_time, valid_to_seq, valid_to_time) VALUES
		('p', '/B', 'h1', 30, $1, now(), $2, now()), ('p', '/B', 'h1', 40, $2, now(), NULL, NULL),
		('p', '/B/B1', 'h1', 10, $1, now(), NULL, NULL), ('p', '/A', 'h1', 5, $1, now(), $2, now())`, int64(step1), int64(step2))

	owners := func(hosts []console.Host) string {
		out := ""
		for _, h := range hosts {
			out += fmt.Sprintf("%s:%v ", h.Name, h.Owners)
		}
		return out
	}
	var pool console.PoolResponse
	getJSON(t, s.url+"/v1/pools/p", "", &pool)
	if got, want := owners(pool.Hosts), "h1:[{/B 40} {/B/B1 10}] h2:[] "; got != want {
		t.Errorf("owners now: %s, want %s", got, want)
	}
	var a console.AsOfResponse
	getJSON(t, s.url+fmt.Sprintf("/v1/pools/p/as-of?seq=%d", step1), "", &a)
	if got, want := owners(a.Hosts), "h1:[{/B 30} {/B/B1 10} {/A 5}] h2:[] "; got != want {
		t.Errorf("owners as of step 1 (seq %d): %s, want %s", step1, got, want)
	}
	a = console.AsOfResponse{}
	getJSON(t, s.url+fmt.Sprintf("/v1/pools/p/as-of?seq=%d", step1-1), "", &a)
	if got, want := owners(a.Hosts), "h1:[] h2:[] "; got != want {
		t.Errorf("owners before step 1: %s, want %s", got, want)
	}

	// The page shows them under each host.
	ctx = browser(t)
	run(t, ctx, "open the pool page",
		chromedp.Navigate(s.url+"/console/#/pool/p"),
		waitText(`#hosts [data-host="h1"] [data-k="owners"]`, "owned by /B 40, /B/B1 10"),
	)
	if n := countOf(t, ctx, `#hosts [data-host="h2"] [data-k="owners"]`); n != 0 {
		t.Errorf("h2, owned by nobody, shows %d owner lines", n)
	}
}

func countOf(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	var n int
	run(t, ctx, "count "+sel, chromedp.Func(func(c context.Context, tg *chromedp.Target) error {
		var err error
		n, err = chromedp.Evaluate[int](`document.querySelectorAll(`+jsString(sel)+`).length`)(c, tg)
		return err
	}))
	return n
}
