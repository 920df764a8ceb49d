package domain_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
	"github.com/cluster-ledger/ledger/internal/scenario"
)

// TestRules4RevokedLendAndMoveGrace: rulings 10 and 13 of rules 4 (in
// development). The spec's r10 example, folded under rules 4, releases
// the revoked lend as release.lend_revoked with the lender's new
// lend_grace (10s); the file itself can state the rule and deadline only
// in comments, so they are checked here.
func TestRules4RevokedLendAndMoveGrace(t *testing.T) {
	s, err := scenario.ParseFile("../test/development/v4/r10-ineligible-holding-released-with-lend-grace.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res := scenario.Run(s, scenario.WithDevelopmentRules())
	if res.Failed() {
		t.Fatalf("r10 under rules 4: %+v", res)
	}
	var got []domain.Decision
	for _, d := range res.Steps[1].Decisions {
		if d.Kind == domain.KindRelease {
			got = append(got, d)
		}
	}
	at := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	if len(got) != 1 || got[0].Rule != domain.RuleLendRevoked || got[0].Consumer != "/B" || got[0].Slots != 4 ||
		got[0].Deadline == nil || !got[0].Deadline.Equal(at.Add(10*time.Second)) {
		t.Fatalf("step 2 releases %+v, want release /B 4 %s with deadline %v", got, domain.RuleLendRevoked, at.Add(10*time.Second))
	}
}

// TestRules4ReturnNamesTheLender: ruling 11 on the spec's r11 example: the
// owner's gain is paired as a return only with the borrower seated on its
// part, so the return names /P/a (whose slot /P/c borrowed, lend_grace 0)
// and /P/b (lend: false, its slot free) uses its slot (own.use); rules 3
// named /P/b.
func TestRules4ReturnNamesTheLender(t *testing.T) {
	s, err := scenario.ParseFile("../test/development/v4/r11-return-names-the-lender.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res := scenario.Run(s, scenario.WithDevelopmentRules())
	if res.Failed() {
		t.Fatalf("r11 under rules 4: %+v", res)
	}
	at := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	var returns, grants []string
	for _, d := range res.Steps[1].Decisions {
		switch d.Kind {
		case domain.KindReturn:
			if d.Deadline == nil || !d.Deadline.Equal(at) {
				t.Errorf("%+v: want the deadline %v (/P/a's lend_grace 0)", d, at)
			}
			returns = append(returns, d.Consumer+" from "+d.From)
		case domain.KindGrant:
			grants = append(grants, d.Consumer+" "+string(d.Rule))
		}
	}
	if len(returns) != 1 || returns[0] != "/P/a from /P/c" || len(grants) != 1 || grants[0] != "/P/b own.use" {
		t.Fatalf("returns %v, grants %v; want /P/a from /P/c, and /P/b own.use", returns, grants)
	}
}

// TestRules4ReleaseDeadlines: on random logs with ownership (every policy),
// under rules 4 every release.moved carries the mover's reclaim_grace
// (ruling 13) and every release.lend_revoked the lend_grace of a consumer
// that owns slots (ruling 10); under rules 3 a move carries none and no
// lend is revoked (the golden corpus holds the rest of rules 3).
func TestRules4ReleaseDeadlines(t *testing.T) {
	moved, revoked := 0, 0
	foldOwnedLogs(t, 61000, nil, func(p *domain.Pool, v domain.RulesVersion, r domain.Result, seed uint64, i int, _ events.Payload, at time.Time) {
		plan, _ := p.Plan()
		grace := map[string][2]time.Duration{}
		for _, c := range plan.Consumers {
			var g [2]time.Duration
			if c.ReclaimGrace != nil {
				g[0] = c.ReclaimGrace.Duration
			}
			if c.LendGrace != nil {
				g[1] = c.LendGrace.Duration
			}
			grace[c.Path] = g
		}
		for _, d := range r.Decisions {
			switch {
			case d.Rule == domain.RuleMoved && v == domain.RulesV3 && d.Deadline != nil:
				t.Fatalf("seed %d event %d, rules 3: %+v has a deadline", seed, i, d)
			case d.Rule == domain.RuleMoved && v == domain.RulesV4:
				moved++
				if d.Deadline == nil || !d.Deadline.Equal(at.Add(grace[d.Consumer][0])) {
					t.Fatalf("seed %d event %d, rules 4: %+v, want the deadline %v (its reclaim_grace)", seed, i, d, at.Add(grace[d.Consumer][0]))
				}
			case d.Rule == domain.RuleLendRevoked && v == domain.RulesV3:
				t.Fatalf("seed %d event %d, rules 3 revoked a lend: %+v", seed, i, d)
			case d.Rule == domain.RuleLendRevoked:
				revoked++
				lender := false
				for _, g := range grace {
					lender = lender || (d.Deadline != nil && d.Deadline.Equal(at.Add(g[1])))
				}
				if !lender {
					t.Fatalf("seed %d event %d: %+v's deadline is no consumer's lend_grace after the event", seed, i, d)
				}
			}
		}
	})
	if moved == 0 {
		t.Fatal("no move under rules 4: the test tests nothing")
	}
	t.Logf("%d moves and %d revoked lends under rules 4", moved, revoked)
}

// TestRules4SwapKeepsCounts: rules 4's reclaim_for_preference: false
// (ruling 9) changes which slots move, never how many each consumer holds.
// Random ownership logs are folded under rules 4 twice in lockstep, every
// plan with reclaim_for_preference false in one and true in the other,
// under share_ratio with preemption and balance (the policy whose counts
// do not depend on where slots sit; the others' will once rulings 4 and
// 12 decide them on totals);
// after every event every consumer's allocation is the same in both, and
// the swaps are counted (grants of rule own.use the other run does not
// make on that host).
func TestRules4SwapKeepsCounts(t *testing.T) {
	runs := 300
	if testing.Short() {
		runs = 60
	}
	differing := 0
	for seed := range uint64(runs) {
		sc := gen.GenerateOwned(gen.NewRand(seed+62000), 40)
		pools := [2]*domain.Pool{domain.NewPool("swap", domain.WithDevelopmentRules()), domain.NewPool("swap", domain.WithDevelopmentRules())}
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		seq := uint64(0)
		for i, ev := range sc.Events {
			at = at.Add(time.Second)
			var rs [2]domain.Result
			var errs [2]error
			for k, p := range pools {
				e := ev
				if pc, ok := ev.(*events.PlanChange); ok {
					stamped := *pc
					stamped.Plan.Rules = int(domain.RulesV4)
					rfp, yes := k == 1, true
					stamped.Plan.Policy = events.Policy{Reclaim: "share_ratio", Enforcement: stamped.Plan.Policy.Enforcement,
						Preemption: &yes, Balance: &yes, ReclaimForPreference: &rfp}
					e = &stamped
				}
				rs[k], errs[k] = p.Apply(domain.Event{Seq: seq + 1, Time: at, Payload: e})
			}
			if (errs[0] == nil) != (errs[1] == nil) {
				t.Fatalf("seed %d event %d: refusals %v and %v", seed, i, errs[0], errs[1])
			}
			if errs[0] != nil {
				continue
			}
			seq++
			for _, c := range pools[0].Consumers() {
				other, _ := pools[1].Consumer(c.Path)
				if c.Allocated != other.Allocated {
					t.Fatalf("seed %d event %d (%T): %s holds %d with reclaim_for_preference false, %d with true", seed, i, ev, c.Path, c.Allocated, other.Allocated)
				}
			}
			if fmt.Sprint(rs[0].Decisions) != fmt.Sprint(rs[1].Decisions) {
				differing++
			}
		}
	}
	if differing == 0 {
		t.Fatal("the flag changed no decision: the logs never made a return the swap could take")
	}
	t.Logf("%d events decided differently, counts always equal", differing)
}

// TestRules4NoMoveWithoutPreemption: under rules 4 with preemption false
// (ruling 7) nothing is moved and nothing reclaimed: on random ownership
// logs, every plan made preemption: false (share_ratio and priority), no
// decision is a reclaim and no leaf both gives slots up (release.moved)
// and is given slots by the share rules in one event; under rules 3 some
// are (the ruling's reason), which the test also finds.
func TestRules4NoMoveWithoutPreemption(t *testing.T) {
	movedV3 := 0
	no := false
	withoutPreemption := func(plan *events.Plan) { plan.Policy.Preemption = &no }
	foldOwnedLogs(t, 63000, withoutPreemption, func(_ *domain.Pool, v domain.RulesVersion, r domain.Result, seed uint64, i int, ev events.Payload, _ time.Time) {
		// A move is a leaf giving slots up (release.moved) and
		// given slots by the share rules (grant, lend) in one
		// event; an owner's excess above E after its own layer
		// takes its slots back (ruling 5) is no move.
		moved, gained := map[string]bool{}, map[string]bool{}
		for _, d := range r.Decisions {
			switch {
			case d.Kind == domain.KindReclaim:
				if v == domain.RulesV4 {
					t.Fatalf("seed %d event %d (%T), rules 4 without preemption: %+v", seed, i, ev, d)
				}
				movedV3++
			case d.Rule == domain.RuleMoved:
				moved[d.Consumer] = true
			case (d.Kind == domain.KindGrant || d.Kind == domain.KindLend) && d.Rule != domain.RuleOwnUse:
				gained[d.Consumer] = true
			}
		}
		for c := range moved {
			if !gained[c] {
				continue
			}
			if v == domain.RulesV4 {
				t.Fatalf("seed %d event %d (%T), rules 4 without preemption moved %s: %+v", seed, i, ev, c, r.Decisions)
			}
			movedV3++
		}
	})
	if movedV3 == 0 {
		t.Fatal("rules 3 moved nothing either: the logs do not exercise the ruling")
	}
	t.Logf("rules 3 moved or reclaimed %d times without preemption; rules 4 never", movedV3)
}

// TestRules4NoIdleMove: under rules 4 a leaf is not moved off slots that
// stay free (ruling 7, docs/decisions.md #347): no release.moved leaves
// its host with free slots while the same leaf gains by the share rules
// on another host in the event. Rules 3 made such moves.
func TestRules4NoIdleMove(t *testing.T) {
	idleV3 := 0
	foldOwnedLogs(t, 64000, nil, func(p *domain.Pool, v domain.RulesVersion, r domain.Result, seed uint64, i int, _ events.Payload, _ time.Time) {
		free := map[string]int64{}
		for _, h := range p.Hosts() {
			if h.Up {
				free[h.Name] = h.Slots - h.Allocated
			}
		}
		ownElse := map[string]int64{} // what a leaf's own use gains: ruling 5 moves it there
		for _, g := range r.Decisions {
			if g.Kind == domain.KindGrant && g.Rule == domain.RuleOwnUse {
				ownElse[g.Consumer] += g.Slots
			}
		}
		for _, d := range r.Decisions {
			if d.Rule != domain.RuleMoved || free[d.Host] == 0 {
				continue
			}
			own := min(d.Slots, ownElse[d.Consumer])
			ownElse[d.Consumer] -= own
			if own == d.Slots {
				continue
			}
			for _, g := range r.Decisions {
				if g.Consumer != d.Consumer || g.Host == d.Host || g.Rule == domain.RuleOwnUse || (g.Kind != domain.KindGrant && g.Kind != domain.KindLend) {
					continue
				}
				if v == domain.RulesV4 {
					t.Fatalf("seed %d event %d, rules 4: %s moved off %s, which keeps %d slots free: %+v", seed, i, d.Consumer, d.Host, free[d.Host], r.Decisions)
				}
				idleV3++
				break
			}
		}
	})
	if idleV3 == 0 {
		t.Fatal("rules 3 made no idle move either: the logs do not exercise the ruling")
	}
	t.Logf("rules 3 made %d idle moves; rules 4 none", idleV3)
}

// TestRules4TakeBackWithinMax: a branch's take-back of its parent's
// private slots without preemption (docs/decisions.md #353) fits under
// every max with what every leaf holds. The logs are those of the
// no-input property's 30,000 (TestRules4NoInputNoDecision with
// -noinput.runs 30000) where a first version of the take-back lifted a
// parent above its max.
func TestRules4TakeBackWithinMax(t *testing.T) {
	for _, seed := range []uint64{2599, 3279, 6129, 7534, 8397, 8537, 9654} {
		foldOwnedLog(t, seed, domain.RulesV4, nil, func(p *domain.Pool, _ domain.Result, i int, ev events.Payload, _ time.Time) {
			for _, c := range p.Consumers() {
				if c.MaxSlots != nil && c.Allocated > *c.MaxSlots {
					t.Fatalf("seed %d event %d (%s): %s holds %d above its max %d", seed, i, ev.EventType(), c.Path, c.Allocated, *c.MaxSlots)
				}
			}
		})
	}
}

// foldOwnedLogs folds 300 random ownership logs (60 with -short), seeds
// from base, under rules 3 and then under rules 4, every plan stamped with
// the version and changed by tweak (when not nil), and calls check after
// every event folded, with the time it was folded at.
func foldOwnedLogs(t *testing.T, base uint64, tweak func(*events.Plan),
	check func(p *domain.Pool, v domain.RulesVersion, r domain.Result, seed uint64, i int, ev events.Payload, at time.Time)) {
	t.Helper()
	runs := 300
	if testing.Short() {
		runs = 60
	}
	for seed := range uint64(runs) {
		for _, v := range []domain.RulesVersion{domain.RulesV3, domain.RulesV4} {
			foldOwnedLog(t, seed+base, v, tweak, func(p *domain.Pool, r domain.Result, i int, ev events.Payload, at time.Time) {
				check(p, v, r, seed, i, ev, at)
			})
		}
	}
}

// foldOwnedLog folds the random ownership log of seed under rules v, as
// foldOwnedLogs does, calling check after every event folded.
func foldOwnedLog(t *testing.T, seed uint64, v domain.RulesVersion, tweak func(*events.Plan),
	check func(p *domain.Pool, r domain.Result, i int, ev events.Payload, at time.Time)) {
	t.Helper()
	sc := gen.GenerateOwned(gen.NewRand(seed), 40)
	p := domain.NewPool("rules4", domain.WithDevelopmentRules())
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seq := uint64(0)
	for i, ev := range sc.Events {
		at = at.Add(time.Second)
		if pc, ok := ev.(*events.PlanChange); ok {
			stamped := *pc
			stamped.Plan.Rules = int(v)
			if tweak != nil {
				tweak(&stamped.Plan)
			}
			ev = &stamped
		}
		r, err := p.Apply(domain.Event{Seq: seq + 1, Time: at, Payload: ev})
		if err != nil {
			continue
		}
		seq++
		check(p, r, i, ev, at)
	}
}

// TestRules4LendWithoutOwningChangesNothing: under rules 4 a plan whose
// ownership fields own nothing (lend, an empty own list,
// reclaim_for_preference) decides exactly as the same plan without them
// (docs/decisions.md #322): random logs without ownership folded both
// ways agree on every decision and allocation. Under rules 3 such a plan
// takes the layered fold (#200), and the same check finds differences.
func TestRules4LendWithoutOwningChangesNothing(t *testing.T) {
	runs := 300
	if testing.Short() {
		runs = 60
	}
	withFields := func(plan events.Plan) events.Plan {
		yes, no := true, false
		plan.Policy.ReclaimForPreference = &yes
		plan.Consumers = append([]events.Consumer(nil), plan.Consumers...)
		for i := range plan.Consumers {
			switch i % 3 {
			case 0:
				plan.Consumers[i].Lend = &no
			case 1:
				plan.Consumers[i].Own = []events.OwnEntry{}
			}
		}
		return plan
	}
	differ := map[domain.RulesVersion]int{}
	for _, v := range []domain.RulesVersion{domain.RulesV3, domain.RulesV4} {
		for seed := uint64(1); seed <= uint64(runs); seed++ {
			sc := gen.Generate(gen.NewRand(seed), 40)
			plain, fields := domain.NewPool("plain", domain.WithDevelopmentRules()), domain.NewPool("fields", domain.WithDevelopmentRules())
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i, ev := range sc.Events {
				at = at.Add(time.Second)
				evWith := ev
				if pc, ok := ev.(*events.PlanChange); ok {
					a := *pc
					a.Plan.Rules = int(v)
					b := a
					b.Plan = withFields(a.Plan)
					ev, evWith = &a, &b
				}
				r1, err1 := plain.Apply(domain.Event{Seq: uint64(i + 1), Time: at, Payload: ev})
				r2, err2 := fields.Apply(domain.Event{Seq: uint64(i + 1), Time: at, Payload: evWith})
				if (err1 == nil) != (err2 == nil) {
					t.Fatalf("rules %d seed %d event %d: refusals differ: %v / %v", v, seed, i, err1, err2)
				}
				if err1 != nil {
					plain.Skip(uint64(i+1), at)
					fields.Skip(uint64(i+1), at)
					continue
				}
				if fmt.Sprint(r1.Decisions) != fmt.Sprint(r2.Decisions) {
					differ[v]++
					if v == domain.RulesV4 {
						t.Fatalf("rules 4 seed %d event %d (%T): the plan's ownership fields that own nothing changed its decisions:\n%v\n%v", seed, i, ev, r1.Decisions, r2.Decisions)
					}
					break
				}
			}
		}
	}
	if differ[domain.RulesV3] == 0 {
		t.Fatalf("rules 3 decided the same with and without the fields on %d logs: the test does not exercise #322", runs)
	}
	t.Logf("rules 3: %d of %d logs decide otherwise with ownership fields that own nothing; rules 4: none", differ[domain.RulesV3], runs)
}

// TestRules4SwapsDuesRatherThanMove: under version 4 with preemption, a
// holder the division gives a share of a lent class keeps where it sits
// when another leaf due its public slot may take the lent share instead
// (docs/decisions.md #340). /d, shrinking from 20 to 7, sits on 7 public
// slots of h1; the division gives /d and /c one slot each of /a's lent
// class (h2, a restrictive class divided first) and /c the rest of the
// public slots. Version 3's placement moved one of /d's slots from h1 to
// h2 so that /c could take it; version 4 swaps the dues: /c takes both
// of /a's slots, /d moves nothing.
func TestRules4SwapsDuesRatherThanMove(t *testing.T) {
	log := []string{
		`plan {"plan":{"policy":{"reclaim":"share_ratio","enforcement":"parent","reclaim_for_preference":true},"consumers":[{"path":"/a","share":1,"priority":3,"own":[{"host":"h2","slots":2}]},{"path":"/b","share":4,"reclaim_grace":"5m0s"},{"path":"/c","share":5},{"path":"/d","share":5,"priority":2}]}}`,
		`host_up {"host":"h1","slots":7}`,
		`host_up {"host":"h2","slots":2}`,
		`host_up {"host":"h3","slots":11}`,
		`demand {"demands":{"/b":12,"/d":24}}`,
		`demand {"demands":{"/b":0}}`,
		`demand {"demands":{"/c":14,"/d":7}}`,
	}
	for _, v := range []domain.RulesVersion{domain.RulesV3, domain.RulesV4} {
		p := domain.NewPool("swap", domain.WithDevelopmentRules())
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var last domain.Result
		for i, line := range log {
			typ, body, _ := strings.Cut(line, " ")
			ev, err := events.DecodePayload(events.Type(typ), []byte(body))
			if err != nil {
				t.Fatal(err)
			}
			if pc, ok := ev.(*events.PlanChange); ok {
				pc.Plan.Rules = int(v)
			}
			at = at.Add(time.Second)
			if last, err = p.Apply(domain.Event{Seq: uint64(i + 1), Time: at, Payload: ev}); err != nil {
				t.Fatalf("rules %d, event %d: %v", v, i, err)
			}
		}
		moved := 0
		for _, d := range last.Decisions {
			if d.Rule == domain.RuleMoved {
				moved++
			}
		}
		switch {
		case v == domain.RulesV3 && moved == 0:
			t.Fatalf("rules 3 moved nothing: the log no longer shows the case: %+v", last.Decisions)
		case v == domain.RulesV4 && moved > 0:
			t.Fatalf("rules 4 moved work a swap of dues keeps: %+v", last.Decisions)
		}
		got := int64(0)
		for _, c := range p.Consumers() {
			if c.Path == "/c" || c.Path == "/d" {
				got += c.Allocated
			}
		}
		if got != 20 {
			t.Fatalf("rules %d: /c and /d hold %d, want all 20 slots", v, got)
		}
	}
}
