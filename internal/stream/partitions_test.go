package stream_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// partitionOf is NATS's partition(n, 1) of a pool: FNV-1a of its name
// modulo n (projections.PartitionOf, which this package cannot import).
func partitionOf(pool string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(pool))
	return int(h.Sum32() % uint32(n))
}

func TestPublishedAndPoolOf(t *testing.T) {
	for _, c := range []struct{ stored, published, pool string }{
		{"ledger.p1.demand", "ledger.p1.demand", "p1"},
		{"ledger.p1.demand.17", "ledger.p1.demand", "p1"},
		{"ledger.17.demand.0", "ledger.17.demand", "17"},
		{"ledger.p1.demand.x", "ledger.p1.demand.x", ""},       // not a partition token
		{"ledger.p1.demand.1000", "ledger.p1.demand.1000", ""}, // beyond MaxPartitions' digits
		{"other.p1.demand.3", "other.p1.demand.3", ""},
		{"ledger.p1", "ledger.p1", ""},
	} {
		if got := stream.Published(c.stored); got != c.published {
			t.Errorf("Published(%q) = %q, want %q", c.stored, got, c.published)
		}
		pool, err := stream.PoolOf(c.stored)
		if (c.pool == "") != (err != nil) || pool != c.pool {
			t.Errorf("PoolOf(%q) = %q, %v; want %q", c.stored, pool, err, c.pool)
		}
	}
}

// TestPartitionedSubjects: a stream made now stores each event the ledger
// publishes with its pool's partition, as NATS's partition() computes it
// and projections.PartitionOf does; a pool's filter and its expected
// sequence check see it; nothing can be stored on a partition's subject
// directly: the ledger may not publish there, and the stream does not
// capture it from admin either.
func TestPartitionedSubjects(t *testing.T) {
	ctx := context.Background()
	url := testenv.NATS(t)
	admin := adminJS(t, url)
	s, err := admin.Stream(ctx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	n := stream.Partitions(s.CachedInfo().Config)
	if n != stream.DefaultPartitions || stream.PartitionedFrom(s.CachedInfo().Config) != 1 {
		t.Fatalf("a new stream: %d partitions from %d, want %d from 1", n, stream.PartitionedFrom(s.CachedInfo().Config), stream.DefaultPartitions)
	}
	ledger, err := jetstream.New(testenv.Connect(t, url, natsauth.Ledger))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		pool := fmt.Sprintf("pool-%d", i)
		ack, err := ledger.Publish(ctx, stream.Subject(pool, "demand"), []byte(`{}`), jetstream.WithExpectLastSequenceForSubject(0, stream.PoolFilter(pool)))
		if err != nil {
			t.Fatal(err)
		}
		m, err := s.GetMsg(ctx, ack.Sequence)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("ledger.%s.demand.%d", pool, partitionOf(pool, n)); m.Subject != want {
			t.Fatalf("stored on %s, want %s", m.Subject, want)
		}
		if _, err := ledger.Publish(ctx, stream.Subject(pool, "demand"), []byte(`{}`), jetstream.WithExpectLastSequenceForSubject(0, stream.PoolFilter(pool))); err == nil {
			t.Fatalf("pool %s: a second append expecting none before was stored", pool)
		}
	}
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		t.Cleanup(cancel)
		return c
	}
	forged := fmt.Sprintf("ledger.pool-1.demand.%d", (partitionOf("pool-1", n)+1)%n)
	if _, err := ledger.Publish(short(), forged, []byte(`{}`)); err == nil {
		t.Errorf("the ledger stored a message on %s", forged)
	}
	if _, err := admin.Publish(short(), forged, []byte(`{}`)); !errors.Is(err, jetstream.ErrNoStreamResponse) && !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("admin's publish on %s: %v, want it not stored (no responder)", forged, err)
	}
	if last, _ := stream.LastSeq(ctx, testenv.Connect(t, url, natsauth.Auditor)); last != 60 {
		t.Errorf("stream ends at %d, want 60", last)
	}
}

// TestMigrateStream: a stream made by an older release (every subject
// under ledger.>, none with a partition) keeps working: Setup gives it
// partitions from the sequence after its last, its events keep their
// subjects and pools' filters read both forms in order; the count is
// then fixed.
func TestMigrateStream(t *testing.T) {
	ctx := context.Background()
	url := testenv.NATS(t)
	admin := adminJS(t, url)
	if err := admin.DeleteStream(ctx, stream.Name); err != nil {
		t.Fatal(err)
	}
	old := stream.Config()
	old.Subjects, old.SubjectTransform = []string{"ledger.>"}, nil
	if _, err := admin.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := admin.Publish(ctx, stream.Subject("a", "demand"), fmt.Appendf(nil, `{"i":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	// Ensure (every identity's) uses it as it is.
	s, err := stream.Ensure(ctx, admin)
	if err != nil || stream.Partitions(s.CachedInfo().Config) != 0 {
		t.Fatalf("Ensure on an old stream: %v, %d partitions", err, stream.Partitions(s.CachedInfo().Config))
	}
	if s, err = stream.Setup(ctx, admin, stream.Settings{Partitions: 8}); err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if stream.Partitions(cfg) != 8 || stream.PartitionedFrom(cfg) != 6 || !cfg.AllowDirect || !cfg.DenyDelete || !cfg.DenyPurge {
		t.Fatalf("migrated: %d partitions from %d, config %+v", stream.Partitions(cfg), stream.PartitionedFrom(cfg), cfg)
	}
	for i := 5; i < 10; i++ {
		if _, err := admin.Publish(ctx, stream.Subject("a", "demand"), fmt.Appendf(nil, `{"i":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	nc := testenv.Connect(t, url, natsauth.Auditor)
	got := collect(t, nc, stream.PoolFilter("a"), 1, 100)
	if len(got) != 10 {
		t.Fatalf("pool a reads %d events, want 10", len(got))
	}
	for i, m := range got {
		want := "ledger.a.demand"
		if i >= 5 {
			want = fmt.Sprintf("ledger.a.demand.%d", partitionOf("a", 8))
		}
		if m.Seq != uint64(i+1) || m.Subject != want || string(m.Data) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Errorf("event %d: %d %s %s, want %s", i, m.Seq, m.Subject, m.Data, want)
		}
	}
	if old := collect(t, nc, stream.LegacyFilter, 1, 100); len(old) != 5 {
		t.Errorf("%d events in the old form, want 5", len(old))
	}
	if _, err := stream.Setup(ctx, admin, stream.Settings{Partitions: 16}); !errors.Is(err, stream.ErrPartitions) {
		t.Errorf("another count for a partitioned stream: %v, want ErrPartitions", err)
	}
	if s, err = stream.Setup(ctx, admin, stream.Settings{}); err != nil || stream.Partitions(s.CachedInfo().Config) != 8 || stream.PartitionedFrom(s.CachedInfo().Config) != 6 {
		t.Errorf("Setup again: %v", err)
	}
}
