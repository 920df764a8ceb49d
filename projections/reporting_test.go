package projections

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestReadmeQueriesAsReporting runs every SQL block of README.md with the
// reporting role (the DATABASE_URL `ledger dev` prints) on a projection
// of pool demo, folded by the projector's role: each works, and returns
// rows where the projection has some.
func TestReadmeQueriesAsReporting(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	roles, db := newRoleDB(t)
	m := newModel(t, js)
	m.publishOwnScenario(ownDir+"ml-lends-gpu.yaml", "demo")
	project(t, New(js, db, WithLogger(quietLog())), m)
	reporting := testdb.Pool(t, roles.Reporting)

	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(b), "```sql\n")[1:]
	if len(blocks) < 8 {
		t.Fatalf("README.md has %d SQL blocks: the format changed?", len(blocks))
	}
	ctx := context.Background()
	for _, block := range blocks {
		sql, _, _ := strings.Cut(block, "```")
		for _, q := range strings.Split(sql, ";") {
			if q = strings.TrimSpace(q); q == "" {
				continue
			}
			// The seq and time of the examples, as of this projection.
			q = strings.ReplaceAll(q, "allocations_as_of('demo', 1234)", "allocations_as_of('demo', 5)")
			rows, err := reporting.Query(ctx, q)
			if err != nil {
				t.Errorf("README's query as %s: %v\n%s", "ledger_reporting", err, q)
				continue
			}
			n := 0
			for rows.Next() {
				n++
			}
			if err := rows.Err(); err != nil {
				t.Errorf("README's query as ledger_reporting: %v\n%s", err, q)
			}
			t.Logf("%d rows: %.60s", n, strings.ReplaceAll(q, "\n", " "))
		}
	}
}
