package projections

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestFirstBatchOfAPartitionIsOneInstances: two instances taking a new
// partition at once (its offset row not there yet) both fold its first
// batch from 0. The offset row is the arbiter: the second instance's
// check waits for the first one's transaction and then finds the
// partition lost, instead of passing (FOR UPDATE locks no missing row)
// and writing the same events again, which stopped the projector on a
// duplicate key (decision 474). Run as the projector's role.
func TestFirstBatchOfAPartitionIsOneInstances(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	a := New(nil, db, WithPartition(1, 4), WithLogger(quietLog()))
	b := New(nil, db, WithPartition(1, 4), WithLogger(quietLog()))

	first := newBatch(0)
	first.to = 10
	tx1, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	if err := a.checkOffset(ctx, tx1, first); err != nil {
		t.Fatalf("the first instance's check: %v", err)
	}

	done := make(chan error, 1)
	go func() {
		second := newBatch(0)
		second.to = 12
		tx2, err := db.Begin(ctx)
		if err != nil {
			done <- err
			return
		}
		defer tx2.Rollback(ctx)
		done <- b.checkOffset(ctx, tx2, second)
	}()
	select {
	case err := <-done:
		t.Fatalf("the second instance's check returned (%v) while the first held the partition's first batch: both would write its events", err)
	case <-time.After(500 * time.Millisecond):
	}

	part, parts := a.partitionCols()
	if _, err := tx1.Exec(ctx, sqlUpsertOffset, a.offsetName(), int64(first.to), part, parts, a.cfg.instance); err != nil {
		t.Fatal(err)
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrPartitionLost) {
			t.Fatalf("the second instance's check after the first committed: %v, want ErrPartitionLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second instance's check still waits after the first committed")
	}
}
