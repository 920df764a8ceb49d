package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/stream"
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

// Names that differ only by case, under Unicode case folding, are one
// name to a reader: as a planner (plan scope on its pools), a plan
// listing "/a/b" and "/A/b" (or whose implied parents differ so, or
// "/straße" beside "/STRASSE"), a host or group differing only by case
// from one the pool has, and a new pool "Prod" beside "prod" are
// refused 422 invalid_name naming both, and nothing is appended. A plan
// may rename "/a" to "/A" (the old path is gone with the old plan), and
// a host coming back up is not new.
func TestNamesDifferingOnlyByCaseRefused(t *testing.T) {
	token, tokens := testenv.Token(t, "planner", []auth.Scope{auth.ScopePlan}, "prod", "Prod", "p")
	l := newLedger(t, testenv.NATS(t), api.WithTokens(tokens))
	l.token = token
	post := func(pool, body string) (*http.Response, []byte) {
		t.Helper()
		return l.request(http.MethodPost, "/v1/pools/"+pool+"/events", body, nil)
	}
	if resp, raw := post("p", `[{"type":"plan","data":{"plan":{"rules":3,"consumers":[{"path":"/a"},{"path":"/b","own":[{"host":"h1"}]}]}}},`+
		`{"type":"host_up","data":{"host":"h1","group":"gpu","slots":4}},{"type":"host_up","data":{"host":"h2","slots":4}}]`); resp.StatusCode != http.StatusOK {
		t.Fatalf("setup: %d %s", resp.StatusCode, raw)
	}
	n := streamMsgs(t, l.js)
	planOf := func(consumers string) string {
		return `{"type":"plan","data":{"plan":{"rules":3,"consumers":[` + consumers + `]}}}`
	}
	for _, c := range []struct {
		name, body string
		names      []string
	}{
		{"paths", planOf(`{"path":"/a/b"},{"path":"/a/B"}`), []string{`\"/a/B\"`, `\"/a/b\"`}},
		{"parents of listed paths", planOf(`{"path":"/a/b"},{"path":"/A/b"}`), []string{`\"/A\"`, `\"/a\"`}},
		{"implied parents", planOf(`{"path":"/Team/x"},{"path":"/team/y"}`), []string{`\"/team\"`, `\"/Team\"`}},
		{"full case folding", planOf(`{"path":"/straße"},{"path":"/STRASSE"}`), []string{`\"/STRASSE\"`, `\"/straße\"`}},
		{"greek final sigma", planOf(`{"path":"/οδος"},{"path":"/οδοσ"}`), []string{`\"/οδοσ\"`, `\"/οδος\"`}},
		{"a host of the pool", `{"type":"host_up","data":{"host":"H1","slots":4}}`, []string{`\"H1\"`, `\"h1\"`}},
		{"a host of the same request", `[{"type":"host_up","data":{"host":"h3","slots":1}},{"type":"host_up","data":{"host":"H3","slots":1}}]`, []string{`\"H3\"`, `\"h3\"`}},
		{"a group of the pool", `{"type":"host_up","data":{"host":"h4","group":"GPU","slots":4}}`, []string{`\"GPU\"`, `\"gpu\"`}},
		{"the default group", `{"type":"host_up","data":{"host":"h4","group":"Default","slots":4}}`, []string{`\"Default\"`, `\"default\"`}},
		{"an owned host", planOf(`{"path":"/a","own":[{"host":"H2"}]}`), []string{`\"H2\"`, `\"h2\"`}},
		{"an owned group", planOf(`{"path":"/a","own":[{"group":"GPU","slots":1}]}`), []string{`\"GPU\"`, `\"gpu\"`}},
	} {
		resp, raw := post("p", c.body)
		errorOf(t, c.name, resp, raw, http.StatusUnprocessableEntity, "invalid_name")
		for _, name := range c.names {
			if !strings.Contains(string(raw), name) || !strings.Contains(string(raw), "only by case") {
				t.Errorf("%s: %s does not name %s and say why", c.name, raw, name)
			}
		}
	}
	if m := streamMsgs(t, l.js); m != n {
		t.Fatalf("stream holds %d messages after refusals, want %d", m, n)
	}
	// A rename by case, and a host down and up again, are accepted.
	if resp, raw := post("p", planOf(`{"path":"/A"},{"path":"/b","own":[{"host":"h1"}]}`)); resp.StatusCode != http.StatusOK {
		t.Errorf("a plan renaming /a to /A: %d %s", resp.StatusCode, raw)
	}
	if resp, raw := post("p", `[{"type":"host_down","data":{"host":"h2"}},{"type":"host_up","data":{"host":"h2","slots":2}}]`); resp.StatusCode != http.StatusOK {
		t.Errorf("h2 down and up again: %d %s", resp.StatusCode, raw)
	}

	// Pools: "prod" exists; "Prod", new, is refused and not created.
	if resp, raw := post("prod", `{"type":"host_up","data":{"host":"h1","slots":4}}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("pool prod: %d %s", resp.StatusCode, raw)
	}
	n = streamMsgs(t, l.js)
	resp, raw := post("Prod", planOf(`{"path":"/a"}`))
	errorOf(t, "pool Prod beside prod", resp, raw, http.StatusUnprocessableEntity, "invalid_name")
	if !strings.Contains(string(raw), `pool \"Prod\" differs only by case from the pool \"prod\"`) {
		t.Errorf("pool Prod beside prod: %s", raw)
	}
	if m := streamMsgs(t, l.js); m != n {
		t.Fatalf("stream holds %d messages after the refused pool, want %d", m, n)
	}
	if resp, raw := post("prod", `{"type":"host_up","data":{"host":"h2","slots":4}}`); resp.StatusCode != http.StatusOK {
		t.Errorf("pool prod, which exists: %d %s", resp.StatusCode, raw)
	}
}

// TestNewPoolsDifferingOnlyByCaseAtOnce: two first appends of "RaceN"
// and "raceN" sent at the same moment to one ledger create one pool, the
// other refused 422 invalid_name: both passed the check before either
// was stored, and the stream held both pools (3 pairs of 3 so, sent with
// curl to `ledger dev`). Two appends to the same new pool at once are
// both taken.
func TestNewPoolsDifferingOnlyByCaseAtOnce(t *testing.T) {
	l := newLedger(t, testenv.NATS(t))
	plan := `{"type":"plan","data":{"plan":{"consumers":[{"path":"/a"}]}}}`
	const pairs = 20
	for i := range pairs {
		names := []string{fmt.Sprintf("Race%d", i), fmt.Sprintf("race%d", i)}
		if i%5 == 4 { // the same name twice
			names[1] = names[0]
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		status := make([]int, 2)
		bodies := make([][]byte, 2)
		for j, pool := range names {
			wg.Go(func() {
				<-start
				resp, raw := l.request(http.MethodPost, "/v1/pools/"+pool+"/events", plan, nil)
				status[j], bodies[j] = resp.StatusCode, raw
			})
		}
		close(start)
		wg.Wait()
		ok := 0
		for j := range names {
			switch {
			case status[j] == http.StatusOK:
				ok++
			case status[j] == http.StatusUnprocessableEntity && strings.Contains(string(bodies[j]), "only by case"):
			default:
				t.Errorf("%s: %d %s", names[j], status[j], bodies[j])
			}
		}
		if names[0] == names[1] && ok != 2 {
			t.Errorf("%s twice at once: %d taken (%v %s %s), want both", names[0], ok, status, bodies[0], bodies[1])
		}
		if names[0] != names[1] && ok != 1 {
			t.Errorf("%s and %s at once: %d created (%v), want 1", names[0], names[1], ok, status)
		}
	}
	// The stream: no two pools that differ only by case.
	info, err := l.js.Stream(context.Background(), stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	si, err := info.Info(context.Background(), jetstream.WithSubjectFilter("ledger.>"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for subject := range si.State.Subjects {
		p, err := stream.PoolOf(subject)
		if err != nil {
			continue
		}
		if q, ok := seen[strings.ToLower(p)]; ok && q != p {
			t.Errorf("the stream holds pools %s and %s", q, p)
		}
		seen[strings.ToLower(p)] = p
	}
}
