package console_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/testservice"
)

const ownLendReturn = "../scenario/testdata/ownership/own-lend-return.yaml"

// TestConsoleTimeTravelOwnLendReturn: the README's own-lend-return
// example (/A owns h1 and borrows /B's idle h2; /B takes h2 back on
// demand) loaded through the service as its planner and producer, then
// stepped through in Chromium with the reader's token: after every event
// the tree and the hosts (who holds how many slots where, lent and
// returned slots included) are those of the engine folding the same
// events in memory. The console's past is the engine's own state, forked
// from the log (earlier it added up decisions in SQL and missed lends and
// returns).
func TestConsoleTimeTravelOwnLendReturn(t *testing.T) {
	const pool = "ownlend"
	s := testservice.Start(t, testservice.Config{Pools: []string{pool}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sc, err := scenario.ParseFile(ownLendReturn)
	if err != nil {
		t.Fatal(err)
	}
	mirror := domain.NewPool(pool)
	type point struct {
		seq   uint64
		alloc map[string]int64    // consumer -> allocated
		hosts map[string][]string // host -> "consumer slots", sorted
	}
	var points []point
	for _, ev := range sc.Events() {
		role := testservice.Planner
		if t := ev.Payload.EventType(); t == events.TypeDemand || t == events.TypeRelease {
			role = testservice.Producer
		}
		req, err := client.NewEvent(ev.Payload)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Client(role).Append(ctx, pool, req)
		if err != nil {
			t.Fatal(err)
		}
		seq := res[0].Seq
		if _, err := mirror.Apply(domain.Event{Seq: seq, Time: time.Unix(int64(seq), 0), Payload: domain.StampRules(ev.Payload)}); err != nil {
			t.Fatal(err)
		}
		pt := point{seq: seq, alloc: map[string]int64{}, hosts: map[string][]string{}}
		for _, c := range mirror.Consumers() {
			pt.alloc[c.Path] = c.Allocated
		}
		for _, a := range mirror.Allocations() {
			pt.hosts[a.Host] = append(pt.hosts[a.Host], fmt.Sprintf("%s %d", a.Consumer, a.Slots))
		}
		points = append(points, pt)
	}
	last := points[len(points)-1].seq
	if err := s.WaitProjected(ctx, pool, last); err != nil {
		t.Fatal(err)
	}
	// The decisions of the log have lends and returns: the example tests
	// what it means to.
	var lends, returns int
	if err := s.DB.QueryRow(ctx, `SELECT count(*) FILTER (WHERE kind = 'lend'), count(*) FILTER (WHERE kind = 'return') FROM decisions WHERE pool = $1`, pool).Scan(&lends, &returns); err != nil {
		t.Fatal(err)
	}
	if lends == 0 || returns == 0 {
		t.Fatalf("the example made %d lends and %d returns, want some of each", lends, returns)
	}

	b := browser(t)
	run(t, b, "open the pool page with the reader's token",
		chromedp.Navigate(s.URL+"/console/#/pool/"+pool),
		chromedp.WaitVisible(`#token-input`),
		chromedp.SendKeys(`#token-input`, s.Token(testservice.Reader)),
		chromedp.Click(`#token-ok`),
		waitText(`#head [data-k="seq"]`, fmt.Sprint(last)),
	)
	for i := len(points) - 1; i >= 0; i-- {
		pt := points[i]
		run(t, b, fmt.Sprintf("travel to seq %d", pt.seq),
			chromedp.Navigate(s.URL+fmt.Sprintf("/console/#/pool/%s?at=%d", pool, pt.seq)),
			chromedp.Reload(),
			waitText(`#tt-where [data-k="asof"]`, fmt.Sprint(pt.seq)),
		)
		for path, n := range pt.alloc {
			run(t, b, fmt.Sprintf("seq %d: %s holds %d", pt.seq, path, n), waitText(alloc(path), fmt.Sprint(n)))
		}
		for host, want := range pt.hosts {
			var got []string
			run(t, b, fmt.Sprintf("seq %d: the holders of %s", pt.seq, host), chromedp.Func(func(c context.Context, tg *chromedp.Target) error {
				var err error
				got, err = chromedp.Evaluate[[]string](fmt.Sprintf(`[...document.querySelectorAll('#hosts .host[data-host=%q] li')].map(li => li.dataset.consumer + ' ' + li.querySelector('b').textContent)`, host))(c, tg)
				return err
			}))
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("as of seq %d, host %s shows holders %v; the engine has %v", pt.seq, host, got, want)
			}
		}
		if i == len(points)-2 {
			screenshot(t, b, "pool-own-lend-return-as-of")
		}
	}
}
