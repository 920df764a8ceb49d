package domain_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
)

var ownFoldRuns = flag.Int("ownfold.runs", 400, "TestOwnershipFoldProperties: random logs with ownership folded")

// TestOwnershipFoldProperties folds random logs with ownership
// (gen.GenerateOwned: every policy, enforcement, preemption and balance,
// grace periods, lend: false, reclaim_for_preference, host and plan
// changes) and checks docs/rules.md#model's invariants and
// docs/rules.md#ownership-properties
// after every event, and that a second fold gives the same bytes.
func TestOwnershipFoldProperties(t *testing.T) {
	runs := *ownFoldRuns
	if testing.Short() {
		runs = 100
	}
	owned := 0
	for seed := uint64(1); seed <= uint64(runs); seed++ {
		sc := gen.GenerateOwned(gen.NewRand(seed+90000), 40)
		first, n := foldOwned(t, seed, sc)
		owned += n
		if second, _ := foldOwned(t, seed, sc); !bytes.Equal(first, second) {
			t.Fatalf("seed %d: two folds of the same log differ", seed)
		}
	}
	if owned < runs*10 {
		t.Fatalf("only %d events of %d logs were folded with an ownership assignment", owned, runs)
	}
	t.Logf("%d logs, %d events folded with ownership", runs, owned)
}

// foldOwned folds sc checking every property after every event; it
// returns the decisions, encoded, and how many events were folded in a
// pool holding an ownership assignment.
func foldOwned(t testing.TB, seed uint64, sc gen.Scenario) ([]byte, int) {
	t.Helper()
	pool := domain.NewPool("own")
	var plan events.Plan
	var log bytes.Buffer
	owned, seq := 0, uint64(0)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, ev := range sc.Events {
		at = at.Add(time.Second)
		before, hashBefore := pool.Consumers(), pool.StateHash()
		r, err := pool.Apply(domain.Event{Seq: seq + 1, Time: at, Payload: ev})
		if err != nil {
			if pool.StateHash() != hashBefore {
				t.Fatalf("seed %d event %d refused (%v) but the state changed", seed, i, err)
			}
			continue
		}
		seq++
		if pc, ok := ev.(*events.PlanChange); ok {
			plan = pc.Plan
		}
		msg := checkInvariants(pool, before, r.Decisions)
		if msg == "" && len(pool.Ownership()) > 0 {
			owned++
			msg = ownershipProperties(pool, plan)
		}
		if msg != "" {
			js, _ := json.Marshal(ev)
			t.Fatalf("seed %d event %d (%s %s): %s", seed, i, ev.EventType(), js, msg)
		}
		for _, d := range r.Decisions {
			b, _ := json.Marshal(d)
			log.Write(b)
			log.WriteByte('\n')
		}
	}
	return log.Bytes(), owned
}

// ownershipProperties checks the properties listed in
// docs/rules.md#ownership-properties.
func ownershipProperties(pool *domain.Pool, plan events.Plan) string {
	cs := pool.Consumers()
	byPath := map[string]domain.ConsumerView{}
	for _, c := range cs {
		byPath[c.Path] = c
	}
	for _, check := range []func() string{
		func() string { return ownedWithinHosts(pool) },
		func() string { return ownersServed(plan, cs) },
		func() string { return privateSlotsStayInside(plan, cs) },
		func() string { return lentOnlyWithinGrace(plan, cs) },
	} {
		if msg := check(); msg != "" {
			return msg
		}
	}
	return ""
}

// ownedWithinHosts: per host, owned slots never exceed the host's slots,
// and children's owned slots lie within their parent's.
func ownedWithinHosts(pool *domain.Pool) string {
	slots := map[string]int64{}
	for _, h := range pool.Hosts() {
		if h.Up {
			slots[h.Name] = h.Slots
		}
	}
	byHost := map[string]map[string]int64{}
	for _, o := range pool.Ownership() {
		if _, up := slots[o.Host]; !up {
			return fmt.Sprintf("%s owns %d slots of %s, which is not up", o.Consumer, o.Slots, o.Host)
		}
		if byHost[o.Host] == nil {
			byHost[o.Host] = map[string]int64{}
		}
		byHost[o.Host][o.Consumer] = o.Slots
	}
	for h, owners := range byHost {
		top, children := int64(0), map[string]int64{}
		for c, n := range owners {
			parent := parentOf(c)
			if parent == "/" {
				top += n
				continue
			}
			children[parent] += n
		}
		if top > slots[h] {
			return fmt.Sprintf("host %s: top-level consumers own %d of its %d slots", h, top, slots[h])
		}
		for parent, n := range children {
			if n > owners[parent] {
				return fmt.Sprintf("host %s: children of %s own %d, it owns %d", h, parent, n, owners[parent])
			}
		}
	}
	return ""
}

// ownersServed: an owner with demand holds at least min(E, owned) (where
// no max binds: a max caps the own layer too).
func ownersServed(plan events.Plan, cs []domain.ConsumerView) string {
	if planHasMax(plan) {
		return ""
	}
	for _, c := range cs {
		if c.Leaf && c.Allocated < min(c.Effective, c.Owned) {
			return fmt.Sprintf("owner %s holds %d, E %d, owns %d", c.Path, c.Allocated, c.Effective, c.Owned)
		}
	}
	return ""
}

// privateSlotsStayInside: slots a consumer L owns are used by a leaf
// outside an owning ancestor-or-self X of L only while no leaf of X with
// unmet demand could use them (a leaf of L's own subtree always could;
// another only through the lending chain, every owner on the way lending
// with a lend_grace at least its reclaim_grace). Checked where no max
// binds and under share_ratio (under priority a leaf's borrow limit,
// G + borrow_limit inside the private pool, may leave its demand unmet
// while the pool lends the rest: docs/decisions.md #103).
func privateSlotsStayInside(plan events.Plan, cs []domain.ConsumerView) string {
	if planHasMax(plan) || plan.Policy.ReclaimOrDefault() != events.ReclaimShareRatio {
		return ""
	}
	byPath := map[string]events.Consumer{}
	for _, c := range plan.Consumers {
		byPath[c.Path] = c
	}
	inside := func(x, l string) bool { return l == x || strings.HasPrefix(l, x+"/") }
	canUse := func(m, lender string) bool {
		if inside(lender, m) {
			return true
		}
		g := time.Duration(0)
		if c := byPath[m]; c.ReclaimGrace != nil {
			g = c.ReclaimGrace.Duration
		}
		for o := lender; o != "/" && !inside(o, m); o = parentOf(o) {
			c := byPath[o]
			lg := time.Duration(0)
			if c.LendGrace != nil {
				lg = c.LendGrace.Duration
			}
			if !c.LendOrDefault() || g > lg {
				return false
			}
		}
		return true
	}
	for _, o := range cs {
		for _, s := range o.Sources {
			if s.Lender == "" {
				continue
			}
			for x := s.Lender; x != "/" && !inside(x, o.Path); x = parentOf(x) {
				for _, m := range cs {
					if m.Leaf && m.Path != o.Path && inside(x, m.Path) && m.Allocated < m.Effective && canUse(m.Path, s.Lender) {
						return fmt.Sprintf("%s holds %d slots lent by %s while %s (under %s) holds %d of %d and could use them",
							o.Path, s.Slots, s.Lender, m.Path, x, m.Allocated, m.Effective)
					}
				}
			}
		}
	}
	return ""
}

// lentOnlyWithinGrace: a leaf never holds slots lent by L unless its
// reclaim_grace is at most L's lend_grace.
func lentOnlyWithinGrace(plan events.Plan, cs []domain.ConsumerView) string {
	grace := func(path string, lend bool) time.Duration {
		for _, c := range plan.Consumers {
			if c.Path != path {
				continue
			}
			if lend && c.LendGrace != nil {
				return c.LendGrace.Duration
			}
			if !lend && c.ReclaimGrace != nil {
				return c.ReclaimGrace.Duration
			}
		}
		return 0
	}
	for _, c := range cs {
		for _, s := range c.Sources {
			if s.Lender != "" && grace(c.Path, false) > grace(s.Lender, true) {
				return fmt.Sprintf("%s (reclaim_grace %v) holds %d slots lent by %s (lend_grace %v)", c.Path, grace(c.Path, false), s.Slots, s.Lender, grace(s.Lender, true))
			}
		}
	}
	return ""
}

func planHasMax(plan events.Plan) bool {
	for _, c := range plan.Consumers {
		if c.Max != nil {
			return true
		}
	}
	return false
}

func parentOf(path string) string {
	i := strings.LastIndex(path, "/")
	if i <= 0 {
		return "/"
	}
	return path[:i]
}
