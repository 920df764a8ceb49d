// Package unrouted answers in JSON where net/http would answer text: a
// path no route of a server takes (404), a method its route does not
// take (405), and any other 404 or 405 a handler writes with http.Error
// or http.NotFound. Every HTTP server of the ledger (the API's, the
// projector's metrics and health listeners) wraps its mux with JSON, so
// a client parses every error answer the same way: {"error", "reason"}
// with reason not_found or method_not_allowed (docs/decisions.md 196).
package unrouted
