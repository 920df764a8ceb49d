package explain_test

import (
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/explain"
	"github.com/cluster-ledger/ledger/internal/scenario"
)

// story folds a scenario and tells consumer's story at the end.
func story(t *testing.T, file, consumer string) string {
	t.Helper()
	return storyUpTo(t, file, consumer, 0)
}

// storyUpTo folds a scenario up to the event with sequence last (0: all
// of it) and tells consumer's story there.
func storyUpTo(t *testing.T, file, consumer string, last uint64) string {
	t.Helper()
	return fold(t, file, consumer, last, domain.RulesNewest)
}

// fold folds a scenario as the ledger would append it, a plan naming no
// rules version stamped with rules, up to the event with sequence last
// (0: all of it), and tells consumer's story there.
func fold(t *testing.T, file, consumer string, last uint64, rules domain.RulesVersion) string {
	t.Helper()
	s, err := scenario.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pool := domain.NewPool(s.Pool)
	st := explain.New(consumer, 20)
	tl := scenario.NewTimeline()
	seq := uint64(0)
	evs := s.Events()
	for _, ev := range evs {
		if last > 0 && seq == last {
			break
		}
		at := tl.At(ev.Time)
		ds, err := pool.Apply(domain.Event{Seq: seq + 1, Time: at, Payload: domain.StampRulesAs(ev.Payload, rules)})
		if err != nil {
			continue
		}
		seq++
		st.After(pool, seq, at, ds.Decisions)
	}
	var b strings.Builder
	if err := st.Write(&b, pool); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestSeed000TellsWhyBWasTheVictim(t *testing.T) {
	out := story(t, "../../test/scenarios/seed/seed-000-priority-reclaim.yaml", "/C")
	requireAll(t, out,
		"/C reclaimed 1 slot from /B on h1 [priority.reclaim]",
		"top-level branch /B used 5 slots, more than its planned share 4",
		"lowest priority (1; among the other borrowers /A has 3)",
		"borrowed 1 slot above its guaranteed share 4",
	)
}

func TestSeed001TellsShareRatioPairing(t *testing.T) {
	out := story(t, "../../test/scenarios/seed/seed-001-share-ratio-subconsumers.yaml", "/B/B2")
	if !strings.Contains(out, "/B/B2 reclaimed 60 slots from /B/B1 on h1 [share_ratio.reclaim]") {
		t.Errorf("story lacks the reclaim from /B/B1:\n%s", out)
	}
	if !strings.Contains(out, "a target of 75") {
		t.Errorf("story lacks B2's target:\n%s", out)
	}
}

func TestSeed001ThreeConsumersTellsBothVictims(t *testing.T) {
	out := story(t, "../../test/scenarios/seed/seed-001-share-ratio-three-consumers.yaml", "/C")
	requireAll(t, out,
		"/C reclaimed 1 slot from /B on h1 [share_ratio.reclaim]",
		"/C reclaimed 1 slot from /A on h1 [share_ratio.reclaim]",
		"/B held 9, 1 slot above its target, so it gave to /C",
		"/A held 9, 1 slot above its target, so it gave to /C",
	)
}

func TestSeed002TellsTheSiblingGetsTheSpareSlot(t *testing.T) {
	out := story(t, "../../test/scenarios/seed/seed-002-leaf-vs-parent.yaml", "/X/2")
	requireAll(t, out,
		"/X/2 was granted 5 slots on h1 [share_ratio.grant]",
		"/X/2 reclaimed 1 slot from /Y/1 on h1 [share_ratio.reclaim]",
		"give /X/2 a target of 6 and /Y/1 a target of 4",
		"policy: reclaim share_ratio, enforcement parent",
	)
}

func TestBalanceFalseTellsWhyOnlyThePlannedShareCameBack(t *testing.T) {
	out := story(t, "../../test/scenarios/rules/balance-false-leaf.yaml", "/B")
	requireAll(t, out,
		"/B reclaimed 4 slots from /A on h1 [share_ratio.reclaim]",
		"balance is false, so reclaim only gives a consumer back its planned share",
		"/B's planned share is 4; /A held 12, more than it may keep",
		"balance false (reclaim restores planned shares only)",
	)
}

// TestStoryNamesRulesVersion: the story says which rules version the pool
// runs under and from which plan, here after a plan moved it from 1 to 2
// (sequence 8: the first plan, four hosts, a demand, a host down, then it).
func TestStoryNamesRulesVersion(t *testing.T) {
	out := story(t, "../../test/scenarios/versions/move-between-versions.yaml", "/A")
	requireAll(t, out, "rules version 2, since the plan at sequence 8")
}

// requireAll fails the test for every phrase the story lacks.
func requireAll(t *testing.T, out string, phrases ...string) {
	t.Helper()
	for _, want := range phrases {
		if !strings.Contains(out, want) {
			t.Errorf("story lacks %q:\n%s", want, out)
		}
	}
}
