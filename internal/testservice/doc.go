// Package testservice runs the whole ledger inside a test process, as
// the end-to-end tests need it: an embedded NATS server with the
// deployment's identities (the API connects as the ledger, the
// projector as the projector), a fresh migrated PostgreSQL database, the
// projector, and the API over HTTP signing what it appends, with a
// bearer token per role (producer: append; planner: plan; reader: read)
// so that each request runs as the identity a user would hold. Every
// answer of the API is checked against its OpenAPI description
// (internal/contract): a violation fails the test (Start) or Close.
//
// Start is for tests; New is for what has no testing.T (a setup of
// testenv.Main, for Example functions).
package testservice
