package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/testservice"
)

// TestConsoleWhatIf drives the "what if" panel in headless Chromium
// against the whole service, with a reader's token (read scope only):
// seed 001 after its second example (/A holds 20, /B/B1 80); giving /A
// four times /B's share shows /A 20 -> 80 and /B/B1 80 -> 20 with the
// reclaim in words, then /B/B2 asking for 100 shows it taking 60 from
// /B/B1; nothing is appended and the pool's page still shows the log's
// state.
func TestConsoleWhatIf(t *testing.T) {
	const pool = "seed001"
	s := testservice.Start(t, testservice.Config{Pools: []string{pool}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sc, err := scenario.ParseFile(seed001)
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	send := func(p events.Payload) {
		role := testservice.Planner
		if p.EventType() == events.TypeDemand || p.EventType() == events.TypeRelease {
			role = testservice.Producer
		}
		ev, err := client.NewEvent(p)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Client(role).Append(ctx, pool, ev)
		if err != nil {
			t.Fatal(err)
		}
		last = res[0].Seq
	}
	for _, ev := range sc.Setup() {
		send(ev.Payload)
	}
	for _, st := range sc.Steps[:2] {
		for _, ev := range st.Events {
			send(ev.Payload)
		}
	}
	if err := s.WaitProjected(ctx, pool, last); err != nil {
		t.Fatal(err)
	}
	before, err := s.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}

	b := browser(t)
	run(t, b, "open the pool page with the reader's token",
		chromedp.Navigate(s.URL+"/console/#/pool/"+pool),
		chromedp.WaitVisible(`#token-input`),
		chromedp.SendKeys(`#token-input`, s.Token(testservice.Reader)),
		chromedp.Click(`#token-ok`),
		waitText(alloc("/A"), "20"),
		waitText(alloc("/B/B1"), "80"),
	)
	edit := func(path, field string) string {
		return fmt.Sprintf(`#wi-form tr[data-path=%q] input[name=%s]`, path, field)
	}
	after := func(path, k string) string {
		return fmt.Sprintf(`#wi-tree [data-path=%q] [data-k="after-%s"]`, path, k)
	}
	beforeOf := func(path, k string) string {
		return fmt.Sprintf(`#wi-tree [data-path=%q] [data-k="before-%s"]`, path, k)
	}
	run(t, b, "open the what-if panel",
		chromedp.Click(`#wi-open`),
		chromedp.WaitVisible(edit("/A", "share")),
		waitValue(edit("/A", "share"), "1"),
		waitValue(edit("/B", "share"), "4"),
		waitValue(edit("/B/B2", "demand"), "0"),
	)
	run(t, b, "give /A four times /B's share",
		chromedp.SetValue(edit("/A", "share"), "4"),
		chromedp.SetValue(edit("/B", "share"), "1"),
		chromedp.Click(`#wi-run`),
		waitText(after("/A", "allocated"), "80"),
		waitText(beforeOf("/A", "allocated"), "20"),
		waitText(after("/A", "target"), "80"),
		waitText(after("/B/B1", "allocated"), "20"),
		waitText(beforeOf("/B/B1", "allocated"), "80"),
		chromedp.WaitVisible(`#wi-tree .wi-row.changed[data-path="/A"] [data-side="after"] .track .alloc`),
	)
	if got := text(t, b, `#wi-decisions`); !strings.Contains(got, "/A reclaimed 60 slots from /B/B1") || !strings.Contains(got, "[share_ratio.reclaim]") {
		t.Errorf("the panel's decisions: %q", got)
	}
	if got := text(t, b, `#wi-appended`); got != "nothing appended" {
		t.Errorf("the panel says %q", got)
	}
	screenshot(t, b, "pool-seed001-what-if-shares")

	run(t, b, "back to the plan; /B/B2 asks for 100",
		chromedp.Click(`#wi-reset`),
		waitValue(edit("/A", "share"), "1"),
		chromedp.SetValue(edit("/B/B2", "demand"), "100"),
		chromedp.Click(`#wi-run`),
		waitText(after("/B/B2", "allocated"), "60"),
		waitText(after("/B/B1", "allocated"), "20"),
		waitText(after("/A", "allocated"), "20"),
	)
	if got := text(t, b, `#wi-decisions`); !strings.Contains(got, "/B/B2 reclaimed 60 slots from /B/B1") {
		t.Errorf("the panel's decisions: %q", got)
	}
	screenshot(t, b, "pool-seed001-what-if-demand")

	// Nothing was appended; the page still shows the log's state.
	if got, err := s.LastSeq(ctx); err != nil || got != before {
		t.Errorf("the stream's last sequence is %d (%v), was %d: the panel appended", got, err, before)
	}
	run(t, b, "the tree is the log's", waitText(alloc("/A"), "20"), waitText(alloc("/B/B1"), "80"))
}

// waitValue waits until the input of sel holds want.
func waitValue(sel, want string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](`(() => { const e = document.querySelector(`+jsString(sel)+`); return !!e && e.value === `+jsString(want)+`; })()`,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))
}
