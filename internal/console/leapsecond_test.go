package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/console"
)

// TestLeapSecondTimesReadAlike: a leap second (23:59:60) given to the
// time travel (as-of ?time=), to a what-if's at_time and to a
// hypothetical event's time is the next minute's first instant, as
// PostgreSQL reads it in allocations_as_of_time (decision 520): all
// three answer the point just after an event stamped exactly then, as the
// SQL does. They refused it before (Go's time.Parse cannot read :60),
// each in its own words, while the SQL took it. A leap second with a
// fraction (60.5) is refused by each with the one message (and by
// PostgreSQL).
func TestLeapSecondTimesReadAlike(t *testing.T) {
	var now atomic.Pointer[time.Time]
	set := func(s string) {
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		now.Store(&at)
	}
	set("2016-12-31T23:59:59Z")
	s := newService(t, api.WithClock(func() time.Time { return *now.Load() }))
	s.send(t, "p", &events.PlanChange{Plan: events.Plan{Consumers: events.ConsumerList{{Path: "/A"}}}},
		&events.HostUp{Host: "h1", Slots: 8}, &events.Demand{Demands: map[string]int64{"/A": 1}})
	set("2017-01-01T00:00:00Z")
	last := s.send(t, "p", &events.Demand{Demands: map[string]int64{"/A": 3}})[0]
	set("2017-01-01T00:00:30Z")
	s.send(t, "p", &events.Demand{Demands: map[string]int64{"/A": 5}})
	s.waitProjected(t, "p", last+1)

	const leap, leapFraction = "2016-12-31T23:59:60Z", "2016-12-31T23:59:60.5Z"
	const refusal = `"2016-12-31T23:59:60.5Z" is not an RFC 3339 time like 2026-01-02T15:04:05Z`

	// The SQL: the reporting function reads it as 00:00:00, the event
	// stamped then included.
	var sqlSlots int64
	if err := s.db.QueryRow(context.Background(), `SELECT coalesce(sum(slots), 0) FROM allocations_as_of_time('p', $1::text::timestamptz) WHERE consumer = '/A'`, leap).Scan(&sqlSlots); err != nil {
		t.Fatal(err)
	}
	if sqlSlots != 3 {
		t.Fatalf("allocations_as_of_time at %s: /A holds %d, want 3 (the event stamped 00:00:00)", leap, sqlSlots)
	}

	// Time travel.
	var a console.AsOfResponse
	getJSON(t, s.url+"/v1/pools/p/as-of?time="+leap, "", &a)
	if a.Seq != last {
		t.Errorf("as-of ?time=%s: seq %d, want %d (the event stamped 00:00:00)", leap, a.Seq, last)
	}
	for _, c := range a.Consumers {
		if c.Path == "/A" && c.Allocated != sqlSlots {
			t.Errorf("as-of ?time=%s: /A holds %d, the SQL says %d", leap, c.Allocated, sqlSlots)
		}
	}
	if status, body := get(t, s.url+"/v1/pools/p/as-of?time="+leapFraction, ""); status != http.StatusBadRequest || !strings.Contains(errorText(body), refusal) {
		t.Errorf("as-of ?time=%s: %d %s; want 400 saying %s", leapFraction, status, body, refusal)
	}

	// What-if: the fork point and a hypothetical event's time.
	post := func(body string) (int, []byte) {
		t.Helper()
		resp, err := http.Post(s.url+"/v1/pools/p/what-if", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	status, body := post(`{"at_time":"` + leap + `","events":[{"type":"demand","time":"2017-01-01T00:00:60Z","data":{"demands":{"/A":2}}}]}`)
	var w client.WhatIf
	if status != http.StatusOK || json.Unmarshal(body, &w) != nil {
		t.Fatalf("what-if at_time %s: %d %s", leap, status, body)
	}
	if w.At.Seq != last {
		t.Errorf("what-if at_time %s: forked at %d, want %d", leap, w.At.Seq, last)
	}
	if len(w.Events) != 1 || !w.Events[0].Time.Equal(time.Date(2017, 1, 1, 0, 1, 0, 0, time.UTC)) {
		t.Errorf("what-if event at 00:00:60: %+v, want it at 00:01:00", w.Events)
	}
	for _, body := range []string{`{"at_time":"` + leapFraction + `","events":[]}`,
		`{"events":[{"type":"demand","time":"` + leapFraction + `","data":{"demands":{"/A":2}}}]}`} {
		if status, got := post(body); status != http.StatusBadRequest || !strings.Contains(errorText(got), refusal) {
			t.Errorf("what-if %s: %d %s; want 400 saying %s", body, status, got, refusal)
		}
	}
}

// errorText is the "error" of an error body.
func errorText(body []byte) string {
	var e struct{ Error string }
	_ = json.Unmarshal(body, &e)
	return e.Error
}
