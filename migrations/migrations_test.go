package migrations

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cluster-ledger/ledger/internal/testenv"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(migratorURL); url != "" {
		// A migrator of TestKilledMigratorLeavesNoDirtyDatabase, a process
		// of its own (this test binary again), before testenv takes
		// anything.
		if err := Up(context.Background(), url); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	testenv.Main(m)
}

// migratorURL names the database a migrator process migrates.
const migratorURL = "LEDGER_TEST_MIGRATOR_URL"

// schema is every table after the migrations and its columns, in order.
var schema = map[string][]string{
	"events":             {"pool", "seq", "id", "type", "v", "time", "producer", "data", "refused", "prev_hash", "hash", "refusal_detail", "subject", "headers", "body", "time_ns"},
	"consumers":          {"pool", "path", "parent", "leaf", "share", "priority", "max"},
	"hosts":              {"pool", "name", "grp", "slots", "up", "allocated"},
	"allocations":        {"pool", "consumer", "host", "slots"},
	"consumer_state":     {"pool", "consumer", "leaf", "demand", "effective", "planned", "target", "allocated", "borrowed", "waiting_since", "updated_seq", "owned", "own_used", "lent_out", "sources"},
	"decisions":          {"pool", "event_seq", "ordinal", "kind", "consumer", "from_consumer", "host", "slots", "rule", "deadline"},
	"allocation_history": {"pool", "consumer", "slots", "valid_from_seq", "valid_from_time", "valid_to_seq", "valid_to_time"},
	"checkpoints":        {"pool", "last_seq", "state_hash", "chain_hash", "updated_at", "rules", "rules_since"},
	"projector_offsets":  {"name", "stream_seq", "updated_at", "partition", "partitions", "owner"},
	"snapshots":          {"pool", "seq", "format", "state", "state_hash"},
	"saved_states":       {"pool", "seq", "format", "state", "state_hash", "snap_events", "snap_cost", "saved_at"},
	"pending_events":     {"pool", "seq", "subject", "headers", "body", "stored_at"},
	"halted_pools":       {"pool", "seq", "reason", "halted_at"},
	"ownership":          {"pool", "consumer", "host", "slots"},
	"ownership_history":  {"pool", "consumer", "host", "slots", "valid_from_seq", "valid_from_time", "valid_to_seq", "valid_to_time"},
}

func connect(t *testing.T, ctx context.Context, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestUpIsIdempotentAndVersionIsLatest(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	latest, err := Latest()
	if err != nil || latest < 1 {
		t.Fatalf("Latest() = %d, %v", latest, err)
	}
	if v, dirty, err := Version(ctx, url); err != nil || v != 0 || dirty {
		t.Fatalf("fresh database: Version = %d, %v, %v; want 0, false, nil", v, dirty, err)
	}
	t0 := time.Now()
	if err := Up(ctx, url); err != nil {
		t.Fatalf("first Up: %v", err)
	}
	t.Logf("first Up took %v", time.Since(t0))
	if err := Up(ctx, url); err != nil {
		t.Fatalf("second Up (should be a no-op): %v", err)
	}
	v, dirty, err := Version(ctx, url)
	if err != nil || v != latest || dirty {
		t.Fatalf("Version = %d, %v, %v; want %d, false, nil", v, dirty, err, latest)
	}
}

func TestSchemaTablesColumnsAndComments(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	if err := Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, ctx, url)
	for table, want := range schema {
		rows, err := conn.Query(ctx, `
			SELECT a.attname, col_description(a.attrelid, a.attnum) IS NOT NULL
			FROM pg_attribute a
			WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
			ORDER BY a.attnum`, "public."+table)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var name string
			var commented bool
			if err := rows.Scan(&name, &commented); err != nil {
				t.Fatal(err)
			}
			got = append(got, name)
			if !commented {
				t.Errorf("%s.%s has no COMMENT", table, name)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("table %s columns = %v, want %v", table, got, want)
		}
		var tableComment *string
		if err := conn.QueryRow(ctx, "SELECT obj_description(to_regclass($1), 'pg_class')", "public."+table).Scan(&tableComment); err != nil {
			t.Fatal(err)
		}
		if tableComment == nil || *tableComment == "" {
			t.Errorf("table %s has no COMMENT", table)
		}
	}
	// No table beyond the listed ones (and golang-migrate's own).
	rows, err := conn.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for table := range schema {
		want = append(want, table)
	}
	want = append(want, "schema_migrations")
	sort.Strings(want)
	if !reflect.DeepEqual(tables, want) {
		t.Errorf("tables = %v, want %v", tables, want)
	}
	for _, idx := range []string{"events_pool_time_idx", "decisions_pool_consumer_seq_idx", "decisions_pool_kind_seq_idx", "allocation_history_pool_from_seq_idx", "ownership_history_pool_host_from_idx"} {
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", "public."+idx).Scan(&ok); err != nil || !ok {
			t.Errorf("index %s missing (%v)", idx, err)
		}
	}
}

func TestAllocationsAsOf(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	if err := Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, ctx, url)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(seq int) time.Time { return t0.Add(time.Duration(seq) * time.Minute) }
	// Pool p: /a holds 2 from seq 3, 5 from seq 7 on; /b holds 4 from seq 5
	// until seq 9, then nothing. Pool q: /a holds 100 from seq 1 (must
	// never show up for p).
	history := []struct {
		pool, consumer string
		slots          int64
		from           int
		to             *int
	}{
		{"p", "/a", 2, 3, ptr(7)},
		{"p", "/a", 5, 7, nil},
		{"p", "/b", 4, 5, ptr(9)},
		{"q", "/a", 100, 1, nil},
	}
	// allocations_as_of_time finds the last event at or before a time:
	// pool p has an event at every sequence 1..9.
	for seq := 1; seq <= 9; seq++ {
		if _, err := conn.Exec(ctx, `INSERT INTO events (pool, seq, id, type, v, time, producer, data, prev_hash, hash)
			VALUES ('p', $1, $2, 'demand', 1, $3, 'test', '{}', '', '')`, seq, fmt.Sprint(seq), at(seq)); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range history {
		var toSeq *int64
		var toTime *time.Time
		if h.to != nil {
			s, tm := int64(*h.to), at(*h.to)
			toSeq, toTime = &s, &tm
		}
		if _, err := conn.Exec(ctx, `INSERT INTO allocation_history
			(pool, consumer, slots, valid_from_seq, valid_from_time, valid_to_seq, valid_to_time)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			h.pool, h.consumer, h.slots, h.from, at(h.from), toSeq, toTime); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		seq  int
		want map[string]int64
	}{
		{2, map[string]int64{}},
		{3, map[string]int64{"/a": 2}},
		{4, map[string]int64{"/a": 2}},
		{5, map[string]int64{"/a": 2, "/b": 4}},
		{7, map[string]int64{"/a": 5, "/b": 4}},
		{9, map[string]int64{"/a": 5}},
		{100, map[string]int64{"/a": 5}},
	}
	query := func(sql string, arg any) map[string]int64 {
		rows, err := conn.Query(ctx, sql, "p", arg)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for rows.Next() {
			var c string
			var n int64
			if err := rows.Scan(&c, &n); err != nil {
				t.Fatal(err)
			}
			got[c] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, c := range cases {
		if got := query("SELECT consumer, slots FROM allocations_as_of($1, $2)", int64(c.seq)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("allocations_as_of(p, %d) = %v, want %v", c.seq, got, c.want)
		}
		if got := query("SELECT consumer, slots FROM allocations_as_of_time($1, $2)", at(c.seq)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("allocations_as_of_time(p, t%d) = %v, want %v", c.seq, got, c.want)
		}
	}
	// Half a minute after seq 8's time: still the state of seq 8.
	if got := query("SELECT consumer, slots FROM allocations_as_of_time($1, $2)", at(8).Add(30*time.Second)); !reflect.DeepEqual(got, map[string]int64{"/a": 5, "/b": 4}) {
		t.Errorf("between events: %v", got)
	}
}

func ptr(i int) *int { return &i }

func TestDownMigrationsUndoEverything(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	if err := Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	m, err := open(url)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Down(); err != nil {
		t.Fatalf("down: %v", err)
	}
	m.Close()
	conn := connect(t, ctx, url)
	var n int
	if err := conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations') +
		(SELECT count(*) FROM pg_proc WHERE proname LIKE 'allocations_as_of%')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d tables/functions left after down", n)
	}
	if err := Up(ctx, url); err != nil {
		t.Fatalf("up after down: %v", err)
	}
}

func TestDriverURLAndErrors(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u@h:1/db?sslmode=disable":   "pgx5://u@h:1/db?sslmode=disable",
		"postgresql://u@h:1/db?sslmode=disable": "pgx5://u@h:1/db?sslmode=disable",
		"pgx5://u@h/db":                         "pgx5://u@h/db",
	} {
		if got, err := DriverURL(in); err != nil || got != want {
			t.Errorf("DriverURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if err := Up(context.Background(), "mysql://u:secret@h/db"); !errors.Is(err, ErrBadURL) {
		t.Errorf("Up with a mysql URL: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Up(ctx, "postgres://127.0.0.1:1/none"); !errors.Is(err, context.Canceled) {
		t.Errorf("Up with a cancelled context: %v", err)
	}
	if err := Up(context.Background(), "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"); !errors.Is(err, ErrMigrate) {
		t.Errorf("Up with nothing listening: %v", err)
	}
}

// TestOwnershipDownLeaves0005 steps back to 0005: the ownership
// tables and consumer_state's ownership columns go, the rest stays.
func TestOwnershipDownLeaves0005(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	if err := Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	m, err := open(url)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(6); err != nil { // back to 0006, over the later ones
		t.Fatalf("down to 0006: %v", err)
	}
	if err := m.Steps(-1); err != nil {
		t.Fatalf("down one step: %v", err)
	}
	m.Close()
	if v, dirty, err := Version(ctx, url); err != nil || v != 5 || dirty {
		t.Fatalf("Version after going down to 5 = %d, %v, %v; want 5", v, dirty, err)
	}
	conn := connect(t, ctx, url)
	var tables, cols int
	var kind string
	if err := conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'ownership%'),
		(SELECT count(*) FROM information_schema.columns WHERE table_name = 'consumer_state'),
		col_description('decisions'::regclass, (SELECT attnum FROM pg_attribute WHERE attrelid = 'decisions'::regclass AND attname = 'kind'))`).
		Scan(&tables, &cols, &kind); err != nil {
		t.Fatal(err)
	}
	if tables != 0 || cols != len(schema["consumer_state"])-4 || kind != "grant, reclaim, release, trim (lend, return, own reserved)." {
		t.Errorf("after down: %d ownership tables, %d consumer_state columns, decisions.kind comment %q", tables, cols, kind)
	}
	if err := Up(ctx, url); err != nil {
		t.Fatalf("up again: %v", err)
	}
}

// TestKilledMigratorLeavesNoDirtyDatabase: a migrator killed (kill -9)
// in the middle of a migration. golang-migrate's Up marked the version
// dirty before the migration and clear after it, so the next start of
// ledger dev refused for good ("Dirty database version 1. Fix and force
// version."), and no command of the ledger forces a version (decision
// 400). Now each migration commits with its version: the database is at
// the version before, clean, and the next migrator goes on.
func TestKilledMigratorLeavesNoDirtyDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	url := testenv.Postgres(t)
	m, err := open(url)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(5); err != nil {
		t.Fatal(err)
	}
	m.Close()
	// A reader holds consumer_state, which migration 0006 alters: the
	// migrator waits for it in the middle of 0006.
	reader, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(context.Background())
	watcher, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(context.Background())
	tx, err := reader.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT count(*) FROM consumer_state"); err != nil {
		t.Fatal(err)
	}
	migrator := exec.Command(os.Args[0], "-test.run=^TestKilledMigratorLeavesNoDirtyDatabase$")
	migrator.Env = append(os.Environ(), migratorURL+"="+url)
	var out bytes.Buffer
	migrator.Stdout, migrator.Stderr = &out, &out
	if err := migrator.Start(); err != nil {
		t.Fatal(err)
	}
	for waiting := 0; waiting == 0; {
		if ctx.Err() != nil {
			_ = migrator.Process.Kill()
			werr := migrator.Wait()
			t.Fatalf("the migrator never waited for consumer_state (%v):\n%s", werr, out.String())
		}
		// Not in the reader's transaction: pg_stat_activity is read once a
		// transaction.
		if err := watcher.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = migrator.Process.Kill()
	_ = migrator.Wait()
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if v, dirty, err := Version(ctx, url); err != nil || v != 5 || dirty {
		t.Errorf("after the migrator was killed in 0006: version %d, dirty %v, %v; want 5, clean", v, dirty, err)
	}
	if err := Up(ctx, url); err != nil {
		t.Fatalf("the next migrator: %v", err)
	}
	latest, err := Latest()
	if err != nil {
		t.Fatal(err)
	}
	if v, dirty, err := Version(ctx, url); err != nil || v != latest || dirty {
		t.Errorf("after the next migrator: version %d, dirty %v, %v; want %d, clean", v, dirty, err, latest)
	}
}
