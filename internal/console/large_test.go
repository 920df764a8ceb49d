package console_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cluster-ledger/ledger/events"
)

// largePool gives pool a plan of 10 departments of 100 leaves each, 40
// hosts of 32 slots, and demand for every leaf; it returns the last
// sequence.
func largePool(t *testing.T, s *service, pool string) uint64 {
	t.Helper()
	plan := &events.PlanChange{Plan: events.Plan{Policy: events.Policy{Reclaim: events.ReclaimShareRatio}}}
	demands := map[string]int64{}
	for d := range 10 {
		share := int64(d + 1)
		plan.Plan.Consumers = append(plan.Plan.Consumers, events.Consumer{Path: fmt.Sprintf("/dept%02d", d), Share: &share})
		for l := range 100 {
			path := fmt.Sprintf("/dept%02d/app%03d", d, l)
			plan.Plan.Consumers = append(plan.Plan.Consumers, events.Consumer{Path: path})
			demands[path] = int64(1 + (d*100+l)%3)
		}
	}
	ps := []events.Payload{plan}
	for h := range 40 {
		ps = append(ps, &events.HostUp{Host: fmt.Sprintf("h%02d", h), Slots: 32})
	}
	ps = append(ps, &events.Demand{Demands: demands})
	seqs := s.send(t, pool, ps...)
	last := seqs[len(seqs)-1]
	s.waitProjected(t, pool, last)
	return last
}

// TestThousandLeafPoolPage: the pool page of a 1,000-leaf pool is drawn
// (fetched and rendered, from navigation start) in under a second.
func TestThousandLeafPoolPage(t *testing.T) {
	s := newService(t)
	pool := "big"
	largePool(t, s, pool)
	ctx := browser(t)
	// Warm the browser once (process start, first layout), as an operator's
	// browser is; then measure fresh loads of the page. The best of five
	// is judged: the machine is shared, and a load that other processes
	// slow down says nothing about the page.
	run(t, ctx, "warm up", chromedp.Navigate(s.url+"/console/#/"), chromedp.WaitVisible(`tr[data-pool="big"]`))
	var best float64
	for i := range 5 {
		// A new URL each time (the query), so the page loads afresh.
		page := fmt.Sprintf("%s/console/?load=%d#/pool/%s", s.url, i, pool)
		if err := loadPage(ctx, page); err != nil {
			t.Fatalf("open the 1,000-leaf pool: %v", err)
		}
		ms, rows := renderStats(t, ctx)
		if rows != 1010 {
			t.Fatalf("a tree of %d consumers drawn, want 1010 (10 parents, 1000 leaves)", rows)
		}
		t.Logf("load %d: page fetched and drawn %.0f ms after navigation start", i+1, ms)
		if i == 0 || ms < best {
			best = ms
		}
	}
	if best >= 1000 {
		t.Errorf("the 1,000-leaf pool page took %.0f ms at best, want under 1000", best)
	}
	screenshot(t, ctx, "pool-1000-leaves")
	// The tree is a virtual list: scrolled to the end, it shows the last leaf.
	run(t, ctx, "scroll to the last leaf",
		chromedp.Func(func(c context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[int](`(() => { const e = document.getElementById('tree'); e.scrollTop = e.scrollHeight; return e.scrollTop; })()`)(c, tg)
			return err
		}),
		chromedp.WaitVisible(`#tree [data-path="/dept09/app099"] [data-k="allocated"]`),
	)
}

// loadPage navigates to page and waits until it is drawn. Chromium may
// answer a poll issued while the new document replaces the old one with
// "Cannot find context"; the poll is then issued again.
func loadPage(ctx context.Context, page string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		return err
	}
	for {
		err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](`!!document.getElementById('app').dataset.rendered`, chromedp.WithPollingTimeout(10*time.Second)))
		if err == nil || !strings.Contains(err.Error(), "Cannot find context") || ctx.Err() != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func renderStats(t *testing.T, ctx context.Context) (float64, int) {
	t.Helper()
	var raw string
	var rows int
	run(t, ctx, "read render stats", chromedp.Func(func(c context.Context, tg *chromedp.Target) error {
		var err error
		if raw, err = chromedp.Evaluate[string](`document.getElementById('app').dataset.rendered`)(c, tg); err != nil {
			return err
		}
		rows, err = chromedp.Evaluate[int](`Number(document.getElementById('tree').dataset.rows)`)(c, tg)
		return err
	}))
	ms, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		t.Fatalf("render time %q: %v", raw, err)
	}
	return ms, rows
}
