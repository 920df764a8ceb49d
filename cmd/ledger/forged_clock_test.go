package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestForgedEventTimeIsNotThePoolsClock: an event published around the
// ledger (a process holding the ledger's NATS identity, not its signing
// key), dated 2099, is refused (unauthenticated). The API stamped a new
// event no earlier than the pool's last event, refused ones included, so
// every event appended after it was stored as of 2099 (helper-49, round
// 13). It now stamps no earlier than the last event the pool applied
// (decision 530): the next event is stamped by the clock.
func TestForgedEventTimeIsNotThePoolsClock(t *testing.T) {
	svc, ctx, c, forged := forgedAfterPlan(t, "forged-clock")
	forgedAt := forgedTime
	appendOne := func(p events.Payload) uint64 { t.Helper(); return appendEvent(ctx, t, c, p) }

	before := time.Now()
	next := appendOne(&events.Demand{Demands: map[string]int64{"/A": 2}})
	waitProjected(t, svc, next)
	reporting := testdb.Pool(t, svc.dbURL)
	var refused *string
	var at time.Time
	if err := reporting.QueryRow(ctx, `SELECT refused FROM events WHERE pool = 'p' AND seq = $1`, int64(forged)).Scan(&refused); err != nil || refused == nil || *refused != "unauthenticated" {
		t.Fatalf("the forged event: refused %v, %v; want unauthenticated", refused, err)
	}
	if err := reporting.QueryRow(ctx, `SELECT time FROM events WHERE pool = 'p' AND seq = $1 AND refused IS NULL`, int64(next)).Scan(&at); err != nil {
		t.Fatalf("the event appended after the forged one: %v", err)
	}
	if at.Before(before.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("the event appended after a forged one dated %s is stamped %s, want the clock (%s)", forgedAt.Format(time.RFC3339), at.UTC().Format(time.RFC3339Nano), before.UTC().Format(time.RFC3339))
	}
}

// TestForgedEventTimeDoesNotEndTheHistory: the time travel of explain
// --at TIME and of a what-if at_time stopped at the first event stamped
// after the time, refused or not, so an event published around the
// ledger dated 2099 hid every later event from them (helper-49, round
// 13; masked while that event also stamped the later ones 2099). A time
// is now passed only by an event the ledger stamped (decision 530). As
// the auditor and the admin token ledger dev prints.
func TestForgedEventTimeDoesNotEndTheHistory(t *testing.T) {
	svc, ctx, c, forged := forgedAfterPlan(t, "forged-end")
	appendOne := func(p events.Payload) uint64 { t.Helper(); return appendEvent(ctx, t, c, p) }
	last := appendOne(&events.Demand{Demands: map[string]int64{"/A": 3}})
	if last <= forged {
		t.Fatalf("the demand (sequence %d) is not after the forged event (%d)", last, forged)
	}
	at := time.Now().Add(time.Hour).UTC()

	logArgs := []string{"--nats-url", svc.natsURL, "--nats-creds", testenv.Creds(t, svc.natsURL, natsauth.Auditor), "--trusted-keys", svc.trustedKeys}
	out, errOut, err := runLedger(t, "", append([]string{"explain", "--pool", "p", "--consumer", "/A", "--at", at.Format(time.RFC3339)}, logArgs...)...)
	// Exit 2 names the forged event (TestFoldingCommandsRefuseUnauthenticated).
	if exitCode(err) != 2 || !strings.Contains(out, fmt.Sprintf("/A in pool p at sequence %d ", last)) {
		t.Errorf("explain --at %s: exit %d (%v), want /A at sequence %d\n%s\n%s", at.Format(time.RFC3339), exitCode(err), err, last, out, errOut)
	}

	ev, err := client.NewWhatIfEvent(&events.Demand{Demands: map[string]int64{"/A": 4}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.WhatIf(ctx, "p", client.WhatIfRequest{AtTime: &at, Events: []client.WhatIfEvent{ev}})
	if err != nil {
		t.Fatal(err)
	}
	if res.At.Seq != last || len(res.Events) != 1 || !res.Events[0].Time.Equal(at) {
		t.Errorf("what-if at %s: forked at %+v, events %+v; want at sequence %d, the event at %s", at.Format(time.RFC3339), res.At, res.Events, last, at.Format(time.RFC3339))
	}
}

// forgedTime is the date of forgedAfterPlan's forged event.
var forgedTime = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)

// forgedAfterPlan starts the service and gives pool p a plan (/A) and a
// host through the API, then an unsigned demand dated forgedTime
// published around the ledger (publishForged, its sequence returned);
// the context ends with the test.
func forgedAfterPlan(t *testing.T, id string) (service, context.Context, *client.Client, uint64) {
	t.Helper()
	svc := startService(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	c := client.New(svc.ledgerURL, client.WithToken(svc.token))
	appendEvent(ctx, t, c, &events.PlanChange{Plan: events.Plan{Consumers: events.ConsumerList{{Path: "/A"}}}})
	appendEvent(ctx, t, c, &events.HostUp{Host: "h1", Slots: 4})
	return svc, ctx, c, publishForged(t, svc, id, forgedTime, &events.Demand{Demands: map[string]int64{"/A": 1}})
}
