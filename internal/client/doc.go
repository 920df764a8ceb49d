// Package client is a small Go client of the ledger's HTTP API, used by
// `ledger publish` and `ledger load`: it appends events, recognises
// refusals (4xx, with the API's reason) and retries while the ledger
// answers 503, keeping the events' ids so a retry is stored once.
package client
