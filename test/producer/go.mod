// A producer's own module: it uses the ledger's client library as any
// site's tool would, through the module's public packages only.
// TestClientFromAnotherModule (test/producer_module_test.go) runs its
// test against a running ledger, on a copy whose replace points at the
// checkout (tidied there). By hand: go mod tidy, then LEDGER_URL=...
// go test (see producer_test.go for the variables).
module example.com/producer

go 1.26.0

require github.com/cluster-ledger/ledger v0.0.0

require golang.org/x/text v0.43.0 // indirect

replace github.com/cluster-ledger/ledger => ../..
