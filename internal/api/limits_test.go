package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// Each limit, and each malformed body, is refused with its reason and
// appends nothing.
func TestLimitsAndBodyForm(t *testing.T) {
	l := newLedger(t, testenv.NATS(t))
	setup(l, "p")
	n := streamMsgs(t, l.js)
	deep := strings.Repeat("/a", events.MaxPathDepth+1)
	long := "/" + strings.Repeat("x", events.MaxPathLen)
	demand := `{"type":"demand","data":{"demands":{"/a":1}}}`
	manyConsumers := func(n int, prefix string) string {
		cs := make([]string, n)
		for i := range cs {
			cs[i] = fmt.Sprintf(`{"path":"%s/c%d"}`, prefix, i)
		}
		return `{"type":"plan","data":{"plan":{"consumers":[` + strings.Join(cs, ",") + `]}}}`
	}
	cases := []struct {
		name, body string
		status     int
		reason     string
	}{
		{"trailing data", demand + ` x`, 400, "trailing_data"},
		{"two events, not an array", demand + "\n" + demand, 400, "trailing_data"},
		{"array then more", `[` + demand + `] []`, 400, "trailing_data"},
		{"empty body", " \n", 400, "bad_request"},
		{"not an object", `"demand"`, 400, "malformed"},
		{"oversized body", `{"type":"demand","data":{"demands":{"/a":1}},"id":"` + strings.Repeat("x", api.MaxBody) + `"}`, 413, "too_large"},
		{"too many events", `[` + strings.Repeat(demand+",", api.MaxBatch) + demand + `]`, 400, "too_many_events"},
		{"path too long", `{"type":"plan","data":{"plan":{"consumers":[{"path":"` + long + `"}]}}}`, 422, "path_too_long"},
		{"path too deep", `{"type":"plan","data":{"plan":{"consumers":[{"path":"` + deep + `"}]}}}`, 422, "path_too_deep"},
		{"demand path too long", `{"type":"demand","data":{"demands":{"` + long + `":1}}}`, 422, "path_too_long"},
		{"too many consumers", manyConsumers(events.MaxPlanConsumers+1, ""), 422, "too_many_consumers"},
		// 2048 listed, plus the implied parent /g: one too many.
		{"too many with implied parents", manyConsumers(events.MaxPlanConsumers, "/g"), 422, "too_many_consumers"},
		{"host name with a space", `{"type":"host_up","data":{"host":"h 1","slots":1}}`, 422, "invalid_host_name"},
		{"host name with *", `{"type":"host_up","data":{"host":"h*","slots":1}}`, 422, "invalid_host_name"},
		{"host name with >", `{"type":"host_up","data":{"host":">","slots":1}}`, 422, "invalid_host_name"},
		{"host name ..", `{"type":"host_up","data":{"host":"..","slots":1}}`, 422, "invalid_host_name"},
		{"host name with /", `{"type":"host_down","data":{"host":"a/b"}}`, 422, "invalid_host_name"},
		{"host name too long", `{"type":"host_up","data":{"host":"` + strings.Repeat("h", events.MaxHostNameLen+1) + `","slots":1}}`, 422, "invalid_host_name"},
	}
	for _, c := range cases {
		resp, raw := l.request(http.MethodPost, "/v1/pools/p/events", c.body, nil)
		errorOf(t, c.name, resp, raw, c.status, c.reason)
	}
	if m := streamMsgs(t, l.js); m != n {
		t.Errorf("stream holds %d messages after refusals, want %d", m, n)
	}
}

// A pool takes at most events.MaxHostsPerPool hosts; a host already known
// (down, then up again) does not count twice.
func TestHostsPerPool(t *testing.T) {
	l := newLedger(t, testenv.NATS(t))
	setup(l, "p") // h1
	for start := 2; start <= events.MaxHostsPerPool; start += api.MaxBatch {
		var evs []string
		for i := start; i < start+api.MaxBatch && i <= events.MaxHostsPerPool; i++ {
			evs = append(evs, fmt.Sprintf(`{"type":"host_up","data":{"host":"h%d","slots":1}}`, i))
		}
		if resp, raw := l.request(http.MethodPost, "/v1/pools/p/events", "["+strings.Join(evs, ",")+"]", nil); resp.StatusCode != 200 {
			t.Fatalf("hosts from h%d: %d %s", start, resp.StatusCode, raw)
		}
	}
	resp, raw := l.request(http.MethodPost, "/v1/pools/p/events", `{"type":"host_up","data":{"host":"one-more","slots":1}}`, nil)
	errorOf(t, "one host too many", resp, raw, 422, "too_many_hosts")
	l.mustPost("p", ev("host_down", map[string]any{"host": "h7"}))
	l.mustPost("p", hostUp("h7", 2))
}

// The same id with the same content is a duplicate (200); with other
// content it is a conflict (409), through this instance or another one.
func TestIDReusedWithOtherContent(t *testing.T) {
	natsURL := testenv.NATS(t)
	l := newLedger(t, natsURL)
	setup(l, "p")
	first := l.mustPost("p", withID(demand(map[string]int{"/a": 2}), "d-1"))
	n := streamMsgs(t, l.js)
	again := l.mustPost("p", withID(demand(map[string]int{"/a": 2}), "d-1"))
	if !again.Events[0].Duplicate || again.Events[0].Seq != first.Events[0].Seq {
		t.Errorf("same content: %+v, want a duplicate of %d", again.Events[0], first.Events[0].Seq)
	}
	for _, inst := range []*ledger{l, newLedger(t, natsURL)} {
		code, _, bad := inst.post("p", withID(demand(map[string]int{"/a": 3}), "d-1"))
		if code != http.StatusConflict || bad.Reason != "id_conflict" {
			t.Errorf("other content: %d %+v, want 409 id_conflict", code, bad)
		}
		code, _, bad = inst.post("p", []any{withID(demand(map[string]int{"/b": 1}), "d-2"), withID(release("/a", 1), "d-1")})
		if code != http.StatusConflict || bad.Reason != "id_conflict" || bad.Index == nil || *bad.Index != 1 {
			t.Errorf("other content in an array: %d %+v, want 409 id_conflict at 1", code, bad)
		}
	}
	if m := streamMsgs(t, l.js); m != n {
		t.Errorf("stream holds %d messages, want %d", m, n)
	}
}

// TestRetryAfterTheWindowIsADuplicate: a retry that comes after the
// duplicate window (JetStream has forgotten the id) is answered as a
// duplicate of the event the pool applied, by this instance and by a new
// one that folded the pool from the log, and nothing is stored again (a
// late retried release would otherwise release twice).
func TestRetryAfterTheWindowIsADuplicate(t *testing.T) {
	natsURL := testenv.NATS(t)
	clock := &fixedClock{now: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	l := newLedger(t, natsURL, api.WithClock(clock.Now))
	setup(l, "p")
	l.mustPost("p", demand(map[string]int{"/a": 3}))
	first := l.mustPost("p", withID(release("/a", 1), "r-1"))
	n := streamMsgs(t, l.js)
	clock.Set(clock.Now().Add(stream.DuplicateWindow + time.Minute))
	for _, inst := range []*ledger{l, newLedger(t, natsURL, api.WithClock(clock.Now))} {
		again := inst.mustPost("p", withID(release("/a", 1), "r-1"))
		if !again.Events[0].Duplicate || again.Events[0].Seq != first.Events[0].Seq {
			t.Errorf("late retry: %+v, want a duplicate of %d", again.Events[0], first.Events[0].Seq)
		}
	}
	if m := streamMsgs(t, l.js); m != n {
		t.Errorf("stream holds %d messages, want %d: the late retry was stored", m, n)
	}
}
