package projections

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestGroupHoldsOneLockSession: an instance of a partitioned projector
// takes the projector lock once, for all its partitions. Each partition
// took it on a session of its own, so an instance held --partitions
// sessions for one lock: two instances of 16 partitions needed 32 of the
// projector role's 30 connections before any pool connection, and the
// second retried "too many connections for role" while both ran
// (decision 509). Two instances of 16 partitions now fold side by side,
// with the sessions of their pools and one lock session each.
func TestGroupHoldsOneLockSession(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	d, db := newRoleDB(t)
	m := newModel(t, js)
	publishMix(m, rand.New(rand.NewPCG(46, 46)), 60)
	const n = 16
	startGroup(t, js, db, n, "a")
	startGroup(t, js, db, n, "b")
	waitProjected(t, db, m, time.Minute)
	admin := testdb.Pool(t, d.Admin)
	var sessions int
	if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND usename = 'ledger_projector'`).Scan(&sessions); err != nil {
		t.Fatal(err)
	}
	// The two instances share one pool here: its connections, and one
	// lock session per instance.
	if max := int(db.Stat().MaxConns()) + 2; sessions > max {
		t.Errorf("two instances of %d partitions hold %d sessions of the projector role, want at most %d (the pool's %d and a lock session each)",
			n, sessions, max, db.Stat().MaxConns())
	}

	// The one lock still keeps an unpartitioned projector of the name
	// and the instances apart.
	other := newDB(t)
	r := start(New(asProjector(t, js), other, WithLogger(quietLog())))
	defer r.stop()
	waitOffset := time.Now().Add(30 * time.Second)
	for {
		var rows int
		if err := other.QueryRow(context.Background(), `SELECT count(*) FROM projector_offsets`).Scan(&rows); err == nil && rows > 0 {
			break
		}
		if time.Now().After(waitOffset) {
			t.Fatal("the unpartitioned projector wrote no offset in 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	g, err := NewGroup(asProjector(t, js), other, n, WithLogger(quietLog()), WithInstance("c"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.Run(ctx); !errors.Is(err, ErrAnotherProjector) {
		t.Errorf("a partitioned instance beside an unpartitioned projector of its name: %v, want ErrAnotherProjector", err)
	}
}
