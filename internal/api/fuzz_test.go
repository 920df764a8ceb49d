package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
)

// maxDecodeAlloc bounds the bytes one request's decoding and validation
// may allocate, whatever the body (at most MaxBody): decoded JSON costs
// a few times its text, never more.
const maxDecodeAlloc = 48 * MaxBody

// decodeAndValidate runs what postEvents runs on a body before
// appending: the streaming decode under the body limit, then the engine's
// validation against a pool (empty, or with a plan and a host).
func decodeAndValidate(body []byte, p *domain.Pool) ([]incoming, *apiError) {
	rec := httptest.NewRecorder()
	ins, aerr := decoder{producer: "fuzz"}.decode(http.MaxBytesReader(rec, io.NopCloser(bytes.NewReader(body)), MaxBody))
	if aerr != nil {
		return nil, aerr
	}
	fresh := make([]int, len(ins))
	for i := range fresh {
		fresh[i] = i
	}
	if aerr := checkHosts(p, ins, fresh); aerr != nil {
		return nil, aerr
	}
	return ins, validate(p, ins, fresh, time.Unix(0, 0))
}

// allocated returns the bytes f allocates (the whole process's, so a
// bound on it is conservative).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func fuzzPool() *domain.Pool {
	p := domain.NewPool("p")
	for i, pl := range []events.Payload{
		&events.PlanChange{Plan: events.Plan{Consumers: []events.Consumer{{Path: "/a"}, {Path: "/p/x"}}}},
		&events.HostUp{Host: "h1", Slots: 4},
	} {
		if _, err := p.Apply(domain.Event{Seq: uint64(i + 1), Time: time.Unix(0, 0), Payload: domain.StampRules(pl)}); err != nil {
			panic(err)
		}
	}
	return p
}

// FuzzDecodeRequest: no body makes the decoder panic, answer 5xx, or
// allocate more than maxDecodeAlloc; what it accepts is within the
// limits. The seeds run with every `go test`.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"type":"demand","data":{"demands":{"/a":3}}}`,
		`[{"id":"x","type":"plan","data":{"plan":{"policy":{"reclaim":"share_ratio"},"consumers":[{"path":"/a","share":2,"max":"40%"},{"path":"/p/x","max":3}]}}},{"type":"host_up","data":{"host":"h2","slots":2}}]`,
		`{"type":"release","data":{"consumer":"/a","slots":1}}`,
		`{"type":"host_down","data":{"host":"h1"}}`,
		`{"type":"demand","data":{"demands":{"/a":1}}}{"type":"demand","data":{"demands":{"/a":1}}}`,
		`[{"type":"demand","data":{"demands":{"/a":1}}}] x`,
		`[]`, ``, `[`, `{`, `null`, `[null]`, `[[[[[[]]]]]]`, `{"type":"plan","data":{"plan":null}}`,
		`{"type":"plan","data":{"plan":{"consumers":[{"path":"/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q"}]}}}`,
		`{"type":"host_up","data":{"host":"a b","slots":1}}`,
		`{"type":"demand","v":2,"data":{}}`,
		`{"type":"demand","producer":"mallory","data":{"demands":{"/a":1}}}`,
		"\xef\xbb\xbf{}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var ins []incoming
		var aerr *apiError
		n := allocated(func() { ins, aerr = decodeAndValidate(body, fuzzPool()) })
		if n > maxDecodeAlloc {
			t.Errorf("%d-byte body allocated %d bytes (bound %d)", len(body), n, maxDecodeAlloc)
		}
		if aerr != nil {
			if aerr.status < 400 || aerr.status >= 500 || aerr.reason == "" || aerr.msg == "" {
				t.Errorf("refusal %d %q %q: want a 4xx with a reason and a message", aerr.status, aerr.reason, aerr.msg)
			}
			return
		}
		if len(ins) == 0 || len(ins) > MaxBatch {
			t.Fatalf("accepted %d events", len(ins))
		}
		for _, in := range ins {
			if err := events.CheckLimits(in.payload); err != nil {
				t.Errorf("accepted an event past a limit: %v", err)
			}
			if in.producer != "fuzz" || in.id == "" || len(in.id) > maxIDLen {
				t.Errorf("accepted event %+v", in)
			}
		}
	})
}

// The bodies that cost the most to decode, each just under the body
// limit, stay under maxDecodeAlloc.
func TestDecodeMemoryBounded(t *testing.T) {
	fill := func(head, item, tail string) []byte {
		var b strings.Builder
		b.WriteString(head)
		for i := 0; b.Len()+len(item)+len(tail)+8 < MaxBody; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, item, i)
		}
		b.WriteString(tail)
		return []byte(b.String())
	}
	bodies := map[string][]byte{
		"tiny consumers":       fill(`{"type":"plan","data":{"plan":{"consumers":[`, `{"path":"/%d"}`, `]}}}`),
		"tiny demands":         fill(`{"type":"demand","data":{"demands":{`, `"/%d":1`, `}}}`),
		"many small events":    fill(`[`, `{"type":"release","data":{"consumer":"/a","slots":%d}}`, `]`),
		"deep nesting":         []byte(strings.Repeat("[", MaxBody/2)),
		"one long path":        []byte(`{"type":"plan","data":{"plan":{"consumers":[{"path":"` + strings.Repeat("/a", MaxBody/2-40) + `"}]}}}`),
		"many numbers in data": fill(`{"type":"host_up","data":{"host":"h","slots":1,"x":[`, `%d`, `]}}`),
	}
	for name, body := range bodies {
		var aerr *apiError
		n := allocated(func() { _, aerr = decodeAndValidate(body, fuzzPool()) })
		t.Logf("%s: %d-byte body, %d bytes allocated (%.1fx), answer %v", name, len(body), n, float64(n)/float64(len(body)), aerr)
		if n > maxDecodeAlloc {
			t.Errorf("%s: %d bytes allocated (bound %d)", name, n, maxDecodeAlloc)
		}
		if aerr == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
