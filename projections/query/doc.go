// Package query reads the tables that package projections writes.
//
// Every question the ledger's tools ask of the projection (the API's
// allocations and decision pages, `ledger load --check`, `audit verify`,
// `replay`, `rebuild` and the benchmarks) is one function here, with typed
// results, so the SQL that reads the schema of migrations/0001 lives next
// to the package that writes it rather than in each caller. Writes stay in
// package projections.
//
// Each function takes a [Querier], which *pgxpool.Pool, pgx.Tx and
// *pgx.Conn all satisfy: a caller that needs several answers from one
// consistent snapshot runs them inside [ReadOnly].
package query
