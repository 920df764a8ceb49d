package projections

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// partitionDeliveries is how many deliveries the partition consumers of
// a projection of n partitions made, in all, read as the ledger's
// identity reads them (GET /v1/status), and their filters.
func partitionDeliveries(t *testing.T, js jetstream.JetStream, n int) (uint64, [][]string) {
	t.Helper()
	ledger := testenv.As(t, js, natsauth.Ledger)
	var total uint64
	var filters [][]string
	for k := range n {
		c, err := ledger.Consumer(context.Background(), stream.Name, PartitionName(DefaultName, k, n))
		if err != nil {
			t.Fatal(err)
		}
		total += c.CachedInfo().Delivered.Consumer
		filters = append(filters, consumerFilters(c.CachedInfo().Config))
	}
	return total, filters
}

// publishTo publishes rounds of demand on the pools.
func publishTo(m *model, rng *rand.Rand, pools []string, rounds int) {
	for range rounds {
		for _, p := range pools {
			m.publish(p, &events.Demand{Demands: map[string]int64{"/A": rng.Int64N(100), "/B/B1": rng.Int64N(100)}})
		}
	}
}

// TestPartitionedStreamMigration: a stream made by an older release
// (subjects without partitions) is projected by partitioned instances
// that read every event; `ledger nats setup` gives it partitions while
// they run and they go on (reading the new form too); restarted, they
// read only their own events (their consumers filtered to their
// partitions' subjects and the old form, each new event delivered once),
// a partition that no event reaches any more is carried to the stream's
// end by an instance that never held it, and the projection is the
// model's fold of the whole log throughout.
func TestPartitionedStreamMigration(t *testing.T) {
	ctx := context.Background()
	js := connectNATS(t, testenv.NATS(t))
	if err := js.DeleteStream(ctx, stream.Name); err != nil {
		t.Fatal(err)
	}
	old := stream.Config()
	old.Subjects, old.SubjectTransform = []string{"ledger.>"}, nil
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	db := newDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(11, 12))
	var pools, notLast []string // every pool; those outside partition 3 of 4
	for i := range 16 {
		p := fmt.Sprintf("p%d", i)
		m.publishScenario(seedFile, p)
		pools = append(pools, p)
		if PartitionOf(p, 4) != 3 {
			notLast = append(notLast, p)
		}
	}
	if len(notLast) == len(pools) || len(notLast) == 0 {
		t.Fatalf("pools %v leave partition 3 of 4 empty or alone", pools)
	}
	publishTo(m, rng, pools, 2)
	a := startGroup(t, js, db, 4, "a")
	b := startGroup(t, js, db, 4, "b")
	waitProjected(t, db, m, 60*time.Second)
	checkAgainstModel(t, db, m)
	if _, filters := partitionDeliveries(t, js, 4); !slices.Equal(filters[0], []string{"ledger.>"}) {
		t.Fatalf("before the migration partition 0 reads %v, want every event", filters[0])
	}

	s, err := stream.Setup(ctx, js, stream.Settings{Partitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	from := stream.PartitionedFrom(s.CachedInfo().Config)
	if from != m.lastSeq+1 {
		t.Fatalf("partitioned from %d, want %d", from, m.lastSeq+1)
	}
	publishTo(m, rng, pools, 2) // the running instances read the new form too
	waitProjected(t, db, m, 60*time.Second)
	checkAgainstModel(t, db, m)
	a.stop(t)
	b.stop(t)

	c := startGroup(t, js, db, 4, "c")
	d := startGroup(t, js, db, 4, "d")
	publishTo(m, rng, pools, 1)
	waitProjected(t, db, m, 60*time.Second)
	before, filters := partitionDeliveries(t, js, 4)
	for k, f := range filters {
		want := []string{stream.LegacyFilter, stream.PartitionFilter(k), stream.PartitionFilter(k + 4)}
		if !slices.Equal(f, want) {
			t.Errorf("partition %d of 4 reads %v, want %v", k, f, want)
		}
	}
	c.stop(t)
	d.stop(t)
	// A new instance, and only pools outside partition 3: nothing pins
	// partition 3 to it, and its offset is carried to the end all the
	// same, by an instance that does not hold it.
	e := startGroup(t, js, db, 4, "e")
	first := m.lastSeq + 1
	publishTo(m, rng, notLast, 6)
	waitProjected(t, db, m, 60*time.Second)
	checkAgainstModel(t, db, m)
	after, _ := partitionDeliveries(t, js, 4)
	events := m.lastSeq - first + 1
	t.Logf("%d new events, %d deliveries to the 4 partition consumers", events, after-before)
	if after-before > events+events/2 {
		t.Errorf("%d deliveries for %d events: partitions read the others' events (once each would be %d)", after-before, events, events)
	}
	if o := column(t, db, `SELECT owner FROM projector_offsets WHERE name = 'projector-p3of4'`); len(o) != 1 || o[0] != "e" {
		t.Errorf("partition 3 last moved by %v, want e (which never held it)", o)
	}
	e.stop(t)
}
