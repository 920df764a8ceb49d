package api

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"unicode"

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

// parseEvents reads a request body: one event or an array of them.
func (s *Server) parseEvents(r *http.Request) ([]incoming, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBody))
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			return nil, &apiError{status: http.StatusRequestEntityTooLarge, reason: ReasonTooLarge, msg: fmt.Sprintf("request body over %d bytes", MaxBody)}
		}
		return nil, badRequest(ReasonBadRequest, "read body: %v", err)
	}
	raws, aerr := splitBody(body)
	if aerr != nil {
		return nil, aerr
	}
	ins := make([]incoming, len(raws))
	seen := make(map[string]int, len(raws))
	for i, raw := range raws {
		in, aerr := s.decodeEvent(raw, i)
		if aerr != nil {
			return nil, aerr
		}
		if j, dup := seen[in.id]; dup {
			e := badRequest(ReasonRepeatedID, "events %d and %d have the same id %q", j, i, in.id)
			e.index = at(i)
			return nil, e
		}
		seen[in.id] = i
		ins[i] = in
	}
	return ins, nil
}

// splitBody returns the request's events, still encoded.
func splitBody(body []byte) ([]json.RawMessage, *apiError) {
	body = bytes.TrimSpace(body)
	switch {
	case len(body) == 0:
		return nil, badRequest(ReasonBadRequest, "empty body: send one event or an array of events")
	case body[0] != '[':
		return []json.RawMessage{body}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		return nil, refusal(fmt.Errorf("%w: %v", events.ErrMalformed, err), nil)
	}
	if len(raws) == 0 {
		return nil, badRequest(ReasonBadRequest, "empty array: nothing to append")
	}
	if len(raws) > MaxBatch {
		return nil, badRequest(ReasonTooManyEvents, "%d events in one request (at most %d)", len(raws), MaxBatch)
	}
	return raws, nil
}

// decodeEvent decodes the event at index i strictly: an unknown field is
// an error, never ignored.
func (s *Server) decodeEvent(raw json.RawMessage, i int) (incoming, *apiError) {
	var rq EventRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rq); err != nil {
		return incoming{}, refusal(fmt.Errorf("%w: event: %v", events.ErrMalformed, err), at(i))
	}
	if rq.Type == "" {
		return incoming{}, refusal(fmt.Errorf("%w: event needs a type (demand, release, plan, host_up, host_down)", events.ErrMalformed), at(i))
	}
	if rq.V != 0 && rq.V != events.Version {
		return incoming{}, refusal(fmt.Errorf("%w: v %d (this ledger writes %d)", events.ErrUnsupportedVersion, rq.V, events.Version), at(i))
	}
	if err := checkID(rq.ID); err != nil {
		return incoming{}, refusal(err, at(i))
	}
	p, err := events.DecodePayload(events.Type(rq.Type), rq.Data)
	if err != nil {
		return incoming{}, refusal(err, at(i))
	}
	// Every stored plan names its rules version (allocation-rules.md
	// section 8): one that names none gets the newest this ledger has.
	in := incoming{id: rq.ID, producer: rq.Producer, payload: domain.StampRules(p)}
	if in.id == "" {
		in.id = newID()
	}
	if in.producer == "" {
		in.producer = s.producer
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
