package events_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
)

func TestRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	in := &events.Demand{Demands: map[string]int64{"/a": 3, "/b": 0}}
	env, err := events.New("id-1", "demo", "tests", at, in)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(env)
	back, err := events.ParseEnvelope(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, err := back.Decode()
	if err != nil {
		t.Fatal(err)
	}
	got := p.(*events.Demand)
	if back.ID != "id-1" || back.V != events.Version || !back.Time.Equal(at) || got.Demands["/a"] != 3 || len(got.Demands) != 2 {
		t.Fatalf("round trip changed the event: %+v %+v", back, got)
	}
}

func TestStrictDecoding(t *testing.T) {
	cases := []struct {
		typ  events.Type
		data string
		want error
	}{
		{events.TypeDemand, `{"demands":{"/a":1},"extra":true}`, events.ErrMalformed},
		{events.TypeRelease, `{"consumer":"/a","slots":"two"}`, events.ErrMalformed},
		{events.TypeHostUp, `{"host":"h1","slots":4} {"again":1}`, events.ErrMalformed},
		{events.TypePlan, `{"plan":{"consumers":[{"path":"/a","sharee":2}]}}`, events.ErrMalformed},
		{events.TypePlan, `{"plan":{"consumers":[{"path":"/a","max":"12.5%"}]}}`, events.ErrMalformed},
		{events.TypeHostDown, ``, events.ErrMalformed},
		{"resize", `{}`, events.ErrUnknownType},
	}
	for _, c := range cases {
		if _, err := events.DecodePayload(c.typ, []byte(c.data)); !errors.Is(err, c.want) {
			t.Errorf("%s %s: got %v, want %v", c.typ, c.data, err, c.want)
		}
	}
	if _, err := (events.Envelope{Type: events.TypeHostDown, V: events.Version + 1, Data: []byte(`{"host":"h"}`)}).Decode(); !errors.Is(err, events.ErrUnsupportedVersion) {
		t.Errorf("future version: %v", err)
	}
}

func TestMaxForms(t *testing.T) {
	for in, want := range map[string]events.Max{
		`40`:     {Slots: 40},
		`"40%"`:  {Percent: 40, IsPercent: true},
		`"40 %"`: {Percent: 40, IsPercent: true},
		`"12"`:   {Slots: 12},
	} {
		var m events.Max
		if err := json.Unmarshal([]byte(in), &m); err != nil || m != want {
			t.Errorf("%s: got %+v %v, want %+v", in, m, err, want)
		}
		out, _ := json.Marshal(m)
		var again events.Max
		if err := json.Unmarshal(out, &again); err != nil || again != m {
			t.Errorf("%s does not round-trip: %s", in, out)
		}
	}
	for _, bad := range []string{`"forty"`, `1.5`, `true`, `"%"`} {
		var m events.Max
		if err := json.Unmarshal([]byte(bad), &m); err == nil {
			t.Errorf("%s: accepted as %+v", bad, m)
		}
	}
}

func TestDurationForms(t *testing.T) {
	var d events.Duration
	if err := json.Unmarshal([]byte(`"90s"`), &d); err != nil || d.Duration != 90*time.Second {
		t.Fatalf("string: %v %v", d, err)
	}
	if err := json.Unmarshal([]byte(`30`), &d); err != nil || d.Duration != 30*time.Second {
		t.Fatalf("seconds: %v %v", d, err)
	}
	if err := json.Unmarshal([]byte(`"soon"`), &d); err == nil {
		t.Fatal("accepted a duration that is not one")
	}
}
