package api

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"unicode"
	"unicode/utf8"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
)

// incoming is one event of a request, decoded, with its id.
type incoming struct {
	id       string
	producer string
	payload  events.Payload
}

// maxIDLen bounds an event id (it travels as a NATS header).
const maxIDLen = 128

// decoder reads one request body: a single event object or an array of
// them. It streams: the array is read one element at a time with a
// json.Decoder (never as a whole), the count is checked before each
// element, and each element is decoded, bounded (events.CheckLimits),
// its new names checked (events.CheckNames) and authorized before the
// next is read. The body itself is bounded by
// http.MaxBytesReader. Anything after the JSON value is an error: a
// second value is never silently dropped.
type decoder struct {
	// producer is the identity recorded for every event.
	producer string
	// authorize, when set, is asked before an event's data is decoded
	// whether the caller may append an event of this type.
	authorize func(t events.Type, i int) *apiError
}

// decode reads the events of body (already bounded by MaxBytesReader).
func (d decoder) decode(body io.Reader) ([]incoming, *apiError) {
	br := bufio.NewReader(body)
	first, err := firstByte(br)
	if err != nil {
		return nil, readFailure(err)
	}
	if first != '[' && first != '{' {
		return nil, refusal(fmt.Errorf("%w: %s, not { or [: send one event object or an array of them", events.ErrMalformed, bodyStart(first)), nil)
	}
	dec := json.NewDecoder(br)
	dec.DisallowUnknownFields()
	var ins []incoming
	seen := map[string]int{}
	add := func(i int) *apiError {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			aerr := jsonReadFailure(err, "the event")
			aerr.index = at(i)
			return aerr
		}
		rq, aerr := decodeEvent(raw)
		if aerr != nil {
			aerr.index = at(i)
			return aerr
		}
		in, aerr := d.event(rq, i)
		if aerr != nil {
			return aerr
		}
		if j, dup := seen[in.id]; dup {
			e := badRequest(ReasonRepeatedID, "events %d and %d have the same id %q", j, i, in.id)
			e.index = at(i)
			return e
		}
		seen[in.id] = i
		ins = append(ins, in)
		return nil
	}
	if first != '[' {
		if aerr := add(0); aerr != nil {
			return nil, aerr
		}
		return ins, trailing(dec)
	}
	if _, err := dec.Token(); err != nil { // the '['
		return nil, jsonReadFailure(err, "the array of events")
	}
	for i := 0; dec.More(); i++ {
		if i == MaxBatch {
			return nil, badRequest(ReasonTooManyEvents, "more than %d events in one request", MaxBatch)
		}
		if aerr := add(i); aerr != nil {
			return nil, aerr
		}
	}
	if _, err := dec.Token(); err != nil { // the ']'
		return nil, jsonReadFailure(err, "the array of events")
	}
	if len(ins) == 0 {
		return nil, badRequest(ReasonBadRequest, "empty array: nothing to append")
	}
	return ins, trailing(dec)
}

// firstByte returns the first byte after white space, leaving it unread.
func firstByte(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			return 0, errEmptyBody
		}
		if err != nil {
			return 0, err
		}
		if b != ' ' && b != '\t' && b != '\n' && b != '\r' {
			return b, br.UnreadByte()
		}
	}
}

// bodyStart words the first byte of a body that is neither an object
// nor an array (it went through jsonReadFailure once, whose catch-all
// answered "the body could not be read" and dropped these words).
func bodyStart(b byte) string {
	switch {
	case b == 0xEF:
		return "the body starts with a byte order mark (EF BB BF; send JSON without it)"
	case b < 0x20 || b >= 0x7F:
		return fmt.Sprintf("the body starts with byte 0x%02X", b)
	}
	return fmt.Sprintf("the body starts with %q", rune(b))
}

var errEmptyBody = errors.New("empty body: send one event or an array of events")

// trailing refuses anything but white space after the request's value.
func trailing(dec *json.Decoder) *apiError {
	tok, err := dec.Token()
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		if aerr := jsonReadFailure(err, "what follows the request's JSON value"); aerr.reason != string(events.ErrMalformed.Code()) {
			return aerr // too large, too slow
		}
		return badRequest(ReasonTrailingData, "data after the request's JSON value, and not JSON: send one event or one array")
	}
	return badRequest(ReasonTrailingData, "data after the request's JSON value (%v...): send one event or one array", tok)
}

// readFailure classifies an error of reading the body: too large (413),
// empty, or anything else (400).
func readFailure(err error) *apiError {
	if tooLarge(err) {
		return &apiError{status: http.StatusRequestEntityTooLarge, reason: ReasonTooLarge, msg: fmt.Sprintf("request body over %d bytes", MaxBody)}
	}
	if errors.Is(err, errEmptyBody) {
		return badRequest(ReasonBadRequest, "%v", err)
	}
	return malformed(err)
}

func malformed(err error) *apiError { return jsonReadFailure(err, "the body") }

// decodeEvent reads one event of a request strictly (checkJSON): its
// data is checked against its type's fields in decoder.event, once the
// token may append that type.
func decodeEvent(raw []byte) (client.Event, *apiError) {
	var rq client.Event
	if aerr := checkJSON(raw, eventType, ""); aerr != nil {
		return rq, aerr
	}
	if err := json.Unmarshal(raw, &rq); err != nil { // checkJSON found nothing wrong: not expected
		return rq, refusal(fmt.Errorf("%w: the event could not be decoded", events.ErrMalformed), nil)
	}
	return rq, nil
}

var eventType = reflect.TypeFor[client.Event]()

func tooLarge(err error) bool { return errors.As(err, new(*http.MaxBytesError)) }

// event checks and decodes one event request, cheapest checks first.
func (d decoder) event(rq client.Event, i int) (incoming, *apiError) {
	if rq.Type == "" {
		return incoming{}, refusal(fmt.Errorf("%w: event needs a type (demand, release, plan, host_up, host_down)", events.ErrMalformed), at(i))
	}
	if rq.V != 0 && rq.V != events.Version {
		return incoming{}, refusal(fmt.Errorf("%w: v %d (this ledger writes %d)", events.ErrUnsupportedVersion, rq.V, events.Version), at(i))
	}
	if aerr := checkID(rq.ID); aerr != nil {
		aerr.index = at(i)
		return incoming{}, aerr
	}
	if rq.Producer != "" && rq.Producer != d.producer {
		return incoming{}, &apiError{status: http.StatusForbidden, reason: ReasonProducerMismatch, index: at(i),
			msg: fmt.Sprintf("event claims producer %q but the token is %q: the producer is the token's name (leave it out)", rq.Producer, d.producer)}
	}
	if d.authorize != nil {
		if aerr := d.authorize(events.Type(rq.Type), i); aerr != nil {
			return incoming{}, aerr
		}
	}
	if k, ok := events.KindOf(events.Type(rq.Type)); ok && len(rq.Data) > 0 {
		if aerr := checkJSON(rq.Data, reflect.TypeOf(k.NewPayload()), "data"); aerr != nil {
			aerr.index = at(i)
			return incoming{}, aerr
		}
	}
	p, err := events.DecodePayload(events.Type(rq.Type), rq.Data)
	if err != nil {
		return incoming{}, refusal(err, at(i))
	}
	if err := events.CheckLimits(p); err != nil {
		return incoming{}, refusal(err, at(i))
	}
	// Names are admitted here, not in the fold: released rules versions
	// fold every stored event as before (docs/decisions.md 160).
	if err := events.CheckNames(p); err != nil {
		return incoming{}, refusal(err, at(i))
	}
	// Every stored plan names its rules version (docs/rules.md#versions): one
	// that names none gets the newest this ledger has.
	in := incoming{id: rq.ID, producer: d.producer, payload: domain.StampRules(p)}
	if in.id == "" {
		in.id = newID()
	}
	return in, nil
}

// checkID refuses ids that cannot be a NATS header value, or that would
// not look like what they are where people read them (the console, the
// log, `ledger explain`): at most maxIDLen bytes of UTF-8 without white
// space, control, format (bidi controls, zero width), other invisible,
// private-use or unassigned characters (docs/decisions.md 194).
func checkID(id string) *apiError {
	if len(id) > maxIDLen {
		return badRequest(ReasonInvalidID, "id is %d bytes (at most %d)", len(id), maxIDLen)
	}
	if !utf8.ValidString(id) {
		return badRequest(ReasonInvalidID, "id %.64q is not UTF-8", id)
	}
	for _, r := range id {
		if unicode.IsSpace(r) {
			return badRequest(ReasonInvalidID, "id %.64q contains white space (U+%04X)", id, r)
		}
		if why := events.Invisible(r); why != "" {
			return badRequest(ReasonInvalidID, "id %.64q contains U+%04X, %s", id, r, why)
		}
	}
	return nil
}

// newID is a random 128-bit id in hex.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
