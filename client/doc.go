// Package client is the Go library of the ledger's HTTP API, for
// producers (the schedulers and tools that report demand, releases,
// plans and hosts) and for readers of allocations and decisions.
//
//	c := client.New("https://ledger.example:8080", client.WithToken(os.Getenv("LEDGER_TOKEN")))
//	ev, _ := client.NewEvent(&events.Demand{Demands: map[string]int64{"/eng/dev": 12}})
//	appended, err := c.Append(ctx, "gpu", ev)
//
// Appends. Append sends one event, or several as one atomic batch (all
// of them are stored, contiguous in the log, or none). Every event
// carries an id, chosen by NewEvent (or by the caller: WithID), and the
// request is encoded once: while the ledger answers 503 or cannot be
// reached, Append waits (Retry-After, else a second) and sends the same
// bytes again until its context ends. The ledger stores an id once, so a
// retry after a lost answer is answered as a duplicate
// (Appended.Duplicate) and never stored twice; the same id with other
// content is refused (CodeIDConflict).
//
// A client whose address is not an http:// or https:// URL, or whose
// token holds a control character (a CR left from a file with CRLF line
// ends), fails every call at once with ErrMisconfigured: nothing can be
// sent, so nothing is retried.
//
// Refusals. Every answer other than 200 is an *Error with the HTTP status
// and the ledger's stable Code (the same codes as docs/rules.md, section
// 13, and the API's own). A Code is itself an error, so callers branch
// with errors.Is:
//
//	if errors.Is(err, client.CodeUnknownConsumer) { ... }
//	var e *client.Error
//	if errors.As(err, &e) && e.Refused() { ... } // 4xx: sending it again will not help
//
// Reads. Allocations reads a pool's projected state; Decisions pages
// through its decisions (AllDecisions as an iterator); WaitProjected waits
// until the projection holds an appended event.
//
// The types of this package are the API's JSON. The package
// depends on the standard library and the ledger's event vocabulary
// (package events) only.
package client
