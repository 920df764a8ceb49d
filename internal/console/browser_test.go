package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/scenario"
)

const seed001 = "../../test/scenarios/seed/seed-001-share-ratio-subconsumers.yaml"

// loadSeed001 sends the setup and the first two steps of seed 001 through
// the API and returns the sequences of the two steps' events.
func loadSeed001(t *testing.T, s *service, pool string) (step1, step2 uint64) {
	t.Helper()
	sc, err := scenario.ParseFile(seed001)
	if err != nil {
		t.Fatal(err)
	}
	var setup []events.Payload
	for _, ev := range sc.Setup() {
		setup = append(setup, ev.Payload)
	}
	s.send(t, pool, setup...)
	step := func(i int) uint64 {
		var ps []events.Payload
		for _, ev := range sc.Steps[i].Events {
			ps = append(ps, ev.Payload)
		}
		seqs := s.send(t, pool, ps...)
		return seqs[len(seqs)-1]
	}
	step1, step2 = step(0), step(1)
	s.waitProjected(t, pool, step2)
	return step1, step2
}

func alloc(path string) string { return fmt.Sprintf(`#tree [data-path=%q] [data-k="allocated"]`, path) }

// TestConsoleSeed001 is the console's acceptance test, in headless
// Chromium against the whole service: seed 001 loaded through the API,
// the pool page after its second example, time travel back to the first,
// a new event shown live, and the reclaim from /A explained.
func TestConsoleSeed001(t *testing.T) {
	const tok = "console-test-token"
	s := newService(t, api.WithReadMiddleware(requireToken(tok)))
	pool := "seed001"
	step1, step2 := loadSeed001(t, s, pool)
	ctx := browser(t)

	// The page itself needs no token; its first data call asks for one.
	run(t, ctx, "open the pool page and give the token",
		chromedp.Navigate(s.url+"/console/#/pool/"+pool),
		chromedp.WaitVisible(`#token-input`),
		chromedp.SendKeys(`#token-input`, tok),
		chromedp.Click(`#token-ok`),
		waitText(alloc("/B/B1"), "80"),
		waitText(alloc("/A"), "20"),
		waitText(alloc("/B"), "80"),
		waitText(`#head [data-k="seq"]`, fmt.Sprint(step2)),
		waitText(`#live`, "live"),
		chromedp.Poll[chromedp.Void](`document.getElementById('live').classList.contains('on')`, chromedp.WithPollingTimeout(10*time.Second)),
	)
	hostsShow(t, ctx, "/B/B1")
	screenshot(t, ctx, "pool-seed001")

	// Time travel: one event back is the first example.
	run(t, ctx, "step back to the first example",
		chromedp.Click(`#tt-prev`),
		waitText(`#tt-where [data-k="asof"]`, fmt.Sprint(step1)),
		waitText(alloc("/A"), "100"),
		waitText(alloc("/B/B1"), "0"),
	)
	screenshot(t, ctx, "pool-seed001-as-of-first-example")
	run(t, ctx, "step forward again, then back to now",
		chromedp.Click(`#tt-next`),
		waitText(`#tt-where [data-k="asof"]`, fmt.Sprint(step2)),
		waitText(alloc("/A"), "20"),
		chromedp.Click(`#tt-now`),
		waitText(`#head [data-k="seq"]`, fmt.Sprint(step2)),
		chromedp.Poll[chromedp.Void](`document.getElementById('app').dataset.view === 'now'`, chromedp.WithPollingTimeout(5*time.Second)),
	)

	// Live: the third example's event appears on the open page within 2 s.
	start := time.Now()
	seq3 := s.send(t, pool, &events.Demand{Demands: map[string]int64{"/A": 0}})[0]
	run(t, ctx, "the new demand event shows without reloading",
		chromedp.Poll[chromedp.Void](`document.querySelector('#head [data-k="seq"]').textContent === `+jsString(fmt.Sprint(seq3)),
			chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(2*time.Second)),
		waitText(alloc("/B/B1"), "100"),
		waitText(alloc("/A"), "0"),
	)
	t.Logf("event %d appended and shown on the open page in %v", seq3, time.Since(start).Round(time.Millisecond))
	screenshot(t, ctx, "pool-seed001-live")

	// The timeline, filtered to reclaims, and the reclaim from /A explained.
	reclaimRow := fmt.Sprintf(`#decisions tr.decision[data-kind="reclaim"][data-from="/A"][data-seq="%d"]`, step2)
	run(t, ctx, "filter the decisions and open the reclaim from /A",
		chromedp.SetValue(`#filters select[name=kind]`, "reclaim"),
		chromedp.Click(`#filters button`),
		chromedp.WaitVisible(reclaimRow),
		chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('#decisions tr.decision')].every(r => r.dataset.kind === 'reclaim')`, chromedp.WithPollingTimeout(5*time.Second)),
		chromedp.Click(reclaimRow),
		chromedp.WaitVisible(`#decisions tr.explain p.why`),
	)
	// The 80 slots come back from /A's two hosts: one decision each.
	var reclaimed int
	run(t, ctx, "sum the reclaims from /A", chromedp.Func(func(c context.Context, tg *chromedp.Target) error {
		var err error
		reclaimed, err = chromedp.Evaluate[int](`[...document.querySelectorAll(`+jsString(reclaimRow)+`)].reduce((n, r) => n + Number(r.cells[6].textContent), 0)`)(c, tg)
		return err
	}))
	if reclaimed != 80 {
		t.Errorf("the timeline shows %d slots reclaimed from /A at seq %d, want 80", reclaimed, step2)
	}
	why := text(t, ctx, `#decisions tr.explain p.why`)
	story := text(t, ctx, `#decisions tr.explain pre.story`)
	for _, want := range []string{"/B/B1 reclaimed ", " slots from /A on h", "[share_ratio.reclaim]", "a target of 80", "/A a target of 20", "/A held 100, 80 slots above its target"} {
		if !strings.Contains(why, want) {
			t.Errorf("explanation %q lacks %q", why, want)
		}
	}
	if !strings.Contains(story, "/B/B1 in pool seed001 at sequence") {
		t.Errorf("story %q does not tell /B/B1's state", story)
	}
	screenshot(t, ctx, "pool-seed001-decision-explained")

	// The pools list.
	run(t, ctx, "pools list",
		chromedp.Navigate(s.url+"/console/#/"),
		chromedp.WaitVisible(`tr[data-pool="seed001"]`),
	)
	row := text(t, ctx, `tr[data-pool="seed001"]`)
	var rules int
	if err := s.db.QueryRow(context.Background(), `SELECT rules FROM checkpoints WHERE pool = $1`, pool).Scan(&rules); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"100", "2 / 0 down", "caught up", fmt.Sprintf("v%d", rules)} {
		if !strings.Contains(row, want) {
			t.Errorf("pools row %q lacks %q", row, want)
		}
	}
	screenshot(t, ctx, "pools")
}

// hostsShow checks that some host lists consumer among its holders.
func hostsShow(t *testing.T, ctx context.Context, consumer string) {
	t.Helper()
	run(t, ctx, "hosts list "+consumer, chromedp.WaitVisible(fmt.Sprintf(`#hosts li[data-consumer=%q]`, consumer)))
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	var s string
	run(t, ctx, "read "+sel, chromedp.Func(func(c context.Context, tg *chromedp.Target) error {
		var err error
		s, err = chromedp.TextContent(sel)(c, tg)
		return err
	}))
	return s
}
