package testenv

import (
	"context"
	"errors"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/nats-io/nats.go/jetstream"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/cluster-ledger/ledger/internal/pgcluster"
)

func TestMain(m *testing.M) { Main(m) }

func TestPostgresGivesFreshEmptyDatabases(t *testing.T) {
	ctx := context.Background()
	a, b := Postgres(t), Postgres(t)
	if a == b {
		t.Fatalf("two calls returned the same database %s", a)
	}
	for _, u := range []string{a, b} {
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		var tables int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil {
			t.Fatal(err)
		}
		if tables != 0 {
			t.Errorf("%s has %d tables, want an empty database", u, tables)
		}
		if _, err := conn.Exec(ctx, "CREATE TABLE t (v int)"); err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
	}
}

func TestPostgresDropsDatabaseAtCleanup(t *testing.T) {
	ctx := context.Background()
	var name string
	t.Run("inner", func(t *testing.T) {
		u := Postgres(t)
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
	})
	srv, err := sharedServer()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, srv.adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("database %s still exists after its test ended", name)
	}
}

func TestNATS(t *testing.T) {
	u := NATS(t)
	if nc, err := nats.Connect(u); err == nil {
		nc.Close()
		t.Fatal("the test server accepts anonymous connections")
	}
	nc := Connect(t, u, natsauth.Auditor)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(context.Background(), "LEDGER"); err != nil {
		t.Fatalf("the stream is not in place: %v", err)
	}
}

func TestWithDatabase(t *testing.T) {
	got, err := withDatabase("postgres://u:p@h:5432/db?sslmode=disable", "x")
	if err != nil || got != "postgres://u:p@h:5432/x?sslmode=disable" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := withDatabase("host=h dbname=db", "x"); err == nil {
		t.Error("a keyword DSN should be refused")
	}
}

func TestFindServerFallbacks(t *testing.T) {
	t.Setenv(EnvDatabaseURL, "")

	mainInUse.Store(false)
	_, err := findServer()
	mainInUse.Store(true)
	if !errors.Is(err, errNoMain) {
		t.Errorf("without testenv.Main: %v", err)
	}

	if containerEngine(context.Background()) == nil {
		t.Log("a container engine answers here; not checking the no-PostgreSQL message")
		return
	}
	old := findBinDir
	defer func() { findBinDir = old }()
	findBinDir = func(ctx context.Context, _ string) (string, error) {
		return pgcluster.FindBinDir(ctx, "/nonexistent")
	}
	_, err = findServer()
	if err == nil {
		t.Fatal("no binaries and no engine: want an error")
	}
	t.Logf("message: %v", err)
	for _, want := range []string{"DATABASE_URL", "apt-get install postgresql", "container engine"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q: %v", want, err)
		}
	}
}
