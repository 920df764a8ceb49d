package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// whatIf posts a what-if with the ledger's admin token and decodes the
// answer (200) or the error.
func (l *ledger) whatIf(pool, body string, hdr map[string]string) (int, client.WhatIf, client.ErrorBody) {
	l.t.Helper()
	resp, raw := l.request(http.MethodPost, "/v1/pools/"+pool+"/what-if", body, hdr)
	var res client.WhatIf
	var bad client.ErrorBody
	if resp.StatusCode == http.StatusOK {
		mustUnmarshal(l.t, raw, &res)
	} else {
		mustUnmarshal(l.t, raw, &bad)
	}
	return resp.StatusCode, res, bad
}

// TestWhatIfWithoutProjection: a ledger without PostgreSQL forks a pool
// from its first event. Each hypothetical event is judged on its own: a
// refused one is reported with its code and takes no sequence; one dated
// before the event before it is refused; the others get the sequences
// after the fork's, one second apart from the fork's time. Nothing is
// appended.
func TestWhatIfWithoutProjection(t *testing.T) {
	clock := &fixedClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	l := newLedger(t, testenv.NATS(t), api.WithClock(clock.Now))
	setup(l, "p")
	last := l.mustPost("p", demand(map[string]int{"/a": 8})).Events[0].Seq
	msgs := streamMsgs(t, l.js)
	clock.Set(clock.Now().Add(time.Hour))

	body := `{"events": [
		{"type": "demand", "data": {"demands": {"/nobody": 1}}},
		{"type": "demand", "data": {"demands": {"/b": 6}}},
		{"type": "release", "data": {"consumer": "/a", "slots": 1}, "time": "2026-01-01T00:00:00Z"},
		{"type": "release", "data": {"consumer": "/a", "slots": 2}}
	]}`
	code, res, bad := l.whatIf("p", body, nil)
	if code != http.StatusOK {
		t.Fatalf("what-if: %d %+v", code, bad)
	}
	if res.Appended || res.At.Seq != last || streamMsgs(t, l.js) != msgs {
		t.Fatalf("answer at %+v, appended %v; the stream holds %d messages, had %d", res.At, res.Appended, streamMsgs(t, l.js), msgs)
	}
	now := clock.Now()
	want := []client.WhatIfOutcome{
		{Index: 0, Type: "demand", Time: now, Refused: client.CodeUnknownConsumer},
		{Index: 1, Type: "demand", Time: now.Add(time.Second), Seq: last + 1},
		{Index: 2, Type: "release", Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Refused: client.CodeMalformed},
		{Index: 3, Type: "release", Time: time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC), Refused: client.CodeMalformed},
	}
	for i, w := range want {
		got := res.Events[i]
		got.Refusal = ""
		if !got.Time.Equal(w.Time) || got.Seq != w.Seq || got.Refused != w.Refused || got.Index != w.Index || got.Type != w.Type {
			t.Errorf("event %d: %+v, want %+v (%s)", i, got, w, res.Events[i].Refusal)
		}
	}
	if !strings.Contains(res.Events[0].Refusal, "/nobody") || !strings.Contains(res.Events[2].Refusal, "before the pool's previous event") {
		t.Errorf("refusals in words: %q, %q", res.Events[0].Refusal, res.Events[2].Refusal)
	}
	// /a held 8 of 10 slots; /b asking for 6 takes the 2 free, then (equal
	// shares of 10 among four leaves) reclaims from /a.
	var got int64
	for _, d := range res.Decisions {
		if d.Consumer == "/b" && d.Event == 1 && d.EventSeq == last+1 {
			got += d.Slots
		}
	}
	if got == 0 {
		t.Errorf("no decision gives /b slots: %+v", res.Decisions)
	}
	for _, c := range res.Consumers {
		if c.Path == "/b" && (c.Before.Demand != 0 || c.After.Demand != 6 || c.After.Allocated != got || c.After.Unmet != 6-got || !c.Changed) {
			t.Errorf("/b: %+v -> %+v", c.Before, c.After)
		}
	}
}

// TestWhatIfBounds: a what-if is bounded like every input, checked
// before any work: the scope, the body, the events (count, form, the
// limits of an append), one point; and its work by a time budget.
func TestWhatIfBounds(t *testing.T) {
	natsURL := testenv.NATS(t)
	l := newLedger(t, natsURL)
	setup(l, "p")
	ev := `{"type": "demand", "data": {"demands": {"/a": 1}}}`
	many := `{"events": [` + strings.TrimSuffix(strings.Repeat(ev+",", api.MaxWhatIfEvents+1), ",") + `]}`
	for _, c := range []struct {
		name, body string
		hdr        map[string]string
		status     int
		reason     string
	}{
		{"too many events", many, nil, 400, "too_many_events"},
		{"too large", `{"events": [` + ev + `], "x": "` + strings.Repeat("x", api.MaxBody) + `"}`, nil, 413, "too_large"},
		{"two points", `{"at_seq": 1, "at_time": "2026-01-01T00:00:00Z", "events": []}`, nil, 400, "bad_request"},
		// Sequence 0 and the zero time named no point and forked the
		// present (decision 374).
		{"at_seq 0", `{"at_seq": 0, "events": []}`, nil, 400, "bad_request"},
		{"the zero time", `{"at_time": "0001-01-01T00:00:00Z", "events": []}`, nil, 400, "bad_request"},
		// Past the log's end it forked the pool's last event (decision 507).
		{"at_seq past the log's end", `{"at_seq": 1000000, "events": []}`, nil, 400, "bad_request"},
		{"unknown field", `{"events": [], "at": 3}`, nil, 400, "unknown_field"},
		{"trailing data", `{"events": []} {}`, nil, 400, "trailing_data"},
		{"unknown type", `{"events": [{"type": "nope", "data": {}}]}`, nil, 400, "unknown_type"},
		{"unknown event field", `{"events": [{"type": "demand", "data": {"demands": {}}, "id": "x"}]}`, nil, 400, "unknown_field"},
		{"an event over the limits", `{"events": [{"type": "demand", "data": {"demands": {"/` + strings.Repeat("x", 300) + `": 1}}}]}`, nil, 422, "path_too_long"},
		{"not JSON", `{"events": []}`, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type"},
		{"no token", `{"events": []}`, map[string]string{"Authorization": ""}, 401, "unauthenticated"},
		{"another origin", `{"events": []}`, map[string]string{"Origin": "http://evil.example"}, 403, "origin_not_allowed"},
		{"invalid pool", `{"events": []}`, nil, 400, "invalid_pool"},
	} {
		pool := "p"
		if c.name == "invalid pool" {
			pool = "a.b"
		}
		code, _, bad := l.whatIf(pool, c.body, c.hdr)
		if code != c.status || bad.Reason != c.reason || bad.Error == "" {
			t.Errorf("%s: %d %+v, want %d %s", c.name, code, bad, c.status, c.reason)
		}
	}
	// The console's own page may ask (a POST that reads).
	if code, _, bad := l.whatIf("p", `{"events": []}`, map[string]string{"Origin": l.url}); code != 200 {
		t.Errorf("same-origin what-if: %d %+v", code, bad)
	}
	// A token with the read scope on the pool is enough; append is not.
	reader, readers := testenv.Token(t, "reader", []auth.Scope{auth.ScopeRead}, "p")
	producer, producers := testenv.Token(t, "producer", []auth.Scope{auth.ScopeAppend}, "p")
	for _, c := range []struct {
		token  string
		tokens *auth.Tokens
		status int
	}{{reader, readers, 200}, {producer, producers, 403}} {
		lt := newLedger(t, natsURL, api.WithTokens(c.tokens))
		if code, _, bad := lt.whatIf("p", `{"events": [`+ev+`]}`, map[string]string{"Authorization": "Bearer " + c.token}); code != c.status {
			t.Errorf("what-if with a token of %v: %d %+v, want %d", c.tokens, code, bad, c.status)
		}
	}

	// Past its time budget the answer is 503 what_if_timeout, with
	// Retry-After.
	slow := newLedger(t, natsURL, api.WithWhatIfLimits(time.Nanosecond, 1))
	resp, raw := slow.request(http.MethodPost, "/v1/pools/p/what-if", `{"events": [`+ev+`]}`, nil)
	var bad client.ErrorBody
	_ = json.Unmarshal(raw, &bad)
	if resp.StatusCode != 503 || bad.Reason != "what_if_timeout" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a what-if past its budget: %d %s, Retry-After %q", resp.StatusCode, raw, resp.Header.Get("Retry-After"))
	}
}

// TestWhatIfSlots: what-ifs run at most n at once and one per pool; a
// request beyond is answered 503 busy at once, so one pool's what-ifs
// cannot take the slots of the others.
func TestWhatIfSlots(t *testing.T) {
	natsURL := testenv.NATS(t)
	l := newLedger(t, natsURL, api.WithWhatIfLimits(time.Minute, 2))
	for _, pool := range []string{"p", "q", "r"} {
		setup(l, pool)
	}
	release := l.srv.HoldWhatIfSlots(t, "p", "another") // a what-if of p is running, another token's
	for _, c := range []struct {
		pool   string
		status int
	}{{"p", 503}, {"q", 200}} {
		code, _, bad := l.whatIf(c.pool, `{"events": []}`, nil)
		if code != c.status || (code == 503 && bad.Reason != "busy") {
			t.Errorf("what-if of %s while one of p runs: %d %+v, want %d", c.pool, code, bad, c.status)
		}
	}
	release2 := l.srv.HoldWhatIfSlots(t, "q", "a third") // both slots taken
	if code, _, bad := l.whatIf("r", `{"events": []}`, nil); code != 503 || bad.Reason != "busy" {
		t.Errorf("what-if of r with every slot taken: %d %+v, want 503 busy", code, bad)
	}
	release()
	release2()
	if code, _, bad := l.whatIf("r", `{"events": []}`, nil); code != 200 {
		t.Errorf("what-if of r once the slots are free: %d %+v", code, bad)
	}
}

// TestWhatIfOneAtATimePerToken: a token runs one what-if (or time travel,
// which takes the same slots) at a time. An operator's token that reads
// two pools held both of the default two slots, one what-if after
// another, and every other token's what-ifs and time travel were
// answered busy for as long as it went on (decision 396); now its second
// is busy and the team's goes through.
func TestWhatIfOneAtATimePerToken(t *testing.T) {
	natsURL := testenv.NATS(t)
	admin, ae := mustToken(t, "admin", auth.Scopes, auth.AllPools)
	operator, oe := mustToken(t, "operator", []auth.Scope{auth.ScopeRead}, "p", "q")
	team, te := mustToken(t, "team", []auth.Scope{auth.ScopeRead}, "r")
	tokens, err := auth.New(ae, oe, te)
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger(t, natsURL, api.WithTokens(tokens)) // the default slots
	l.token = admin
	for _, pool := range []string{"p", "q", "r"} {
		setup(l, pool)
	}
	as := func(token, pool string) (int, client.ErrorBody) {
		t.Helper()
		code, _, bad := l.whatIf(pool, `{"events": []}`, map[string]string{"Authorization": "Bearer " + token})
		return code, bad
	}
	release := l.srv.HoldWhatIfSlots(t, "p", "operator") // the operator's what-if of p is running
	if code, bad := as(operator, "q"); code != 503 || bad.Reason != "busy" {
		t.Errorf("the operator's what-if of q while its what-if of p runs: %d %+v, want 503 busy", code, bad)
	}
	if code, bad := as(team, "r"); code != 200 {
		t.Errorf("the team's what-if of r while the operator's runs: %d %+v, want 200", code, bad)
	}
	release()
	if code, bad := as(operator, "q"); code != 200 {
		t.Errorf("the operator's what-if of q once its other ended: %d %+v, want 200", code, bad)
	}
}

// TestExplainTakesAForkSlot: an explain story re-folds the pool's log as
// a time travel does, so it takes one of the same slots. A read token of
// one large pool sending 64 explains at once (its requests in progress)
// held both cores for seconds: another pool's appends waited 1.6 s at
// the 90th percentile (decision 397). Now the reader's explain waits for
// its own running fork and for a free slot: 503 busy with Retry-After,
// which the console's page retries.
func TestExplainTakesAForkSlot(t *testing.T) {
	e := newExposed(t)
	setup(e.ledger, "p")
	e.mustPost("p", demand(map[string]int{"/a": 4}))
	e.waitDecisions(1)
	var seq uint64
	if err := e.db.QueryRow(context.Background(), "SELECT max(event_seq) FROM decisions WHERE pool = 'p'").Scan(&seq); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/v1/pools/p/decisions/%d/0/explain", seq)
	explain := func(want int, why string) {
		t.Helper()
		resp, raw := e.read(path) // as the reader: read on p
		var bad client.ErrorBody
		if want != 200 {
			mustUnmarshal(t, raw, &bad)
		}
		if resp.StatusCode != want || (want == 503 && (bad.Reason != "busy" || resp.Header.Get("Retry-After") == "")) {
			t.Errorf("explain %s: %d %s, want %d", why, resp.StatusCode, raw, want)
		}
	}
	explain(200, "with every slot free")
	release := e.srv.HoldWhatIfSlots(t, "p", "reader") // the reader's time travel of p runs
	explain(503, "while the reader's own fork of p runs")
	release()
	release1 := e.srv.HoldWhatIfSlots(t, "q", "another")
	release2 := e.srv.HoldWhatIfSlots(t, "r", "a third")
	explain(503, "with both slots taken by other tokens")
	release1()
	explain(200, "once a slot is free")
	release2()
}
