package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// The red team's F14, F15, F18 and F19, sent as a scheduler would (a
// token with append and plan on its one pool, as `ledger token add
// --scopes append,plan --pools p` makes): bodies whose text is not UTF-8
// or holds a \u escape of a lone surrogate (encoding/json stored U+FFFD
// in their place), ids with bidi controls or invisible characters, keys
// of another case or unknown ones (encoding/json matched "Type" and
// "DATA"), keys given twice, values of the wrong kind. Each is refused
// with a 400 of its own code, in the API's words naming the field, never
// Go's decoder's ("json: cannot unmarshal ..."), and nothing is appended.
func TestBodiesReadStrictly(t *testing.T) {
	token, tokens := testenv.Token(t, "scheduler", []auth.Scope{auth.ScopeAppend, auth.ScopePlan}, "p")
	l := newLedger(t, testenv.NATS(t), api.WithTokens(tokens))
	l.token = token
	setup(l, "p")
	n := streamMsgs(t, l.js)
	demandBody := `"data":{"demands":{"/a":1}}`
	for _, c := range []struct {
		name, body, reason string
		words              []string // what the message must say
	}{
		// F14, F15: text that is not UTF-8, lone surrogates.
		{"a path with a byte that is not UTF-8", "{\"type\":\"demand\",\"data\":{\"demands\":{\"/a\xff\":1}}}", "invalid_utf8", []string{"not UTF-8"}},
		{"an id with bytes that are not UTF-8", "{\"id\":\"e\xfe\xfe1\",\"type\":\"demand\"," + demandBody + "}", "invalid_utf8", []string{"not UTF-8"}},
		{"a path with a lone high surrogate", `{"type":"plan","data":{"plan":{"consumers":[{"path":"/a"},{"path":"/b\ud800"}]}}}`, "invalid_utf8", []string{"lone UTF-16 surrogate"}},
		{"a host with a lone low surrogate", `{"type":"host_up","data":{"host":"h\udc00","slots":1}}`, "invalid_utf8", []string{"lone UTF-16 surrogate"}},
		{"an id with a lone surrogate", `{"id":"e\ud83d","type":"demand",` + demandBody + `}`, "invalid_utf8", []string{"lone UTF-16 surrogate"}},
		{"an id with a right-to-left override", `{"id":"evt\u202e1","type":"demand",` + demandBody + `}`, "invalid_id", []string{"U+202E", "format character"}},
		{"an id with a zero width space", `{"id":"evt` + "\u200b" + `1","type":"demand",` + demandBody + `}`, "invalid_id", []string{"U+200B"}},
		{"an id with a bidi isolate", `{"id":"\u2066evt","type":"demand",` + demandBody + `}`, "invalid_id", []string{"U+2066"}},
		// F19: keys are case-sensitive; unknown and repeated keys are refused.
		{"Type for type", `{"Type":"demand",` + demandBody + `}`, "unknown_field", []string{`"Type"`, `did you mean "type"`}},
		{"DATA for data", `{"type":"demand","DATA":{"demands":{"/a":1}}}`, "unknown_field", []string{`"DATA"`, `did you mean "data"`}},
		{"Demands in data", `{"type":"demand","data":{"Demands":{"/a":1}}}`, "unknown_field", []string{"field data", `did you mean "demands"`}},
		{"PATH in a plan's consumer", `{"type":"plan","data":{"plan":{"consumers":[{"path":"/a"},{"PATH":"/b"}]}}}`, "unknown_field", []string{"data.plan.consumers[1]", `did you mean "path"`}},
		{"an unknown key", `{"type":"demand",` + demandBody + `,"priority":9}`, "unknown_field", []string{`"priority"`, "its fields: data, id, producer, type, v"}},
		{"type twice", `{"type":"release","type":"demand",` + demandBody + `}`, "duplicate_field", []string{`key "type" appears twice`}},
		{"a demand's path twice", `{"type":"demand","data":{"demands":{"/a":1,"/a":5}}}`, "duplicate_field", []string{`key "/a" appears twice`, "field data.demands:"}},
		// F18: the field and what it needs, in the API's words.
		{"slots as a string", `{"type":"demand","data":{"demands":{"/a":"3"}}}`, "malformed", []string{`data.demands["/a"]`, "a whole number", "not a string"}},
		{"a fraction of a slot", `{"type":"release","data":{"consumer":"/a","slots":1.5}}`, "malformed", []string{"data.slots", "1.5 is not a whole number"}},
		{"slots past 64 bits", `{"type":"host_up","data":{"host":"h2","slots":99999999999999999999}}`, "malformed", []string{"data.slots", "not a whole number from"}},
		{"a type that is a number", `{"type":7,` + demandBody + `}`, "malformed", []string{"field type", "a string is needed, not a number"}},
		{"consumers as an object", `{"type":"plan","data":{"plan":{"consumers":{"path":"/a"}}}}`, "malformed", []string{"data.plan.consumers", "an array is needed, not an object"}},
		{"v as a string", `{"type":"demand","v":"1",` + demandBody + `}`, "malformed", []string{"field v", "a whole number"}},
		{"JSON cut short", `{"type":"demand","data":{"demands":`, "malformed", []string{"ends inside the event"}},
		{"not JSON", `{"type":"demand",` + demandBody + `,}`, "malformed", []string{"not valid JSON", "a '}' cannot stand there"}},
		// Round 10: a syntax error quoted the decoder's words (decision 491).
		{"arrays nested past the decoder's depth", `{"type":"demand","data":` + strings.Repeat("[", 10_001) + strings.Repeat("]", 10_001) + `}`, "malformed", []string{"not valid JSON", "nested too deeply"}},
		{"a letter where a value goes", `{"type":demand}`, "malformed", []string{"not valid JSON at byte", "a 'd' cannot stand there"}},
		// Round 10 (helper-41): a body that is JSON but no event said only
		// "the body could not be read"; a grace in seconds past what a
		// time.Duration holds wrapped around and was stored wrapped (-2^63
		// seconds as 0s, 18446744074 seconds, 584 years, as 290ms); a
		// duration's refusal named no field and quoted Go's time package.
		{"a body that is null", `null`, "malformed", []string{"starts with 'n'", "one event object or an array"}},
		{"a body that is a number", ` 5`, "malformed", []string{"starts with '5'"}},
		{"a body with a byte order mark", "\xef\xbb\xbf{\"type\":\"demand\"," + demandBody + "}", "malformed", []string{"byte order mark"}},
		{"a lend_grace of -2^63 seconds", `{"type":"plan","data":{"plan":{"consumers":[{"path":"/a","own":[{"host":"h1"}],"lend_grace":-9223372036854775808}]}}}`, "malformed", []string{"data.plan.consumers[0].lend_grace", "out of range"}},
		{"a reclaim_grace of 584 years in seconds", `{"type":"plan","data":{"plan":{"consumers":[{"path":"/a","own":[{"host":"h1"}]},{"path":"/b","reclaim_grace":18446744074}]}}}`, "malformed", []string{"data.plan.consumers[1].reclaim_grace", "at most 9223372036 seconds"}},
		{"a duration with an unknown unit", `{"type":"plan","data":{"plan":{"consumers":[{"path":"/a","own":[{"host":"h1"}],"lend_grace":"5x"}]}}}`, "malformed", []string{"data.plan.consumers[0].lend_grace", `"5x" is not a duration like`}},
	} {
		resp, raw := l.request(http.MethodPost, "/v1/pools/p/events", c.body, nil)
		checkOwnWords(t, c.name, errorOf(t, c.name, resp, raw, http.StatusBadRequest, c.reason), c.words...)
	}
	// The same in an array: the index of the event at fault.
	resp, raw := l.request(http.MethodPost, "/v1/pools/p/events", `[{"type":"demand",`+demandBody+`},{"type":"demand","data":{"demands":{"/A":1}},"Id":"x"}]`, nil)
	errorOf(t, "Id in the second event", resp, raw, http.StatusBadRequest, "unknown_field")
	var e client.ErrorBody
	mustUnmarshal(t, raw, &e)
	if e.Index == nil || *e.Index != 1 {
		t.Errorf("the refusal names event %v, want 1: %s", e.Index, raw)
	}
	// A what-if's body is read as strictly.
	reader, readTokens := testenv.Token(t, "dashboard", []auth.Scope{auth.ScopeRead}, "p")
	lr := newLedger(t, l.nc.ConnectedUrl(), api.WithTokens(readTokens))
	lr.token = reader
	for _, c := range []struct{ name, body, reason, word string }{
		{"Events for events", `{"Events":[]}`, "unknown_field", `did you mean "events"`},
		{"a hypothetical event's Type", `{"events":[{"Type":"demand","data":{"demands":{"/a":1}}}]}`, "unknown_field", `did you mean "type"`},
		{"at_seq as a string", `{"at_seq":"3","events":[]}`, "malformed", "field at_seq"},
		{"a lone surrogate in a what-if", `{"events":[{"type":"demand","data":{"demands":{"/a\udfff":1}}}]}`, "invalid_utf8", "lone UTF-16 surrogate"},
	} {
		resp, raw := lr.request(http.MethodPost, "/v1/pools/p/what-if", c.body, nil)
		checkOwnWords(t, c.name, errorOf(t, c.name, resp, raw, http.StatusBadRequest, c.reason), c.word)
	}
	if m := streamMsgs(t, l.js); m != n {
		t.Fatalf("the stream holds %d messages after the refusals, want %d", m, n)
	}
	// What is well formed still goes in: escapes of characters, a
	// surrogate pair, every field in its own case.
	l.mustPost("p", `[{"id":"caf\u00e9-1","type":"demand","v":1,"producer":"scheduler","data":{"demands":{"/a":2}}},`+
		`{"type":"plan","data":{"plan":{"consumers":[{"path":"/a"},{"path":"/b"},{"path":"/\u00e9quipe"}]}}}]`)
}

// checkOwnWords fails unless msg holds each of words and none of Go's
// decoder's phrases.
func checkOwnWords(t *testing.T, what, msg string, words ...string) {
	t.Helper()
	for _, w := range words {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: %s does not say %q", what, msg, w)
		}
	}
	for _, goWords := range []string{"json:", "jsontext", "Go struct", "unmarshal", "Go value", "[]uint8", "int64", "time:", "could not be read",
		"invalid character", "looking for beginning", "exceeded max depth", "after object key"} {
		if strings.Contains(msg, goWords) {
			t.Errorf("%s: %s quotes Go's decoder (%q)", what, msg, goWords)
		}
	}
}
