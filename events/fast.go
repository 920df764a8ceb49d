package events

import (
	"encoding/json"
	"unicode/utf8"
)

// The log's readers decode every stored envelope, and its payload, once
// per event: with encoding/json that is a reflective decode of the
// envelope and a second one of its data. parseFast reads the envelopes
// the ledger itself writes (json.Marshal of an Envelope around a demand,
// release, host_up or host_down payload: fields in struct order, no
// white space, strings without escapes) in one pass without reflection.
// Anything else, or anything it is not sure of, is not its to judge: it
// answers ok false and the caller decodes strictly, so it never accepts
// a value the strict decoder would not, nor a different one
// (FuzzParseFast holds it to that).

// parseFast decodes b when it is an envelope in the ledger's own form; ok
// false means "decode it strictly".
func parseFast(b []byte) (env Envelope, p Payload, ok bool) {
	s := scanner{b: b}
	if !s.lit(`{"id":`) {
		return env, nil, false
	}
	if env.ID, ok = s.str(); !ok || !s.lit(`,"type":`) {
		return env, nil, false
	}
	typ, ok := s.str()
	if !ok || !s.lit(`,"v":`) {
		return env, nil, false
	}
	env.Type = Type(typ)
	if v, ok := s.uint(); !ok || v != Version || !s.lit(`,"pool":`) {
		return env, nil, false
	}
	env.V = Version
	if env.Pool, ok = s.str(); !ok || !s.lit(`,"time":`) {
		return env, nil, false
	}
	at, ok := s.strBytes()
	if !ok || env.Time.UnmarshalText(at) != nil { // what Time.UnmarshalJSON does with an unescaped string
		return env, nil, false
	}
	if s.lit(`,"producer":`) {
		if env.Producer, ok = s.str(); !ok {
			return env, nil, false
		}
	}
	if !s.lit(`,"data":`) {
		return env, nil, false
	}
	start := s.i
	switch env.Type {
	case TypeDemand:
		p, ok = s.demand()
	case TypeRelease:
		p, ok = s.release()
	case TypeHostUp:
		p, ok = s.hostUp()
	case TypeHostDown:
		p, ok = s.hostDown()
	default:
		return env, nil, false
	}
	if !ok || s.i != len(b)-1 || b[s.i] != '}' {
		return env, nil, false
	}
	env.Data = json.RawMessage(b[start:s.i])
	return env, p, true
}

// parsePayloadFast decodes data when it is a payload of type t in the
// ledger's own form; ok false means "decode it strictly".
func parsePayloadFast(t Type, data []byte) (p Payload, ok bool) {
	s := scanner{b: data}
	switch t {
	case TypeDemand:
		p, ok = s.demand()
	case TypeRelease:
		p, ok = s.release()
	case TypeHostUp:
		p, ok = s.hostUp()
	case TypeHostDown:
		p, ok = s.hostDown()
	}
	return p, ok && s.i == len(data)
}

type scanner struct {
	b []byte
	i int
}

// lit consumes x if the input continues with it.
func (s *scanner) lit(x string) bool {
	if len(s.b)-s.i < len(x) || string(s.b[s.i:s.i+len(x)]) != x {
		return false
	}
	s.i += len(x)
	return true
}

// strBytes consumes a JSON string whose content needs no unquoting: no
// escape, no control character, valid UTF-8 (encoding/json would replace
// invalid bytes). It returns the content, aliasing the input.
func (s *scanner) strBytes() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	ascii := true
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			if !ascii && !utf8.Valid(s.b[start:j]) {
				return nil, false
			}
			s.i = j + 1
			return s.b[start:j], true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

func (s *scanner) str() (string, bool) {
	b, ok := s.strBytes()
	return string(b), ok
}

// uint consumes a non-negative integer without sign, fraction, exponent
// or leading zero, of at most 18 digits (so it fits an int64).
func (s *scanner) uint() (int64, bool) {
	var v int64
	j := s.i
	for ; j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9'; j++ {
		v = v*10 + int64(s.b[j]-'0')
	}
	n := j - s.i
	if n == 0 || n > 18 || (n > 1 && s.b[s.i] == '0') {
		return 0, false
	}
	if j < len(s.b) && (s.b[j] == '.' || s.b[j] == 'e' || s.b[j] == 'E') {
		return 0, false
	}
	s.i = j
	return v, true
}

func (s *scanner) demand() (Payload, bool) {
	if !s.lit(`{"demands":{`) {
		return nil, false
	}
	d := &Demand{Demands: map[string]int64{}}
	if s.lit(`}}`) {
		return d, true
	}
	for {
		k, ok := s.str()
		if !ok || !s.lit(`:`) {
			return nil, false
		}
		v, ok := s.uint()
		if !ok {
			return nil, false
		}
		d.Demands[k] = v // a repeated key: the last one, as encoding/json
		if s.lit(`}}`) {
			return d, true
		}
		if !s.lit(`,`) {
			return nil, false
		}
	}
}

func (s *scanner) release() (Payload, bool) {
	var r Release
	var ok bool
	if !s.lit(`{"consumer":`) {
		return nil, false
	}
	if r.Consumer, ok = s.str(); !ok || !s.lit(`,"slots":`) {
		return nil, false
	}
	if r.Slots, ok = s.uint(); !ok || !s.lit(`}`) {
		return nil, false
	}
	return &r, true
}

func (s *scanner) hostUp() (Payload, bool) {
	var h HostUp
	var ok bool
	if !s.lit(`{"host":`) {
		return nil, false
	}
	if h.Host, ok = s.str(); !ok {
		return nil, false
	}
	if s.lit(`,"group":`) {
		if h.Group, ok = s.str(); !ok {
			return nil, false
		}
	}
	if !s.lit(`,"slots":`) {
		return nil, false
	}
	if h.Slots, ok = s.uint(); !ok || !s.lit(`}`) {
		return nil, false
	}
	return &h, true
}

func (s *scanner) hostDown() (Payload, bool) {
	var h HostDown
	var ok bool
	if !s.lit(`{"host":`) {
		return nil, false
	}
	if h.Host, ok = s.str(); !ok || !s.lit(`}`) {
		return nil, false
	}
	return &h, true
}
