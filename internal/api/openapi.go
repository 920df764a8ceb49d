package api

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the API's contract: an OpenAPI 3.1 description of every
// endpoint of the server (the API's, the console's, the probes and the
// metrics), served at /v1/openapi.json. Tests check every answer they
// get against it (internal/contract).
//
//go:embed openapi.json
var OpenAPI []byte

// getOpenAPI serves the contract. It needs no token: it holds no data,
// and a client reads it before it has one.
func getOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(OpenAPI)
}
