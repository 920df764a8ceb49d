package console_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/console"
	"github.com/cluster-ledger/ledger/internal/scenario"
)

// view is what the console shows of a pool at one point, in a form both
// the engine and the as-of endpoint give.
type view struct {
	consumers map[string]string // path -> "leaf alloc demand"
	hosts     map[string]string // name -> "up slots: consumer n, ..."
}

func engineView(p *domain.Pool) view {
	v := view{consumers: map[string]string{}, hosts: map[string]string{}}
	for _, c := range p.Consumers() {
		v.consumers[c.Path] = fmt.Sprintf("leaf=%t allocated=%d demand=%d", c.Leaf, c.Allocated, c.Demand)
	}
	held := map[string][]string{}
	for _, a := range p.Allocations() {
		if a.Slots > 0 {
			held[a.Host] = append(held[a.Host], fmt.Sprintf("%s %d", a.Consumer, a.Slots))
		}
	}
	for _, h := range p.Hosts() {
		v.hosts[h.Name] = hostLine(h.Up, h.Slots, held[h.Name])
	}
	return v
}

func asOfView(a *console.AsOfResponse) view {
	v := view{consumers: map[string]string{}, hosts: map[string]string{}}
	for _, c := range a.Consumers {
		v.consumers[c.Path] = fmt.Sprintf("leaf=%t allocated=%d demand=%d", c.Leaf, c.Allocated, c.Demand)
	}
	for _, h := range a.Hosts {
		var held []string
		for _, x := range h.Holders {
			held = append(held, fmt.Sprintf("%s %d", x.Consumer, x.Slots))
		}
		v.hosts[h.Name] = hostLine(h.Up, h.Slots, held)
	}
	return v
}

func hostLine(up bool, slots int64, held []string) string {
	slicesSort(held)
	return fmt.Sprintf("up=%t slots=%d: %s", up, slots, strings.Join(held, ", "))
}

func diffViews(got, want view) []string {
	var out []string
	for _, m := range []struct {
		what      string
		got, want map[string]string
	}{{"consumer", got.consumers, want.consumers}, {"host", got.hosts, want.hosts}} {
		for k, w := range m.want {
			if g := m.got[k]; g != w {
				out = append(out, fmt.Sprintf("%s %s: got %q, want %q", m.what, k, g, w))
			}
		}
		for k, g := range m.got {
			if _, ok := m.want[k]; !ok {
				out = append(out, fmt.Sprintf("%s %s: got %q, the engine has none", m.what, k, g))
			}
		}
	}
	return out
}

var nonToken = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// TestAsOfFollowsTheEngine loads the seed, rule and error scenarios through the
// service and checks the time-travel view after every event (allocation
// and demand of every consumer, hosts and who holds their slots) against
// the engine folding the same events in memory.
func TestAsOfFollowsTheEngine(t *testing.T) {
	s := newService(t)
	seeds, _ := filepath.Glob("../../test/scenarios/seed/*.yaml")
	rules, _ := filepath.Glob("../../test/scenarios/rules/*.yaml")
	refusals, _ := filepath.Glob("../../test/scenarios/errors/*.yaml")
	files := append(append(seeds, rules...), refusals...)
	if len(files) < 10 {
		t.Fatalf("found %d scenario files", len(files))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	checked := 0
	for _, file := range files {
		sc, err := scenario.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		pool := nonToken.ReplaceAllString(strings.TrimSuffix(filepath.Base(file), ".yaml"), "_")
		p := domain.NewPool(pool)
		want := map[uint64]view{}
		evs := sc.Events()
		var last uint64
		for _, ev := range evs {
			req, err := client.NewEvent(ev.Payload)
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.c.Append(ctx, pool, req)
			if client.IsRefused(err) {
				continue // refused: nothing appended
			}
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			last = res[0].Seq
			if _, err := p.Apply(domain.Event{Seq: last, Time: time.Unix(int64(last), 0), Payload: ev.Payload}); err != nil {
				t.Fatalf("%s: the engine refuses what the ledger appended: %v", file, err)
			}
			want[last] = engineView(p)
		}
		s.waitProjected(t, pool, last)
		for seq, w := range want {
			var a console.AsOfResponse
			getJSON(t, s.url+fmt.Sprintf("/v1/pools/%s/as-of?seq=%d", pool, seq), "", &a)
			if a.Seq != seq {
				t.Fatalf("%s: as of %d answered seq %d", file, seq, a.Seq)
			}
			for _, d := range diffViews(asOfView(&a), w) {
				t.Errorf("%s as of seq %d: %s", filepath.Base(file), seq, d)
			}
			checked++
		}
	}
	t.Logf("%d points of %d scenarios checked", checked, len(files))
}
