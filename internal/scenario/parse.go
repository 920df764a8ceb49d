package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cluster-ledger/ledger/events"
	"go.yaml.in/yaml/v3"
)

// Epoch is the time of a scenario's first event when none is given.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Scenario is one parsed scenario file.
type Scenario struct {
	File  string
	Name  string
	Pool  string
	Plan  events.Plan
	Hosts []events.HostUp
	Steps []Step
}

// Step is a group of events and what must hold after them.
type Step struct {
	Name   string
	Events []Event
	Expect *Expect
}

// Event is one event of a step; Time is nil unless the file gives one.
type Event struct {
	Payload events.Payload
	Time    *time.Time
}

// Expect is a step's expectation.
type Expect struct {
	Allocations map[string]int64 `json:"allocations"`
	Decisions   []ExpectDecision `json:"decisions"`
	Rejected    int              `json:"rejected"`
}

// ExpectDecision is a sum of decisions of one (kind, consumer, from), and
// when it names them, of one rule and one deadline (docs/scenarios.md).
type ExpectDecision struct {
	Kind     string `json:"kind"`
	Consumer string `json:"consumer"`
	From     string `json:"from,omitempty"`
	Slots    int64  `json:"slots"`
	// Rule, when not empty, counts only decisions of this rule.
	Rule string `json:"rule,omitempty"`
	// Deadline, when given, counts only decisions with this deadline.
	Deadline Deadline `json:"deadline,omitzero"`
}

type rawScenario struct {
	Name  string            `json:"name"`
	Pool  string            `json:"pool"`
	Plan  json.RawMessage   `json:"plan"`
	Hosts []json.RawMessage `json:"hosts"`
	Steps []rawStep         `json:"steps"`
}

// hostSpec is an entry of the scenario's hosts list (a host_up event
// written with "name" rather than "host").
type hostSpec struct {
	Name  string `json:"name"`
	Group string `json:"group"`
	Slots int64  `json:"slots"`
}

type rawStep struct {
	Name   string                       `json:"name"`
	Events []map[string]json.RawMessage `json:"events"`
	Expect *Expect                      `json:"expect"`
}

// ParseFile reads and parses a scenario file.
func ParseFile(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.File = path
	return s, nil
}

// Parse parses a scenario from YAML. Unknown fields are errors.
func Parse(b []byte) (*Scenario, error) {
	doc, err := unmarshalOne(b)
	if err != nil {
		return nil, fmt.Errorf("yaml: %w", err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("yaml to json: %w", err)
	}
	var raw rawScenario
	if err := strictJSON(js, &raw); err != nil {
		return nil, err
	}
	s := &Scenario{Name: raw.Name, Pool: raw.Pool}
	if s.Pool == "" {
		s.Pool = "default"
	}
	if len(raw.Plan) == 0 {
		return nil, fmt.Errorf("scenario has no plan")
	}
	if err := strictJSON(raw.Plan, &s.Plan); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	for i, h := range raw.Hosts {
		var hs hostSpec
		if err := strictJSON(h, &hs); err != nil {
			return nil, fmt.Errorf("hosts[%d]: %w", i, err)
		}
		s.Hosts = append(s.Hosts, events.HostUp{Host: hs.Name, Group: hs.Group, Slots: hs.Slots})
	}
	for i, rs := range raw.Steps {
		st := Step{Name: rs.Name, Expect: rs.Expect}
		for j, re := range rs.Events {
			ev, err := parseEvent(re)
			if err != nil {
				return nil, fmt.Errorf("steps[%d].events[%d]: %w", i, j, err)
			}
			st.Events = append(st.Events, ev)
		}
		s.Steps = append(s.Steps, st)
	}
	return s, nil
}

// unmarshalOne decodes the one YAML document of b (nil when b has none).
// A file of several, separated by --- lines, is refused: yaml.Unmarshal
// reads the first and drops the rest without a word, so a second scenario
// (or the events after a ---) would be passed over as if it were not
// there. Empty documents after the first (a closing ---) are nothing.
func unmarshalOne(b []byte) (any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc any
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	for n := 2; ; n++ {
		var more any
		err := dec.Decode(&more)
		switch {
		case errors.Is(err, io.EOF):
			return doc, nil
		case err != nil:
			return nil, fmt.Errorf("document %d: %w", n, err)
		case more != nil:
			return nil, fmt.Errorf("the file holds more than one YAML document (document %d follows a --- line): a file holds one scenario, or one list of events; put each in a file of its own", n)
		}
	}
}

// ParseEventsFile reads a list of events in the format of a step's
// `events:` (a file with an `events:` list, or the list alone), as
// `ledger what-if --file` takes them.
func ParseEventsFile(path string) ([]Event, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	evs, err := ParseEvents(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return evs, nil
}

// ParseEvents parses a list of events from YAML (or JSON): a document
// holding an `events:` list and nothing else, or the list itself.
func ParseEvents(b []byte) ([]Event, error) {
	doc, err := unmarshalOne(b)
	if err != nil {
		return nil, fmt.Errorf("yaml: %w", err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("yaml to json: %w", err)
	}
	var raw []map[string]json.RawMessage
	if _, isList := doc.([]any); isList {
		err = json.Unmarshal(js, &raw)
	} else {
		var wrapped struct {
			Events []map[string]json.RawMessage `json:"events"`
		}
		err = strictJSON(js, &wrapped)
		raw = wrapped.Events
	}
	if err != nil {
		return nil, fmt.Errorf("want an events: list of events (docs/scenarios.md): %w", err)
	}
	evs := make([]Event, 0, len(raw))
	for i, re := range raw {
		ev, err := parseEvent(re)
		if err != nil {
			return nil, fmt.Errorf("events[%d]: %w", i, err)
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

func parseEvent(fields map[string]json.RawMessage) (Event, error) {
	var ev Event
	var typ string
	if err := json.Unmarshal(fields["type"], &typ); err != nil || typ == "" {
		return ev, fmt.Errorf("event needs a type (one of demand, release, plan, host_up, host_down)")
	}
	delete(fields, "type")
	if t, ok := fields["time"]; ok {
		var text string
		if err := json.Unmarshal(t, &text); err != nil {
			return ev, fmt.Errorf("time: want an RFC 3339 time as a string like 2026-01-02T15:04:05Z")
		}
		at, err := events.ParseTime(text)
		if err != nil {
			return ev, fmt.Errorf("time: %w", err)
		}
		ev.Time = &at
		delete(fields, "time")
	}
	data, _ := json.Marshal(fields)
	p, err := events.DecodePayload(events.Type(typ), data)
	switch {
	case errors.Is(err, events.ErrUnknownType):
		return ev, err
	case err != nil:
		// The ledger refuses it (malformed, or past a limit): kept as
		// written, so a step can expect the refusal.
		p = &Undecodable{Type: events.Type(typ), Data: data, Err: err}
	}
	ev.Payload = p
	return ev, nil
}

// Undecodable is an event of a scenario whose data the ledger cannot
// decode (a value of the wrong type, an unknown field, a list past a
// limit): the ledger refuses it, and it counts as rejected. ledger load
// sends it as written; the in-memory fold refuses it with Err.
type Undecodable struct {
	Type events.Type
	Data json.RawMessage
	Err  error
}

// EventType is the type the file gives it.
func (u *Undecodable) EventType() events.Type { return u.Type }

// MarshalJSON writes the data as the file gives it.
func (u *Undecodable) MarshalJSON() ([]byte, error) { return u.Data, nil }

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
