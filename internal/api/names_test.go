package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// Names an event introduces (plan paths, hosts and groups) that would
// look like another name, or like nothing, are refused with 422
// invalid_name naming the code point, and nothing is appended; names in
// NFC of any script are accepted. The token is a planner's: plan scope on
// its one pool.
func TestLookAlikeAndInvisibleNamesRefused(t *testing.T) {
	token, tokens := testenv.Token(t, "planner", []auth.Scope{auth.ScopePlan, auth.ScopeAppend}, "p")
	l := newLedger(t, testenv.NATS(t), api.WithTokens(tokens))
	l.token = token
	setup(l, "p")
	n := streamMsgs(t, l.js)
	planOf := func(path string) string {
		return `{"type":"plan","data":{"plan":{"consumers":[{"path":"/a"},{"path":"` + path + `"}]}}}`
	}
	for _, c := range []struct {
		name, body, codePoint string
	}{
		{"right-to-left override", planOf(`/team\u202eb`), "U+202E"},
		{"zero width space", planOf(`/team\u200ba`), "U+200B"},
		{"fullwidth letters", planOf(`/ｔｅａｍ`), "U+FF54"},
		{"NFD beside NFC", planOf(`/cafe\u0301`), "U+0301"},
		{"host with a zero width joiner", `{"type":"host_up","data":{"host":"h\u200d2","slots":1}}`, "U+200D"},
		{"host with a bidi isolate", `{"type":"host_up","data":{"host":"\u2066h2","slots":1}}`, "U+2066"},
		{"fullwidth group", `{"type":"host_up","data":{"host":"h2","group":"ｇｐｕ","slots":1}}`, "U+FF47"},
		{"owned host with a soft hyphen", `{"type":"plan","data":{"plan":{"rules":3,"consumers":[{"path":"/a","own":[{"host":"h\u00ad1"}]}]}}}`, "U+00AD"},
	} {
		resp, raw := l.request(http.MethodPost, "/v1/pools/p/events", c.body, nil)
		errorOf(t, c.name, resp, raw, http.StatusUnprocessableEntity, "invalid_name")
		if !strings.Contains(string(raw), c.codePoint) {
			t.Errorf("%s: %s does not name %s", c.name, raw, c.codePoint)
		}
	}
	if m := streamMsgs(t, l.js); m != n {
		t.Fatalf("stream holds %d messages after refusals, want %d", m, n)
	}
	// NFC names of any script are accepted.
	resp, raw := l.request(http.MethodPost, "/v1/pools/p/events",
		`[{"type":"plan","data":{"plan":{"consumers":[{"path":"/café/équipe"},{"path":"/チーム/開発"},{"path":"/команда"}]}}},`+
			`{"type":"host_up","data":{"host":"hôte-1","group":"grün","slots":4}}]`, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("NFC names: %d %s", resp.StatusCode, raw)
	}
}

// The red team's F13, as a planner (plan scope on its one pool): names
// whose components mix scripts as look-alikes do (a Cyrillic "а" or a
// Greek "ο" among Latin letters, a Cherokee letter, digits of another
// numbering system beside Latin letters) are refused 422 invalid_name
// naming the scripts and code points, in a plan's paths, a host, a
// group and an own entry alike, and nothing is appended; a component of
// one script, and the mixes people write, go in.
func TestMixedScriptNamesRefused(t *testing.T) {
	token, tokens := testenv.Token(t, "planner", []auth.Scope{auth.ScopePlan, auth.ScopeAppend}, "p")
	l := newLedger(t, testenv.NATS(t), api.WithTokens(tokens))
	l.token = token
	setup(l, "p")
	n := streamMsgs(t, l.js)
	planOf := func(path string) string {
		return `{"type":"plan","data":{"plan":{"consumers":[{"path":"/a"},{"path":"` + path + `"}]}}}`
	}
	for _, c := range []struct{ name, body, words string }{
		{"a Cyrillic а in a Latin path", planOf("/team/аdmin"), "Cyrillic (U+0430)"},
		{"a Greek ο in a Latin path", planOf("/prod/gpu-οne"), "Greek (U+03BF)"},
		{"a Cherokee letter in a Latin path", planOf("/eng/Ꭺlpha"), "Cherokee"},
		{"Bengali digits beside Latin letters", planOf("/gpu-৪"), "digits other than 0-9"},
		{"a host label mixing Latin and Cyrillic", `{"type":"host_up","data":{"host":"gpu-01.rаck","slots":1}}`, "Cyrillic (U+0430)"},
		{"a group mixing Latin and Greek", `{"type":"host_up","data":{"host":"h2","group":"gpυ","slots":1}}`, "Greek (U+03C5)"},
		{"an owned host mixing Latin and Cyrillic", `{"type":"plan","data":{"plan":{"rules":3,"consumers":[{"path":"/a","own":[{"host":"hоst1"}]}]}}}`, "Cyrillic (U+043E)"},
	} {
		resp, raw := l.request(http.MethodPost, "/v1/pools/p/events", c.body, nil)
		msg := errorOf(t, c.name, resp, raw, http.StatusUnprocessableEntity, "invalid_name")
		if !strings.Contains(msg, c.words) || !strings.Contains(msg, "mixes scripts") && !strings.Contains(msg, "digits") {
			t.Errorf("%s: %q does not say %q", c.name, msg, c.words)
		}
	}
	if m := streamMsgs(t, l.js); m != n {
		t.Fatalf("stream holds %d messages after refusals, want %d", m, n)
	}
	resp, raw := l.request(http.MethodPost, "/v1/pools/p/events",
		`[{"type":"plan","data":{"plan":{"consumers":[{"path":"/team/команда"},{"path":"/チーム/開発-dev"},{"path":"/ml-فريق"},{"path":"/ομάδα"}]}}},`+
			`{"type":"host_up","data":{"host":"узел-1.example","group":"研究-gpu","slots":4}}]`, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("names of one script a component, and Latin with Han or Arabic: %d %s", resp.StatusCode, raw)
	}
}
