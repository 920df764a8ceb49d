// Package testenv gives tests in any package real infrastructure, never
// skipping: [Postgres] returns the URL of a fresh, empty database, and
// [NATS] the URL of an embedded nats-server with JetStream.
//
// Postgres creates a database test_<random> (dropped when the test ends)
// on the first server available of: the server of $DATABASE_URL; a
// private cluster started once per test binary with [pgcluster] from the
// machine's PostgreSQL binaries (data in a temporary directory, fsync
// off); a postgres:15 container through testcontainers-go when a
// container engine answers. When none is available the test fails with a
// message saying what was tried. A package whose tests call Postgres must
// have
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// so that the private cluster or container is stopped and its files
// removed when the tests end; Postgres fails the test when Main is not
// in use and it would have to start one.
//
// [pgcluster]: github.com/cluster-ledger/ledger/internal/pgcluster
package testenv
