// Package events defines the ledger's event vocabulary: the envelope that is
// appended to the LEDGER stream, the five payload types (demand, release,
// plan, host_up, host_down) and their versioned JSON encoding.
//
// The same types are used by the allocation engine (domain), the HTTP API,
// the projector and the scenario files, so an event means exactly one thing
// wherever it is read. Decoding is strict: an unknown field or a wrong type
// is an error, never silently ignored, because a typo in an allocation plan
// must not become a different plan.
package events
