package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
)

func i64(v int64) *int64 { return &v }

func host(h string) events.OwnEntry { return events.OwnEntry{Host: h} }
func hostSlots(h string, n int64) events.OwnEntry {
	return events.OwnEntry{Host: h, Slots: i64(n)}
}
func group(g string, n int64) events.OwnEntry { return events.OwnEntry{Group: g, Slots: i64(n)} }
func pref(o events.OwnEntry, p int64) events.OwnEntry {
	o.Preference = i64(p)
	return o
}
func owner(path string, own ...events.OwnEntry) events.Consumer {
	return events.Consumer{Path: path, Own: own}
}

// TestOwnershipValidation: every malformed or inconsistent ownership of
// docs/rules.md#ownership is refused with its own code; a consistent one gets
// past every check and is refused only because the plan names rules 2, which
// does not implement ownership.
func TestOwnershipValidation(t *testing.T) {
	cases := []struct {
		name string
		cs   []events.Consumer
		want error
	}{
		{"host and group", []events.Consumer{owner("/a", events.OwnEntry{Host: "h1", Group: "g", Slots: i64(2)})}, domain.ErrInvalidOwnEntry},
		{"neither host nor group", []events.Consumer{owner("/a", events.OwnEntry{Slots: i64(2)})}, domain.ErrInvalidOwnEntry},
		{"group without slots", []events.Consumer{owner("/a", events.OwnEntry{Group: "g"})}, domain.ErrInvalidOwnEntry},
		{"zero slots", []events.Consumer{owner("/a", hostSlots("h1", 0))}, domain.ErrNonPositive},
		{"negative group slots", []events.Consumer{owner("/a", group("g", -3))}, domain.ErrNonPositive},
		{"slots past the quantity limit", []events.Consumer{owner("/a", group("g", int64(domain.MaxQuantity)+1))}, domain.ErrOverflow},
		{"preference 0", []events.Consumer{owner("/a", pref(host("h1"), 0))}, domain.ErrPreferenceRange},
		{"preference 11", []events.Consumer{owner("/a", pref(group("g", 1), 11))}, domain.ErrPreferenceRange},
		{"bad host name", []events.Consumer{owner("/a", host("h 1"))}, events.ErrInvalidHostName},
		{"bad group name", []events.Consumer{owner("/a", group("g\x00", 1))}, events.ErrInvalidHostName},
		{"same host twice", []events.Consumer{owner("/a", host("h1"), hostSlots("h1", 2))}, domain.ErrDuplicateOwnHost},
		{"child of a parent owning nothing", []events.Consumer{{Path: "/p"}, owner("/p/c", host("h1"))}, domain.ErrParentOwnsNothing},
		{"child of an implied parent", []events.Consumer{owner("/p/c", group("g", 1))}, domain.ErrParentOwnsNothing},
		{"child of a parent with an empty list", []events.Consumer{{Path: "/p", Own: []events.OwnEntry{}}, owner("/p/c", group("g", 1))}, domain.ErrParentOwnsNothing},
		{"children's slots above the parent's on a host", []events.Consumer{
			owner("/p", hostSlots("h1", 4)), owner("/p/a", hostSlots("h1", 3)), owner("/p/b", hostSlots("h1", 2))}, domain.ErrChildrenOwnMore},
		{"a child owns whole what the parent owns in part", []events.Consumer{
			owner("/p", hostSlots("h1", 4)), owner("/p/a", host("h1"))}, domain.ErrChildrenOwnMore},
		{"two children own whole the parent's host", []events.Consumer{
			owner("/p", host("h1")), owner("/p/a", host("h1")), owner("/p/b", host("h1"))}, domain.ErrChildrenOwnMore},
		{"whole plus slots of the parent's host", []events.Consumer{
			owner("/p", host("h1")), owner("/p/a", host("h1")), owner("/p/b", hostSlots("h1", 1))}, domain.ErrChildrenOwnMore},
		{"children's group slots above the parent's", []events.Consumer{
			owner("/p", group("g", 4), group("g", 2)), owner("/p/a", group("g", 5)), owner("/p/b", group("g", 2))}, domain.ErrChildrenOwnMore},
		{"grandchildren above their parent", []events.Consumer{
			owner("/p", group("g", 8)), owner("/p/a", group("g", 4)), owner("/p/a/x", group("g", 5))}, domain.ErrChildrenOwnMore},
		// Consistent ownership: only the rules version refuses it.
		{"whole host", []events.Consumer{owner("/a", host("h1"))}, domain.ErrOwnershipRules},
		{"children within the parent", []events.Consumer{
			owner("/p", host("h1"), hostSlots("h2", 4), group("g", 6)),
			owner("/p/a", host("h1"), hostSlots("h2", 3), group("g", 4)),
			owner("/p/b", hostSlots("h2", 1), group("g", 2)),
		}, domain.ErrOwnershipRules},
		{"children's slots of a host under a whole host", []events.Consumer{
			owner("/p", host("h1")), owner("/p/a", hostSlots("h1", 100)), owner("/p/b", hostSlots("h1", 100))}, domain.ErrOwnershipRules},
		{"a child's host under the parent's group is left to assignment", []events.Consumer{
			owner("/p", group("g", 2)), owner("/p/a", host("h9"), group("other", 50))}, domain.ErrOwnershipRules},
		{"same group twice is allowed", []events.Consumer{owner("/a", pref(group("g", 2), 9), group("g", 2))}, domain.ErrOwnershipRules},
		{"lend alone", []events.Consumer{{Path: "/a", Lend: new(bool)}}, domain.ErrOwnershipRules},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pool := domain.NewPool("own")
			err := pool.Validate(&events.PlanChange{Plan: events.Plan{Rules: 2, Consumers: c.cs}})
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v (%s), want %v", err, events.CodeOf(err), c.want)
			}
			if err.Error() == c.want.Error() {
				t.Errorf("the refusal names no specifics: %q", err)
			}
		})
	}
}

// TestOwnershipNeedsRules: versions 1 and 2 refuse ownership fields (own,
// lend, reclaim_for_preference) with one code, and a refused plan changes
// nothing; version 3 accepts them; lend_grace, which plans carried before
// ownership, is accepted by every version, and so is every plan without
// ownership.
func TestOwnershipNeedsRules(t *testing.T) {
	yes := true
	plans := map[string]events.Plan{
		"own":                    {Consumers: []events.Consumer{owner("/a", host("h1"))}},
		"own: []":                {Consumers: []events.Consumer{{Path: "/a", Own: []events.OwnEntry{}}}},
		"reclaim_for_preference": {Policy: events.Policy{ReclaimForPreference: &yes}, Consumers: []events.Consumer{{Path: "/a"}}},
	}
	for _, v := range domain.RulesVersions {
		for name, pl := range plans {
			pool := domain.NewPool("gate")
			if _, err := pool.Apply(domain.Event{Seq: 1, Time: time.Unix(1, 0), Payload: &events.PlanChange{Plan: events.Plan{Rules: int(v), Consumers: []events.Consumer{{Path: "/b"}}}}}); err != nil {
				t.Fatal(err)
			}
			before := pool.StateHash()
			pl.Rules = int(v)
			_, err := pool.Apply(domain.Event{Seq: 2, Time: time.Unix(2, 0), Payload: &events.PlanChange{Plan: pl}})
			if v >= domain.RulesV3 {
				if err != nil {
					t.Errorf("%v, %s: refused: %v", v, name, err)
				}
				continue
			}
			if !errors.Is(err, domain.ErrOwnershipRules) || events.CodeOf(err) != "ownership_unsupported_rules" {
				t.Errorf("%v, %s: got %v", v, name, err)
			}
			if pool.StateHash() != before {
				t.Errorf("%v, %s: the refused plan changed the state", v, name)
			}
		}
		grace := &events.Duration{Duration: time.Minute}
		pool := domain.NewPool("grace")
		if err := pool.Validate(&events.PlanChange{Plan: events.Plan{Rules: int(v), Consumers: []events.Consumer{{Path: "/a", LendGrace: grace, ReclaimGrace: grace}}}}); err != nil {
			t.Errorf("%v: lend_grace without ownership refused: %v", v, err)
		}
	}
}

// TestPlanIsACopy: Pool.Plan gives the plan in force, and changing what
// it returns changes nothing in the pool.
func TestPlanIsACopy(t *testing.T) {
	pool := domain.NewPool("p")
	if _, ok := pool.Plan(); ok {
		t.Fatal("a new pool has a plan")
	}
	plan := events.Plan{Rules: int(domain.RulesNewest), Consumers: []events.Consumer{owner("/a", pref(host("h1"), 8)), {Path: "/b", Share: i64(3)}}}
	if _, err := pool.Apply(domain.Event{Seq: 1, Time: time.Unix(1, 0), Payload: &events.PlanChange{Plan: plan}}); err != nil {
		t.Fatal(err)
	}
	got, ok := pool.Plan()
	if !ok || len(got.Consumers) != 2 || *got.Consumers[0].Own[0].Preference != 8 || *got.Consumers[1].Share != 3 {
		t.Fatalf("Plan() = %+v, %v", got, ok)
	}
	hash := pool.StateHash()
	*got.Consumers[0].Own[0].Preference, *got.Consumers[1].Share = 1, 9
	got.Consumers[0].Path = "/z"
	if again, _ := pool.Plan(); *again.Consumers[0].Own[0].Preference != 8 || *again.Consumers[1].Share != 3 || again.Consumers[0].Path != "/a" || pool.StateHash() != hash {
		t.Fatalf("changing the copy changed the pool: %+v", again)
	}
}
