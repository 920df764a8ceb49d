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
	"unicode"

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
		return nil, malformed(fmt.Errorf("the body starts with %q: send one event object or an array of them", first))
	}
	dec := json.NewDecoder(br)
	dec.DisallowUnknownFields()
	var ins []incoming
	seen := map[string]int{}
	add := func(i int) *apiError {
		var rq client.Event
		if err := dec.Decode(&rq); err != nil {
			if tooLarge(err) {
				return readFailure(err)
			}
			return refusal(fmt.Errorf("%w: event: %v", events.ErrMalformed, err), at(i))
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
		return nil, malformed(err)
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
		return nil, malformed(err)
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

var errEmptyBody = errors.New("empty body: send one event or an array of events")

// trailing refuses anything but white space after the request's value.
func trailing(dec *json.Decoder) *apiError {
	tok, err := dec.Token()
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		if tooLarge(err) {
			return readFailure(err)
		}
		return badRequest(ReasonTrailingData, "data after the request's JSON value: %v", err)
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

func malformed(err error) *apiError {
	if tooLarge(err) {
		return readFailure(err)
	}
	return refusal(fmt.Errorf("%w: %v", events.ErrMalformed, err), nil)
}

func tooLarge(err error) bool { return errors.As(err, new(*http.MaxBytesError)) }

// event checks and decodes one event request, cheapest checks first.
func (d decoder) event(rq client.Event, i int) (incoming, *apiError) {
	if rq.Type == "" {
		return incoming{}, refusal(fmt.Errorf("%w: event needs a type (demand, release, plan, host_up, host_down)", events.ErrMalformed), at(i))
	}
	if rq.V != 0 && rq.V != events.Version {
		return incoming{}, refusal(fmt.Errorf("%w: v %d (this ledger writes %d)", events.ErrUnsupportedVersion, rq.V, events.Version), at(i))
	}
	if err := checkID(rq.ID); err != nil {
		return incoming{}, refusal(err, at(i))
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

// checkID refuses ids that cannot be a NATS header value.
func checkID(id string) error {
	if len(id) > maxIDLen {
		return fmt.Errorf("%w: id is %d bytes (at most %d)", events.ErrMalformed, len(id), maxIDLen)
	}
	for _, r := range id {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("%w: id %q contains white space or a control character", events.ErrMalformed, id)
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
