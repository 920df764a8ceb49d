package testdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cluster-ledger/ledger/internal/pgcluster"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/migrations"
)

// DB is a migrated database and the URL of each of its roles.
type DB struct {
	// Admin is the server's superuser, on this database: for tests that
	// play an attacker with more than any role has, or set up a state.
	Admin string
	// Owner owns the tables and ran the migrations.
	Owner string
	// Projector, API and Reporting are the roles of migrations.Roles.
	Projector, API, Reporting string
}

// New returns a fresh database, owned by migrations.RoleOwner and
// migrated by it, dropped when the test ends.
func New(t testing.TB) DB {
	t.Helper()
	d := Empty(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := migrations.Up(ctx, d.Owner); err != nil {
		t.Fatalf("testdb: migrate as %s: %v", migrations.RoleOwner, err)
	}
	return d
}

// Empty is New without the migrations: an empty database owned by
// migrations.RoleOwner (to migrate it step by step, as an upgrade does).
func Empty(t testing.TB) DB {
	t.Helper()
	admin := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ensureRoles(ctx, admin); err != nil {
		t.Fatalf("testdb: roles: %v", err)
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	defer conn.Close(ctx)
	name := conn.Config().Database
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" OWNER TO "+migrations.RoleOwner); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	// What a deployment's superuser sets in the ledger's database (ledger
	// dev, docker-compose's init script): without it every role could
	// take advisory locks and make large objects, and a test would pass
	// on a right that production does not give.
	if _, err := conn.Exec(ctx, migrations.ClusterSQL); err != nil {
		t.Fatalf("testdb: the deployment's server settings: %v", err)
	}
	d := DB{Admin: admin}
	for _, p := range []struct {
		to   *string
		role string
	}{{&d.Owner, migrations.RoleOwner}, {&d.Projector, migrations.RoleProjector}, {&d.API, migrations.RoleAPI}, {&d.Reporting, migrations.RoleReporting}} {
		*p.to = as(admin, p.role)
	}
	return d
}

// Pool opens a pool on url, closed when the test ends.
func Pool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	db, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

var (
	rolesMu   sync.Mutex
	rolesDone = map[string]bool{} // server (admin URL without database) -> roles ensured
)

// ensureRoles creates (or gives a login and the derived password to) the
// owner role and migrations.Roles on admin's server, once per test binary.
func ensureRoles(ctx context.Context, admin string) error {
	server := as(admin, "")
	rolesMu.Lock()
	defer rolesMu.Unlock()
	if rolesDone[server] {
		return nil
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, role := range append([]string{migrations.RoleOwner}, migrations.Roles...) {
		if works(ctx, as(admin, role)) {
			continue // another test binary on this server did it
		}
		if err := pgcluster.EnsureLoginRole(ctx, conn, role, password(admin, role)); err != nil {
			return err
		}
	}
	rolesDone[server] = true
	return nil
}

func works(ctx context.Context, url string) bool {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return false
	}
	conn.Close(ctx)
	return true
}

// as is admin's URL with role and its password as the user ("": admin's
// own user, the database dropped: the server's name).
func as(admin, role string) string {
	u, err := url.Parse(admin)
	if err != nil {
		return ""
	}
	if role == "" {
		u.Path = ""
		return u.String()
	}
	u.User = url.UserPassword(role, password(admin, role))
	return u.String()
}

// password derives role's password from the server's superuser URL: the
// same in every test binary on that server, secret as that URL is.
func password(admin, role string) string {
	u, _ := url.Parse(admin)
	u.Path = ""
	sum := sha256.Sum256([]byte("ledger testdb\x00" + u.String() + "\x00" + role))
	return hex.EncodeToString(sum[:16])
}
