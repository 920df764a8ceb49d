package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/projections/query"
)

// TestAsOfTimeIgnoresRefusedEvents: an event published around the ledger
// (a process holding the ledger's NATS identity, not its signing key),
// dated 2000-01-01, is refused (unauthenticated) and changes nothing;
// yet the reporting SQL's allocations_as_of_time and the console's time
// travel (query.LastSeqAtTime) took the pool's last event at or before a
// time among every event, refused ones included, so every time of the
// pool, 2020 included, answered its state now. They now count only the
// events the ledger took (decision 523): a time between two events is
// the state after the first, as allocations_as_of of its sequence says.
func TestAsOfTimeIgnoresRefusedEvents(t *testing.T) {
	svc := startService(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := client.New(svc.ledgerURL, client.WithToken(svc.token))
	var seqs []uint64
	for _, p := range []events.Payload{
		&events.PlanChange{Plan: events.Plan{Consumers: events.ConsumerList{{Path: "/A"}, {Path: "/B"}}}},
		&events.HostUp{Host: "h1", Slots: 12},
		&events.Demand{Demands: map[string]int64{"/A": 8, "/B": 8}},
		&events.Demand{Demands: map[string]int64{"/A": 2, "/B": 8}},
	} {
		seqs = append(seqs, appendEvent(ctx, t, c, p))
		time.Sleep(20 * time.Millisecond)
	}
	forged := publishForged(t, svc, "forged-1", time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), &events.Demand{Demands: map[string]int64{"/A": 0}})
	waitProjected(t, svc, forged)

	reporting := testdb.Pool(t, svc.dbURL)
	var refused *string
	if err := reporting.QueryRow(ctx, `SELECT refused FROM events WHERE pool = 'p' AND seq = $1`, int64(forged)).Scan(&refused); err != nil || refused == nil || *refused != "unauthenticated" {
		t.Fatalf("the forged event: refused %v, %v; want unauthenticated", refused, err)
	}
	var third, fourth time.Time
	if err := reporting.QueryRow(ctx, `SELECT (SELECT time FROM events WHERE pool = 'p' AND seq = $1), (SELECT time FROM events WHERE pool = 'p' AND seq = $2)`,
		int64(seqs[2]), int64(seqs[3])).Scan(&third, &fourth); err != nil {
		t.Fatal(err)
	}
	between := third.Add(fourth.Sub(third) / 2)
	slots := func(sql string, arg any) map[string]int64 {
		t.Helper()
		rows, err := reporting.Query(ctx, sql, "p", arg)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string]int64{}
		for rows.Next() {
			var c string
			var n int64
			if err := rows.Scan(&c, &n); err != nil {
				t.Fatal(err)
			}
			got[c] = n
		}
		return got
	}
	want := slots(`SELECT consumer, slots FROM allocations_as_of($1, $2)`, int64(seqs[2]))
	if want["/A"] != 6 || want["/B"] != 6 {
		t.Fatalf("allocations_as_of(p, %d) = %v, want /A 6 and /B 6", seqs[2], want)
	}
	for _, tc := range []struct {
		at   time.Time
		want map[string]int64
	}{
		{between, want},
		{time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), map[string]int64{}},
	} {
		got := slots(`SELECT consumer, slots FROM allocations_as_of_time($1, $2)`, tc.at)
		if len(got) != len(tc.want) || got["/A"] != tc.want["/A"] || got["/B"] != tc.want["/B"] || got["/"] != tc.want["/"] {
			t.Errorf("allocations_as_of_time(p, %s) = %v, want %v", tc.at.Format(time.RFC3339Nano), got, tc.want)
		}
	}
	api := testdb.Pool(t, svc.roles.API) // the console's role
	for _, tc := range []struct {
		at   time.Time
		want uint64
	}{{between, seqs[2]}, {time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), 0}, {time.Now().Add(time.Hour), seqs[3]}} {
		if got, err := query.LastSeqAtTime(ctx, api, "p", tc.at); err != nil || got != tc.want {
			t.Errorf("the console's time travel at %s: sequence %d, %v; want %d", tc.at.Format(time.RFC3339Nano), got, err, tc.want)
		}
	}
}

// publishForged publishes an unsigned event of pool p dated at, as a
// process holding the ledger's NATS identity but not its signing key
// can, and returns its sequence: the ledger refuses it (unauthenticated).
func publishForged(t *testing.T, svc service, id string, at time.Time, p events.Payload) uint64 {
	t.Helper()
	env, err := events.New(id, "p", "admin", at, p)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(env)
	nc := testenv.Connect(t, svc.natsURL, natsauth.Ledger)
	ack, err := nc.RequestMsg(&nats.Msg{Subject: "ledger.p." + string(p.EventType()), Data: body}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var pub struct{ Seq uint64 }
	if err := json.Unmarshal(ack.Data, &pub); err != nil || pub.Seq == 0 {
		t.Fatalf("the forged event was not stored: %s %v", ack.Data, err)
	}
	return pub.Seq
}

// appendEvent appends one event to pool p through the API and returns its
// sequence.
func appendEvent(ctx context.Context, t *testing.T, c *client.Client, p events.Payload) uint64 {
	t.Helper()
	ev, err := client.NewEvent(p)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Append(ctx, "p", ev)
	if err != nil {
		t.Fatal(err)
	}
	return res[0].Seq
}
