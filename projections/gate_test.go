package projections

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestGateRefusals: with trusted keys, an unsigned event and one signed
// by another key are refused (unauthenticated); a stored event whose id
// the pool already applied (a retry after the duplicate window) is
// refused (duplicate_id), also after a restart from a snapshot. Refused
// events are stored and chained and change nothing.
func TestGateRefusals(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	ledgerKey := signing.Generate()
	keys := signing.NewKeyring(ledgerKey.Public())
	n := 0
	pub := func(id string, p events.Payload, sg *signing.Signer) uint64 {
		t.Helper()
		n++
		env, err := events.New(id, "g", "test", scenario.Epoch.Add(time.Duration(n)*time.Second), p)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(stream.Subject("g", p.EventType()))
		m.Data, _ = json.Marshal(env)
		if sg != nil {
			sg.Sign(m)
		}
		ack, err := js.PublishMsg(context.Background(), m) // no msg id: as if past the window
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	pub("h1", &events.HostUp{Host: "h1", Slots: 10}, ledgerKey)
	pub("p1", &events.PlanChange{Plan: events.Plan{Consumers: []events.Consumer{{Path: "/a"}, {Path: "/b"}}}}, ledgerKey)
	pub("d1", &events.Demand{Demands: map[string]int64{"/a": 2}}, ledgerKey)
	unsigned := pub("x1", &events.Demand{Demands: map[string]int64{"/b": 10}}, nil)
	forged := pub("x2", &events.Demand{Demands: map[string]int64{"/b": 10}}, signing.Generate())
	dup := pub("d1", &events.Demand{Demands: map[string]int64{"/a": 2}}, ledgerKey)
	last := pub("r1", &events.Release{Consumer: "/a", Slots: 1}, ledgerKey)

	run := func() {
		p := New(asProjector(t, js), db, WithLogger(quietLog()), WithTrustedKeys(keys), WithSnapshotEvery(2))
		r := start(p)
		m := &model{last: map[string]uint64{"g": last}}
		if err := r.waitFor(t, m); err != nil {
			t.Fatal(err)
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
	run()
	want := map[uint64]string{unsigned: string(CodeUnauthenticated), forged: string(CodeUnauthenticated), dup: string(CodeDuplicateID)}
	rows, _ := db.Query(context.Background(), `SELECT seq, coalesce(refused, '') FROM events WHERE pool = 'g' ORDER BY seq`)
	var seq int64
	var refused string
	count := 0
	for rows.Next() {
		if err := rows.Scan(&seq, &refused); err != nil {
			t.Fatal(err)
		}
		count++
		if w := want[uint64(seq)]; refused != w {
			t.Errorf("event %d refused %q, want %q", seq, refused, w)
		}
	}
	if count != int(last) {
		t.Fatalf("%d events stored, want %d", count, last)
	}
	var a, b int64
	if err := db.QueryRow(context.Background(), `SELECT (SELECT allocated FROM consumer_state WHERE pool='g' AND consumer='/a'), (SELECT allocated FROM consumer_state WHERE pool='g' AND consumer='/b')`).Scan(&a, &b); err != nil {
		t.Fatal(err)
	}
	if a != 1 || b != 0 {
		t.Fatalf("allocated /a=%d /b=%d, want 1 and 0: a refused event changed the state", a, b)
	}

	// After a restart (from the snapshots) a late duplicate of d1 is
	// still refused.
	dup2 := pub("d1", &events.Demand{Demands: map[string]int64{"/a": 2}}, ledgerKey)
	last = dup2
	run()
	if err := db.QueryRow(context.Background(), `SELECT refused FROM events WHERE pool = 'g' AND seq = $1`, int64(dup2)).Scan(&refused); err != nil || refused != string(CodeDuplicateID) {
		t.Fatalf("duplicate after restart: %q %v", refused, err)
	}
}
