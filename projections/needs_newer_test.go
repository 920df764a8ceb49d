package projections

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestPoolNeedingNewerLedgerHaltsAlone: a pool a build folding the rules
// version in development projected (rules 4) is, for a projector without
// it, a pool that needs a newer ledger. Restarted without development,
// the projector halts that pool alone, naming the sequence and the
// version, and projects every other pool (the red team's F11: one such
// pool stopped every pool's projection).
func TestPoolNeedingNewerLedgerHaltsAlone(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	db := newDB(t)
	m := newModel(t, js)
	m.publishScenario("../test/scenarios/seed/seed-001-share-ratio-three-consumers.yaml", "ok")
	var last uint64
	publish := func(id string, p events.Payload) {
		env, err := events.New(id, "v4", "test", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(env)
		ack, err := js.Publish(context.Background(), stream.Subject("v4", p.EventType()), b, jetstream.WithMsgID(id))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	publish("v4-plan", &events.PlanChange{Plan: events.Plan{Rules: int(domain.RulesDevelopment),
		Policy: events.Policy{Reclaim: events.ReclaimShareRatio}, Consumers: []events.Consumer{{Path: "/a"}, {Path: "/b"}}}})
	planSeq := last
	publish("v4-host", &events.HostUp{Host: "h1", Slots: 4})
	publish("v4-demand", &events.Demand{Demands: map[string]int64{"/a": 2}})

	dev := start(New(asProjector(t, js), db, WithLogger(quietLog()), WithDevelopmentRules()))
	if err := dev.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, dev.p, "v4", last)
	if err := dev.stop(); err != nil {
		t.Fatal(err)
	}

	// Without development: the v4 pool halts when it is taken up (its
	// saved state names rules 4), the other pool goes on.
	publish("v4-more", &events.Demand{Demands: map[string]int64{"/b": 1}})
	m.publish("ok", &events.Demand{Demands: map[string]int64{"/A": 3}})
	p := New(asProjector(t, js), db, WithLogger(quietLog()))
	r := start(p)
	if err := r.waitFor(t, m); err != nil {
		t.Fatalf("the other pool: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.Halted()["v4"] == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var seq int64
	var reason string
	if err := db.QueryRow(context.Background(), `SELECT seq, reason FROM halted_pools WHERE pool = 'v4'`).Scan(&seq, &reason); err != nil {
		t.Fatalf("the v4 pool is not halted: %v", err)
	}
	if uint64(seq) < planSeq || !strings.Contains(reason, "newer ledger") || !strings.Contains(reason, "rules version 4") {
		t.Fatalf("halted at %d: %q", seq, reason)
	}
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func waitApplied(t *testing.T, p *Projector, pool string, seq uint64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for p.Applied(pool) < seq {
		if time.Now().After(deadline) {
			t.Fatalf("%s not applied up to %d (at %d)", pool, seq, p.Applied(pool))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
