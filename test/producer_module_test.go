package test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/testservice"
)

// TestClientFromAnotherModule builds and runs the test of test/producer,
// a module of its own that imports the ledger's client library as a
// site's scheduler would (a replace directive points at this checkout),
// against a running ledger: embedded NATS, PostgreSQL, the projector and
// the API, each answer checked against the OpenAPI description. The
// module holds a token per role: the producer's may append, the
// planner's may plan, the reader's may read.
func TestClientFromAnotherModule(t *testing.T) {
	const pool = "producer"
	s := testservice.Start(t, testservice.Config{Pools: []string{pool}})
	// A copy of the module, its replace pointing at this checkout, tidied
	// there: the ledger's own requirements may have moved since its
	// go.sum was written, and the test must not write into the tree.
	dir := t.TempDir()
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"go.mod", "go.sum", "producer.go", "producer_test.go"} {
		b, err := os.ReadFile(filepath.Join("producer", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "go.mod" {
			b = []byte(strings.Replace(string(b), "=> ../..", "=> "+repo, 1))
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=", "LEDGER_URL="+s.URL, "LEDGER_POOL="+pool,
			"LEDGER_PRODUCER_TOKEN="+s.Token(testservice.Producer), "LEDGER_PLANNER_TOKEN="+s.Token(testservice.Planner),
			"LEDGER_READER_TOKEN="+s.Token(testservice.Reader))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in a copy of test/producer: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	out := run("test", "-count=1", "-v", "./...")
	if !strings.Contains(out, "--- PASS: TestProducer") {
		t.Fatalf("go test in test/producer:\n%s", out)
	}
	// What the module appended is in the log, recorded as the producers
	// its tokens name.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var planned, produced int
	if err := s.DB.QueryRow(ctx, `SELECT count(*) FILTER (WHERE producer = 'planner'), count(*) FILTER (WHERE producer = 'producer') FROM events WHERE pool = $1`, pool).Scan(&planned, &produced); err != nil {
		t.Fatal(err)
	}
	if planned != 3 || produced != 2 {
		t.Errorf("the log holds %d events of the planner and %d of the producer, want 3 and 2", planned, produced)
	}
	t.Logf("%d answers of the ledger checked against its contract\n%s", s.Checked(), out)
}
