package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

func TestAppendOneEvent(t *testing.T) {
	clock := &fixedClock{now: time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)}
	l := newLedger(t, testenv.NATS(t), api.WithClock(clock.Now))
	setup(l, "p1")

	res := l.mustPost("p1", map[string]any{"id": "ev-1", "type": "demand", "producer": "admin", "data": map[string]any{"demands": map[string]int{"/a": 3}}})
	if res.Pool != "p1" || len(res.Events) != 1 || res.Events[0].ID != "ev-1" || res.Events[0].Seq != 3 || res.Events[0].Duplicate {
		t.Fatalf("answer %+v, want ev-1 at seq 3", res)
	}
	got := poolEvents(t, l.js, "p1")
	if len(got) != 3 {
		t.Fatalf("%d events stored, want 3", len(got))
	}
	e := got[2]
	env := e.stored.Envelope
	want := time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC) // microseconds, as PostgreSQL keeps them
	switch {
	case e.seq != 3 || e.subject != "ledger.p1.demand":
		t.Errorf("stored at %d on %s, want 3 on ledger.p1.demand", e.seq, e.subject)
	case env.ID != "ev-1" || e.header.Get("Nats-Msg-Id") != "ev-1":
		t.Errorf("id %q, Nats-Msg-Id %q, want ev-1", env.ID, e.header.Get("Nats-Msg-Id"))
	case env.Type != events.TypeDemand || env.V != events.Version || env.Pool != "p1" || env.Producer != "admin":
		t.Errorf("envelope %+v", env)
	case !env.Time.Equal(want):
		t.Errorf("time %v, want the clock %v", env.Time, want)
	case string(env.Data) != `{"demands":{"/a":3}}`:
		t.Errorf("data %s", env.Data)
	}
	if got[0].stored.Envelope.Producer != "admin" {
		t.Errorf("producer %q, want the token's name admin", got[0].stored.Envelope.Producer)
	}
	if len(got[0].stored.Envelope.ID) != 32 {
		t.Errorf("generated id %q, want 128 random bits in hex", got[0].stored.Envelope.ID)
	}
}

// TestPlanStampedWithRulesVersion: a plan that names no rules version is
// stored naming the newest, so every stored plan names its version; a plan
// that names one is stored as sent.
func TestPlanStampedWithRulesVersion(t *testing.T) {
	l := newLedger(t, testenv.NATS(t))
	setup(l, "p") // its plan names no version
	l.mustPost("p", ev("plan", map[string]any{"plan": map[string]any{"rules": 1, "consumers": []any{consumer("/a"), consumer("/b")}}}))
	got := poolEvents(t, l.js, "p")
	rules := func(e storedEvent) int {
		t.Helper()
		var pc events.PlanChange
		if err := json.Unmarshal(e.stored.Envelope.Data, &pc); err != nil {
			t.Fatal(err)
		}
		return pc.Plan.Rules
	}
	if len(got) != 3 || got[0].stored.Envelope.Type != events.TypePlan || got[2].stored.Envelope.Type != events.TypePlan {
		t.Fatalf("%d events stored, want plan, host_up, plan", len(got))
	}
	if r := rules(got[0]); r != int(domain.RulesNewest) {
		t.Errorf("a plan naming no version was stored with rules %d, want the newest, %d (data %s)", r, int(domain.RulesNewest), got[0].stored.Envelope.Data)
	}
	if r := rules(got[2]); r != 1 {
		t.Errorf("a plan naming rules 1 was stored with rules %d (data %s)", r, got[2].stored.Envelope.Data)
	}
}

func TestTimeNeverGoesBack(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := &fixedClock{now: t0}
	l := newLedger(t, testenv.NATS(t), api.WithClock(clock.Now))
	setup(l, "p")
	clock.Set(t0.Add(-time.Hour)) // the clock steps back
	l.mustPost("p", demand(map[string]int{"/a": 1}))
	got := poolEvents(t, l.js, "p")
	if at := got[len(got)-1].stored.Envelope.Time; !at.Equal(t0) {
		t.Errorf("stamped %v after a clock step back, want the previous event's %v", at, t0)
	}
}

func TestDuplicateStoredOnce(t *testing.T) {
	natsURL := testenv.NATS(t)
	l := newLedger(t, natsURL)
	setup(l, "p")
	l.mustPost("p", demand(map[string]int{"/a": 4}))
	first := l.mustPost("p", withID(release("/a", 4), "rel-1"))
	n := streamMsgs(t, l.js)

	// The retried release would be refused against the state it changed
	// (/a holds nothing now): it must be recognised by its id first.
	again := l.mustPost("p", withID(release("/a", 4), "rel-1"))
	if again.Events[0].Seq != first.Events[0].Seq || !again.Events[0].Duplicate {
		t.Errorf("retry answered %+v, want duplicate of seq %d", again.Events[0], first.Events[0].Seq)
	}
	// Another ledger instance, whose state is not yet loaded, too.
	other := newLedger(t, natsURL)
	third := other.mustPost("p", withID(release("/a", 4), "rel-1"))
	if third.Events[0].Seq != first.Events[0].Seq || !third.Events[0].Duplicate {
		t.Errorf("retry through another instance answered %+v", third.Events[0])
	}
	if m := streamMsgs(t, l.js); m != n {
		t.Errorf("stream holds %d messages after retries, want %d", m, n)
	}
}

func TestDuplicateValidEventStoredOnce(t *testing.T) {
	natsURL := testenv.NATS(t)
	l := newLedger(t, natsURL)
	setup(l, "p")
	first := l.mustPost("p", withID(demand(map[string]int{"/a": 2}), "d-1"))
	n := streamMsgs(t, l.js)
	// A second instance whose state is stale: JetStream itself reports the
	// duplicate (its check runs before validation could matter).
	other := newLedger(t, natsURL)
	other.mustPost("p", demand(map[string]int{"/b": 1}))
	n++
	again := l.mustPost("p", withID(demand(map[string]int{"/a": 2}), "d-1"))
	if again.Events[0].Seq != first.Events[0].Seq || !again.Events[0].Duplicate {
		t.Errorf("retry answered %+v, want duplicate of %d", again.Events[0], first.Events[0].Seq)
	}
	if m := streamMsgs(t, l.js); m != n {
		t.Errorf("stream holds %d messages, want %d", m, n)
	}
}

func TestInvalidEventsAppendNothing(t *testing.T) {
	l := newLedger(t, testenv.NATS(t))
	setup(l, "p")
	l.mustPost("p", demand(map[string]int{"/a": 2}))
	cases := []struct {
		name   string
		body   any
		status int
		reason string
	}{
		{"unknown consumer", demand(map[string]int{"/nope": 1}), 422, "unknown_consumer"},
		{"demand on a parent", demand(map[string]int{"/p": 1}), 422, "demand_on_parent"},
		{"release more than held", release("/a", 3), 422, "release_too_many"},
		{"unknown host", ev("host_down", map[string]any{"host": "h9"}), 422, "unknown_host"},
		{"host already up", hostUp("h1", 3), 422, "host_already_up"},
		{"plan with a relative path", plan(consumer("a")), 422, "invalid_path"},
		{"plan with a bad policy", ev("plan", map[string]any{"plan": map[string]any{"policy": map[string]any{"reclaim": "fastest"}, "consumers": []any{consumer("/a")}}}), 422, "invalid_plan"},
		{"plan with an unknown field", ev("plan", map[string]any{"plan": map[string]any{"consumers": []any{map[string]any{"path": "/a", "shares": 2}}}}), 400, "unknown_field"},
		{"plan that is not an object", `{"type":"plan","data":{"plan":[1,2]}}`, 400, "malformed"},
		{"unknown type", ev("grow", map[string]any{}), 400, "unknown_type"},
		{"unknown envelope field", `{"type":"demand","data":{"demands":{"/a":1}},"time":"2026-01-01T00:00:00Z"}`, 400, "unknown_field"},
		{"not JSON", `{"type":`, 400, "malformed"},
		{"empty array", `[]`, 400, "bad_request"},
		{"id with a newline", withID(demand(map[string]int{"/a": 1}), "a\nb"), 400, "invalid_id"},
	}
	n := streamMsgs(t, l.js)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, bad := l.post("p", c.body)
			if code != c.status || bad.Reason != c.reason || bad.Error == "" {
				t.Errorf("got %d %+v, want %d %s", code, bad, c.status, c.reason)
			}
		})
	}
	if m := streamMsgs(t, l.js); m != n {
		t.Errorf("stream holds %d messages after refusals, want %d", m, n)
	}
	code, _, bad := l.post("bad.pool", demand(map[string]int{"/a": 1}))
	if code != 400 || bad.Reason != "invalid_pool" {
		t.Errorf("invalid pool name: %d %+v", code, bad)
	}
}

func TestArrayIsAllOrNothing(t *testing.T) {
	l := newLedger(t, testenv.NATS(t))
	// Validated in order: the demand needs the plan before it.
	res := l.mustPost("p", []any{plan(consumer("/a"), consumer("/b")), hostUp("h1", 4), demand(map[string]int{"/a": 3})})
	for i, e := range res.Events {
		if e.Seq != uint64(i+1) {
			t.Errorf("event %d at seq %d, want %d", i, e.Seq, i+1)
		}
	}
	n := streamMsgs(t, l.js)
	code, _, bad := l.post("p", []any{demand(map[string]int{"/b": 1}), release("/a", 3), release("/a", 1)})
	if code != 422 || bad.Reason != "release_too_many" || bad.Index == nil || *bad.Index != 2 {
		t.Errorf("bad third event: %d %+v, want 422 release_too_many at index 2", code, bad)
	}
	if m := streamMsgs(t, l.js); m != n {
		t.Errorf("stream holds %d messages after a refused array, want %d", m, n)
	}
	code, _, bad = l.post("p", []any{withID(demand(map[string]int{"/b": 1}), "x"), withID(demand(map[string]int{"/b": 2}), "x")})
	if code != 400 || bad.Reason != "repeated_id" {
		t.Errorf("repeated id: %d %+v", code, bad)
	}
	// A good array is stored contiguously, and a retry of it is a duplicate.
	arr := []any{withID(demand(map[string]int{"/b": 1}), "b1"), withID(release("/a", 1), "r1")}
	first := l.mustPost("p", arr)
	if first.Events[1].Seq != first.Events[0].Seq+1 {
		t.Errorf("array stored at %+v, want contiguous", first.Events)
	}
	again := l.mustPost("p", arr)
	for i := range again.Events {
		if !again.Events[i].Duplicate || again.Events[i].Seq != first.Events[i].Seq {
			t.Errorf("retried array answered %+v, want duplicates of %+v", again.Events, first.Events)
		}
	}
	if m := streamMsgs(t, l.js); m != n+2 {
		t.Errorf("stream holds %d messages, want %d", m, n+2)
	}
}

func TestArrayStoredWithItsHeaders(t *testing.T) {
	l := newLedger(t, testenv.NATS(t))
	setup(l, "p")
	got := poolEvents(t, l.js, "p")
	if len(got) != 2 || got[0].subject != "ledger.p.plan" || got[1].subject != "ledger.p.host_up" {
		t.Fatalf("stored %+v", got)
	}
	var hu events.HostUp
	if err := json.Unmarshal(got[1].stored.Envelope.Data, &hu); err != nil || hu.Host != "h1" || hu.Slots != 10 {
		t.Errorf("host_up data %s", got[1].stored.Envelope.Data)
	}
	for _, e := range got {
		if id := e.header.Get("Nats-Msg-Id"); id == "" || id != e.stored.Envelope.ID {
			t.Errorf("seq %d: Nats-Msg-Id %q, envelope id %q", e.seq, id, e.stored.Envelope.ID)
		}
	}
}
