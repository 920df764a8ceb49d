package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Version is the schema version written in every envelope's "v" field.
// Readers accept every version up to and including it; an envelope of a
// later version was written by a newer ledger (a new event type, say:
// kinds.go), which a reader must not fold as refused.
const Version = 1

// Type names the kind of an event; it is also the last token of the
// event's subject (ledger.<pool>.<type>).
type Type string

// The event types of schema version 1.
const (
	TypeDemand   Type = "demand"
	TypeRelease  Type = "release"
	TypePlan     Type = "plan"
	TypeHostUp   Type = "host_up"
	TypeHostDown Type = "host_down"
)

// Envelope is one event as it is stored in the log.
type Envelope struct {
	ID       string          `json:"id"`
	Type     Type            `json:"type"`
	V        int             `json:"v"`
	Pool     string          `json:"pool"`
	Time     time.Time       `json:"time"`
	Producer string          `json:"producer,omitempty"`
	Data     json.RawMessage `json:"data"`
}

// Payload is the typed content of an envelope's data field.
type Payload interface {
	EventType() Type
}

// New builds an envelope around a payload.
func New(id, pool, producer string, at time.Time, p Payload) (Envelope, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return Envelope{}, fmt.Errorf("encode %s payload: %w", p.EventType(), err)
	}
	return Envelope{ID: id, Type: p.EventType(), V: Version, Pool: pool, Time: at.UTC(), Producer: producer, Data: data}, nil
}

// Decode returns the typed payload of the envelope.
func (e Envelope) Decode() (Payload, error) {
	if e.V < 1 || e.V > Version {
		return nil, fmt.Errorf("%w: version %d (this build reads 1..%d)", ErrUnsupportedVersion, e.V, Version)
	}
	return DecodePayload(e.Type, e.Data)
}

// DecodePayload decodes data as the payload of type t, strictly.
func DecodePayload(t Type, data []byte) (Payload, error) {
	k, ok := KindOf(t)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownType, t)
	}
	if p, ok := parsePayloadFast(t, data); ok {
		return p, nil
	}
	p := k.payload()
	if err := decodeStrict(data, p); err != nil {
		if errors.Is(err, ErrTooManyConsumers) { // refused while decoding, before the whole list is held
			return nil, fmt.Errorf("%s: %w", t, err)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, t, err)
	}
	return p, nil
}

// ParseEnvelope decodes a stored envelope strictly.
func ParseEnvelope(b []byte) (Envelope, error) {
	if e, _, ok := parseFast(b); ok {
		return e, nil
	}
	return parseStrict(b)
}

// ParseEvent is ParseEnvelope that also gives the payload when it was
// decoded on the way (p is then what e.Decode() returns; nil when the
// caller must call it).
func ParseEvent(b []byte) (e Envelope, p Payload, err error) {
	if e, p, ok := parseFast(b); ok {
		return e, p, nil
	}
	e, err = parseStrict(b)
	return e, nil, err
}

func parseStrict(b []byte) (Envelope, error) {
	var e Envelope
	if err := decodeStrict(b, &e); err != nil {
		return Envelope{}, fmt.Errorf("%w: envelope: %v", ErrMalformed, err)
	}
	return e, nil
}

func decodeStrict(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return fmt.Errorf("empty")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after JSON value")
	}
	return nil
}
