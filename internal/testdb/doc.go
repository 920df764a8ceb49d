// Package testdb gives tests the projection's database as production
// has it: [New] makes a fresh database (on testenv's PostgreSQL) owned by
// the owner role, migrates it as that role, and returns the URL of each
// role of migrations.Roles with its password, so that each part under
// test connects as the identity it has in production: the projector as
// ledger_projector, the API and the console as ledger_api, the auditor's
// tools and reporting queries as ledger_reporting. A right a part lacks
// in production then fails its test; so does a right the server gives
// no role in a deployment (migrations.ClusterSQL, applied to each
// database as ledger dev applies it). The roles are the server's, created
// once per test binary with passwords derived from the server's own
// superuser URL (the same in every test binary sharing a server).
//
// A package using it needs testenv's TestMain, as for testenv.Postgres.
package testdb
