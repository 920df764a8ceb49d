package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/internal/testservice"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
)

// TestSignaturesCheckedAheadRefuseTheSame: every reader checks the
// signatures of a run of events over the cores ahead of its fold
// (projections.ReadDecoded, DecodeAll). On a log of two pools of 900
// events each, with events published around the ledger among them
// (unsigned, signed by another key, signed by the ledger's key and
// altered after, signed for another pool's subject, and a forged plan),
// each reader refuses as unauthenticated exactly the events a check one
// at a time (DecodeMessage, Authenticate, in order) refuses, at the same
// sequences, and ends with the same pools: the projector, a rebuild
// into an empty database (the auditor, WithUntil), the audit replayer
// with the reader's check and without it, audit verify, and the API
// (its catch-up before an append, and a what-if's fork).
func TestSignaturesCheckedAheadRefuseTheSame(t *testing.T) {
	ledgerKey := signing.Generate()
	keys := signing.NewKeyring(ledgerKey.Public())
	s := testservice.Start(t, testservice.Config{Signer: ledgerKey, SnapshotEvery: 250})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The log: written around the API, as another ledger instance (the
	// ledger's key) and as intruders would.
	var msgs []*nats.Msg
	bad := map[int]string{} // index in msgs -> how it was forged
	at := scenario.Epoch
	add := func(pool string, p events.Payload, forge string) {
		at = at.Add(time.Millisecond)
		env, err := events.New(fmt.Sprintf("%s-%d", pool, len(msgs)), pool, "test", at, p)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(stream.Subject(pool, p.EventType()))
		m.Data, _ = json.Marshal(env)
		switch forge {
		case "":
			ledgerKey.Sign(m)
		case "unsigned":
		case "other key":
			signing.Generate().Sign(m)
		case "altered":
			ledgerKey.Sign(m)
			m.Data = []byte(strings.Replace(string(m.Data), `"test"`, `"tEst"`, 1))
		case "other subject":
			m.Subject = stream.Subject("elsewhere", p.EventType())
			ledgerKey.Sign(m)
			m.Subject = stream.Subject(pool, p.EventType())
		}
		if forge != "" {
			bad[len(msgs)] = forge
		}
		msgs = append(msgs, m)
	}
	pools := []string{"va", "vb"}
	leaves := []string{"/a/x", "/a/y", "/b/x", "/b/y", "/c"}
	plan := func(extra ...string) *events.PlanChange {
		var cs []events.Consumer
		for _, l := range append(slices.Clone(leaves), extra...) {
			cs = append(cs, events.Consumer{Path: l})
		}
		return &events.PlanChange{Plan: events.Plan{Consumers: cs}}
	}
	forgeries := []string{"unsigned", "other key", "altered", "other subject"}
	for _, pool := range pools {
		add(pool, &events.HostUp{Host: "h1", Slots: 10}, "")
		add(pool, &events.HostUp{Host: "h2", Slots: 6}, "")
		add(pool, plan(), "")
	}
	for i := range 900 {
		pool := pools[i%2]
		forge := ""
		if i%29 == 7 {
			forge = forgeries[(i/29)%len(forgeries)]
		}
		switch {
		case i == 400: // a forged plan: /zz exists only for a reader that accepts it
			add(pool, plan("/zz"), "other key")
		case i%5 == 4:
			add(pool, &events.Release{Consumer: leaves[i%len(leaves)], Slots: 1}, forge)
		default:
			add(pool, &events.Demand{Demands: map[string]int64{leaves[i%len(leaves)]: int64(i % 9), leaves[(i+2)%len(leaves)]: int64(i % 4)}}, forge)
		}
	}
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for i, m := range msgs {
		f, err := s.JS.PublishMsgAsync(m)
		if err != nil {
			t.Fatal(err)
		}
		futures[i] = f
	}
	wantBad := map[uint64]bool{}
	var last uint64
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			if _, ok := bad[i]; ok {
				wantBad[ack.Sequence] = true
			}
			last = max(last, ack.Sequence)
		case err := <-f.Err():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}

	// The reference: one message at a time, in order, as before.
	refPools := map[string]*domain.Pool{}
	refBad := map[uint64]bool{}
	ids := map[string]*projections.IDs{}
	aj := testenv.As(t, s.JS, natsauth.Auditor)
	err := stream.Read(ctx, aj.Conn(), "ledger.>", 1, last, func(m stream.Msg) error {
		name, st, ok := projections.DecodeMessage(m.Seq, m.Subject, m.Time, m.Data)
		if !ok {
			return nil
		}
		projections.Authenticate(keys, &st, m.Subject, m.Header, m.Data)
		if refPools[name] == nil {
			refPools[name], ids[name] = domain.NewPool(name), projections.NewIDs()
		}
		res, err := projections.Apply(refPools[name], ids[name], st)
		if res.Refused == projections.CodeUnauthenticated {
			refBad[m.Seq] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(refBad, wantBad) || len(wantBad) < 30 {
		t.Fatalf("the check one at a time refuses %d events, %d were forged: %v", len(refBad), len(wantBad), diffSeqs(refBad, wantBad))
	}
	if _, ok := refPools["va"].Consumer("/zz"); ok {
		t.Fatal("the forged plan counted in the reference")
	}

	// The projector of the service, and a rebuild as the auditor.
	waitProjected(ctx, t, s, last)
	checkProjection := func(who string, q query.Querier) {
		t.Helper()
		got := map[uint64]bool{}
		rows, err := q.Query(ctx, `SELECT seq FROM events WHERE refused = $1`, string(projections.CodeUnauthenticated))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq); err != nil {
				t.Fatal(err)
			}
			got[uint64(seq)] = true
		}
		if !maps.Equal(got, refBad) {
			t.Errorf("%s refuses as unauthenticated: %v", who, diffSeqs(got, refBad))
		}
		for _, pool := range pools {
			for _, c := range refPools[pool].Consumers() {
				var alloc, demand int64
				if err := q.QueryRow(ctx, `SELECT allocated, demand FROM consumer_state WHERE pool = $1 AND consumer = $2`, pool, c.Path).Scan(&alloc, &demand); err != nil {
					t.Fatalf("%s: %s %s: %v", who, pool, c.Path, err)
				}
				if alloc != c.Allocated || demand != c.Demand {
					t.Errorf("%s: %s %s holds %d of %d, the reference %d of %d", who, pool, c.Path, alloc, demand, c.Allocated, c.Demand)
				}
			}
		}
	}
	checkProjection("the projector", s.DB)
	rebuilt := newDB(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := projections.New(aj, rebuilt, projections.WithName("verify-ahead"), projections.WithLogger(quiet), projections.WithTrustedKeys(keys),
		projections.WithUntil(last)).Run(ctx); err != nil {
		t.Fatal(err)
	}
	checkProjection("the rebuild", rebuilt)

	// The audit replayer: the reader's check, its own, and a replayer
	// that trusts no key after a reader that checked (nothing refused).
	for _, c := range []struct {
		name         string
		readKeys     *signing.Keyring
		replayerKeys *signing.Keyring
		want         map[uint64]bool
	}{
		{"checked by the reader", keys, keys, refBad},
		{"checked by the replayer", nil, keys, refBad},
		{"checked by the reader, a replayer trusting none", keys, nil, map[uint64]bool{}},
	} {
		r := audit.NewReplayer(nil, 1)
		r.Trust(c.replayerKeys)
		got := map[uint64]bool{}
		err := audit.ReadLogTrusted(ctx, aj, 1, "ledger.>", c.readKeys, func(m audit.Message) error {
			ev, ok, err := r.Fold(ctx, m)
			if ok && ev.Result.Refused == projections.CodeUnauthenticated {
				got[m.Stored.Seq] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, c.want) {
			t.Errorf("replay, %s: %v", c.name, diffSeqs(got, c.want))
		}
	}
	rep, err := audit.Verify(ctx, aj, s.DB, keys, 1, "", nil)
	if err != nil {
		t.Fatalf("audit verify: %v", err)
	}
	verified := map[uint64]bool{}
	for _, r := range rep.Unauthenticated {
		verified[r.Seq] = true
	}
	if !maps.Equal(verified, refBad) || rep.UpTo < last {
		t.Errorf("audit verify up to %d names as unauthenticated: %v", rep.UpTo, diffSeqs(verified, refBad))
	}

	// The API: a what-if's fork folds the log as the reference did, and
	// its catch-up before an append refuses the forged plan's consumer.
	for _, pool := range pools {
		wi, err := s.Client(testservice.Reader).WhatIf(ctx, pool, client.WhatIfRequest{Events: []client.WhatIfEvent{}})
		if err != nil {
			t.Fatalf("what-if %s: %v", pool, err)
		}
		want := map[string][2]int64{}
		for _, c := range refPools[pool].Consumers() {
			want[c.Path] = [2]int64{c.Allocated, c.Demand}
		}
		got := map[string][2]int64{}
		for _, c := range wi.Consumers {
			if c.Before != nil {
				got[c.Path] = [2]int64{c.Before.Allocated, c.Before.Demand}
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("what-if of %s forks %v, the reference %v", pool, got, want)
		}
	}
	producer := s.Client(testservice.Producer)
	_, err = producer.Append(ctx, "va", mustEvent(t, "zz-1", &events.Demand{Demands: map[string]int64{"/zz": 1}}))
	if !errors.Is(err, client.CodeUnknownConsumer) {
		t.Fatalf("a demand of the forged plan's consumer: %v, want unknown_consumer", err)
	}
	res, err := producer.Append(ctx, "va", mustEvent(t, "c-1", &events.Demand{Demands: map[string]int64{"/c": 3}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client(testservice.Reader).WaitProjected(ctx, "va", res[0].Seq); err != nil {
		t.Fatal(err)
	}
}

func mustEvent(t *testing.T, id string, p events.Payload) client.Event {
	t.Helper()
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return client.Event{ID: id, Type: string(p.EventType()), Data: data}
}

// waitProjected waits until the service's projector committed seq.
func waitProjected(ctx context.Context, t *testing.T, s *testservice.Service, seq uint64) {
	t.Helper()
	for {
		at, err := query.ProjectorOffset(ctx, s.DB, "")
		if err != nil {
			t.Fatal(err)
		}
		if at >= seq {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the projector reached %d, not %d", at, seq)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// diffSeqs says which sequences are in one set and not the other.
func diffSeqs(got, want map[uint64]bool) string {
	var extra, missing []uint64
	for s := range got {
		if !want[s] {
			extra = append(extra, s)
		}
	}
	for s := range want {
		if !got[s] {
			missing = append(missing, s)
		}
	}
	slices.Sort(extra)
	slices.Sort(missing)
	return fmt.Sprintf("%d sequences more than wanted %v, %d missing %v", len(extra), extra, len(missing), missing)
}
