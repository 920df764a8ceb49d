package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// Verify reads the projection in one transaction and folds up to 2,000
// events between two of its statements. For a pool of thousands of
// consumers and hosts that took minutes, and PostgreSQL ended the
// reporting session as idle in its transaction (its role's
// idle_in_transaction_session_timeout, a minute; ledger dev's guard
// ends it too): `ledger audit verify --pool big` could not finish, exit
// 3 after three minutes (helper-41, round 10). Here the session's
// timeout is a second (set for this database as an administrator would)
// and the pool's 2,000 events fold in more than that: verify keeps its
// transaction busy and finishes with the projection intact.
func TestVerifyOutlastsTheIdleTransactionTimeout(t *testing.T) {
	ctx := context.Background()
	js := testenv.JetStream(t, testenv.NATS(t))
	roles := testdb.New(t)
	admin := testdb.Pool(t, roles.Admin)
	var name string
	if err := admin.QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	exec(t, admin, fmt.Sprintf(`ALTER ROLE ledger_reporting IN DATABASE %q SET idle_in_transaction_session_timeout = '1s'`, name))

	var leaves []string
	var cons events.ConsumerList
	for g := range 8 {
		for j := range 8 {
			p := fmt.Sprintf("/g%d/l%d", g, j)
			leaves = append(leaves, p)
			share := int64(1 + j)
			cons = append(cons, events.Consumer{Path: p, Share: &share})
		}
	}
	payloads := []events.Payload{&events.PlanChange{Plan: events.Plan{Consumers: cons}}}
	for h := range 64 {
		payloads = append(payloads, &events.HostUp{Host: fmt.Sprintf("h%d", h), Slots: 8})
	}
	rnd := rand.New(rand.NewPCG(4, 1))
	for range 2500 {
		d := map[string]int64{}
		for _, p := range leaves {
			d[p] = int64(rnd.IntN(16))
		}
		payloads = append(payloads, &events.Demand{Demands: d})
	}
	at := scenario.Epoch
	var last uint64
	for i, p := range payloads {
		env, err := events.New(fmt.Sprintf("ka-%d", i), "big", "test", at, domain.StampRules(p))
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(env)
		ack, err := js.Publish(ctx, stream.Subject("big", p.EventType()), data, jetstream.WithMsgID(env.ID))
		if err != nil {
			t.Fatal(err)
		}
		last, at = ack.Sequence, at.Add(time.Second)
	}
	project(t, js, testdb.Pool(t, roles.Projector), last)

	auditor := testenv.As(t, js, natsauth.Auditor)
	reporting := testdb.Pool(t, roles.Reporting)
	start := time.Now()
	rep, err := audit.Verify(ctx, auditor, reporting, nil, 1, "big", nil)
	t.Logf("verify of %d events: %v (%+v)", len(payloads), time.Since(start), rep)
	if err != nil {
		t.Fatalf("verify an intact projection with a 1 s idle-in-transaction timeout: %v", err)
	}
}
