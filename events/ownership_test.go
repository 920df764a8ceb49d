package events_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/cluster-ledger/ledger/events"
)

// TestOwnershipDecoding reads every ownership field of
// docs/rules.md#ownership and
// gives the defaults of absent ones.
func TestOwnershipDecoding(t *testing.T) {
	data := `{"plan":{"policy":{"reclaim":"share_ratio","reclaim_for_preference":true},"consumers":[
		{"path":"/ml","own":[{"host":"gpu-07"},{"host":"gpu-08","slots":4,"preference":9},{"group":"gpu","slots":16}],"lend":false,"lend_grace":"5m"},
		{"path":"/web"}]}}`
	p, err := events.DecodePayload(events.TypePlan, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	pl := p.(*events.PlanChange).Plan
	ml, web := pl.Consumers[0], pl.Consumers[1]
	if !pl.Policy.ReclaimForPreferenceOrDefault() || !pl.HasOwnership() {
		t.Errorf("reclaim_for_preference lost: %+v", pl.Policy)
	}
	if len(ml.Own) != 3 || !ml.Own[0].WholeHost() || ml.Own[1].WholeHost() || *ml.Own[1].Slots != 4 || ml.Own[2].Group != "gpu" {
		t.Fatalf("own entries: %+v", ml.Own)
	}
	if got := []int64{ml.Own[0].PreferenceOrDefault(), ml.Own[1].PreferenceOrDefault()}; got[0] != events.DefaultPreference || got[1] != 9 {
		t.Errorf("preferences %v, want [5 9]", got)
	}
	if ml.LendOrDefault() || ml.LendGrace.Minutes() != 5 {
		t.Errorf("lend %v, lend_grace %v; want false, 5m", ml.LendOrDefault(), ml.LendGrace)
	}
	if !web.LendOrDefault() || web.HasOwnership() || web.Own != nil {
		t.Errorf("defaults of a consumer without ownership: %+v", web)
	}
	if (events.Policy{}).ReclaimForPreferenceOrDefault() {
		t.Error("reclaim_for_preference defaults to true")
	}
}

// TestOwnershipStrict refuses unknown keys and wrong types in own entries
// as malformed, like every other field of a plan.
func TestOwnershipStrict(t *testing.T) {
	for _, data := range []string{
		`{"plan":{"consumers":[{"path":"/a","own":[{"host":"h1","slot":4}]}]}}`,
		`{"plan":{"consumers":[{"path":"/a","own":[{"hosts":"h1"}]}]}}`,
		`{"plan":{"consumers":[{"path":"/a","own":[{"group":"g","slots":"4"}]}]}}`,
		`{"plan":{"consumers":[{"path":"/a","own":[{"host":"h1","preference":2.5}]}]}}`,
		`{"plan":{"consumers":[{"path":"/a","own":{"host":"h1"}}]}}`,
		`{"plan":{"consumers":[{"path":"/a","lend":"yes"}]}}`,
		`{"plan":{"policy":{"reclaim_for_preference":1},"consumers":[{"path":"/a"}]}}`,
		`{"plan":{"policy":{"reclaim_for_preferences":true},"consumers":[{"path":"/a"}]}}`,
	} {
		if _, err := events.DecodePayload(events.TypePlan, []byte(data)); !errors.Is(err, events.ErrMalformed) {
			t.Errorf("%s: got %v, want malformed", data, err)
		}
	}
}

// TestPlanWithoutOwnershipEncodesAsBefore: the new fields are omitted when
// absent, so a plan without ownership encodes to the same bytes as before
// they existed (the state hash and the stored plans depend on it).
func TestPlanWithoutOwnershipEncodesAsBefore(t *testing.T) {
	share := int64(2)
	pl := events.Plan{Rules: 2, Policy: events.Policy{Reclaim: "priority"}, Consumers: []events.Consumer{{Path: "/a", Share: &share}}}
	b, err := json.Marshal(pl)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"rules":2,"policy":{"reclaim":"priority"},"consumers":[{"path":"/a","share":2}]}`
	if string(b) != want || pl.HasOwnership() {
		t.Errorf("got %s (ownership %v), want %s", b, pl.HasOwnership(), want)
	}
	// An empty own list and an explicit lend are ownership fields: the
	// operator wrote them, and they are refused where ownership is.
	empty := events.Plan{Consumers: []events.Consumer{{Path: "/a", Own: []events.OwnEntry{}}}}
	lend := true
	withLend := events.Plan{Consumers: []events.Consumer{{Path: "/a", Lend: &lend}}}
	if !empty.HasOwnership() || !withLend.HasOwnership() {
		t.Error("own: [] or lend: true not seen as ownership fields")
	}
}

// TestOwnershipRoundTrip: a plan with ownership survives encoding.
func TestOwnershipRoundTrip(t *testing.T) {
	data := `{"plan":{"policy":{},"consumers":[{"path":"/a","own":[{"host":"h1","slots":2,"preference":7},{"group":"g","slots":3}],"lend":false}]}}`
	p, err := events.DecodePayload(events.TypePlan, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(p)
	if string(b) != data {
		t.Errorf("round trip:\n got %s\nwant %s", b, data)
	}
}

func TestValidateGroupName(t *testing.T) {
	if err := events.ValidateGroupName("gpu-a100"); err != nil {
		t.Errorf("good group refused: %v", err)
	}
	for _, bad := range []string{"a\x00b", "\xff", string(make([]byte, events.MaxGroupLen+1))} {
		if err := events.ValidateGroupName(bad); !errors.Is(err, events.ErrInvalidHostName) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
