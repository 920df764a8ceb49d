package events

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// ledgerEnvelopes are envelopes as the ledger writes them (events.New,
// json.Marshal), of every type the fast path reads and of others.
func ledgerEnvelopes(t testing.TB) [][]byte {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)
	ps := []Payload{
		&Demand{Demands: map[string]int64{"/a/b": 3, "/a/c": 0, "/é/x": 1 << 40}},
		&Demand{Demands: map[string]int64{}},
		&Release{Consumer: "/a/b", Slots: 2},
		&HostUp{Host: "h1", Slots: 16},
		&HostUp{Host: "gpu-1", Group: "gpu", Slots: 8},
		&HostDown{Host: "h1"},
		&PlanChange{Plan: Plan{Consumers: []Consumer{{Path: "/a"}}}},
	}
	var out [][]byte
	for _, producer := range []string{"", "bench"} {
		for i, p := range ps {
			env, err := New("id-"+string(rune('a'+i)), "pool-1", producer, at, p)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(env)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
	}
	return out
}

// TestParseFastReadsTheLedgersEnvelopes: every envelope the ledger writes
// of the four simple types is read by the fast path, as the strict
// decoder reads it; a plan goes to the strict decoder.
func TestParseFastReadsTheLedgersEnvelopes(t *testing.T) {
	fast := 0
	for _, b := range ledgerEnvelopes(t) {
		env, p, ok := parseFast(b)
		strict, err := parseStrict(b)
		if err != nil {
			t.Fatalf("%s: strict: %v", b, err)
		}
		if strict.Type == TypePlan {
			if ok {
				t.Errorf("%s: a plan read by the fast path", b)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: not read by the fast path", b)
			continue
		}
		fast++
		sp, err := strict.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(env, strict) || !reflect.DeepEqual(p, sp) {
			t.Errorf("%s: fast %#v %#v, strict %#v %#v", b, env, p, strict, sp)
		}
	}
	if fast != 12 {
		t.Errorf("%d envelopes read fast, want 12", fast)
	}
}

// FuzzParseFast: whatever the input, the fast path either declines it or
// gives exactly what the strict decoder gives (envelope and payload), and
// never accepts what the strict decoder refuses. The same for payloads
// alone (DecodePayload).
func FuzzParseFast(f *testing.F) {
	for _, b := range ledgerEnvelopes(f) {
		f.Add(b)
		// Near misses: escapes, white space, other orders, numbers the
		// fast path does not read, invalid UTF-8, duplicate keys,
		// trailing data, another version.
		s := string(b)
		for _, m := range []string{
			strings.Replace(s, `"/a/b"`, `"/a\/b"`, 1),
			strings.Replace(s, `"/a/b"`, "\"/a\xff\"", 1),
			strings.Replace(s, `,"type"`, ` ,"type"`, 1),
			strings.Replace(s, `:3`, `:3.0`, 1),
			strings.Replace(s, `:3`, `:-3`, 1),
			strings.Replace(s, `:3`, `:03`, 1),
			strings.Replace(s, `:3`, `:3e0`, 1),
			strings.Replace(s, `:16`, `:99999999999999999999`, 1),
			strings.Replace(s, `"v":1`, `"v":2`, 1),
			strings.Replace(s, `"id"`, `"ID"`, 1),
			strings.Replace(s, `{"demands":{`, `{"demands":{"/a/b":1,`, 1),
			strings.Replace(s, `Z"`, `+02:00"`, 1),
			strings.Replace(s, `123456`, `1234567891`, 1),
			s + "}",
			s + " ",
			s[:len(s)-1],
		} {
			f.Add([]byte(m))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		env, p, ok := parseFast(b)
		if ok {
			strict, err := parseStrict(b)
			if err != nil {
				t.Fatalf("%q: the fast path accepts what the strict decoder refuses: %v", b, err)
			}
			sp, err := strict.Decode()
			if err != nil {
				t.Fatalf("%q: the fast path decodes a payload the strict decoder refuses: %v", b, err)
			}
			if !reflect.DeepEqual(env, strict) || !reflect.DeepEqual(p, sp) {
				t.Fatalf("%q: fast %#v %#v, strict %#v %#v", b, env, p, strict, sp)
			}
		}
		for _, typ := range []Type{TypeDemand, TypeRelease, TypeHostUp, TypeHostDown} {
			p, ok := parsePayloadFast(typ, b)
			if !ok {
				continue
			}
			k, _ := KindOf(typ)
			sp := k.payload()
			if err := decodeStrict(b, sp); err != nil {
				t.Fatalf("%q: the fast path accepts a %s payload the strict decoder refuses: %v", b, typ, err)
			}
			if !reflect.DeepEqual(p, sp) {
				t.Fatalf("%q: fast %#v, strict %#v", b, p, sp)
			}
		}
	})
}

// BenchmarkParseEvent is a reader's decoding of one stored demand
// envelope and its payload.
func BenchmarkParseEvent(b *testing.B) {
	env, err := New("bench-1-2-3", "replay-abcd", "bench", time.Now(), &Demand{Demands: map[string]int64{"/d1/t2/a3": 4}})
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := json.Marshal(env)
	b.ReportAllocs()
	for range b.N {
		e, err := ParseEnvelope(raw)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.Decode(); err != nil {
			b.Fatal(err)
		}
	}
}
