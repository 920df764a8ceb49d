package test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testservice"
)

// loaded is a scenario sent through the service: the payloads in the
// order they were appended, with the sequence and time the log gave
// each, and the index of the last event of each step.
type loaded struct {
	pool     string
	payloads []events.Payload
	seqs     []uint64
	times    []time.Time
	stepEnd  []int
}

// loadScenario sends a scenario's events through the API one by one, as
// their producers would: the plan and the hosts with the planner's
// token, demand and release with the producer's.
func loadScenario(t *testing.T, s *testservice.Service, file, pool string) *loaded {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sc, err := scenario.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	producer, planner := s.Client(testservice.Producer), s.Client(testservice.Planner)
	l := &loaded{pool: pool}
	send := func(p events.Payload) {
		c := planner
		if t := p.EventType(); t == events.TypeDemand || t == events.TypeRelease {
			c = producer
		}
		ev, err := client.NewEvent(p)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Append(ctx, pool, ev)
		if err != nil {
			t.Fatalf("%s: append %s: %v", file, p.EventType(), err)
		}
		l.payloads, l.seqs = append(l.payloads, p), append(l.seqs, res[0].Seq)
	}
	for _, ev := range sc.Setup() {
		send(ev.Payload)
	}
	for _, st := range sc.Steps {
		for _, ev := range st.Events {
			send(ev.Payload)
		}
		l.stepEnd = append(l.stepEnd, len(l.seqs)-1)
	}
	// The times the ledger stamped, from the log.
	str, err := s.JS.Stream(ctx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range l.seqs {
		m, err := str.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		sd, err := stream.DecodeRaw(seq, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		l.times = append(l.times, sd.Envelope.Time)
	}
	if err := s.WaitProjected(ctx, pool, l.seqs[len(l.seqs)-1]); err != nil {
		t.Fatal(err)
	}
	return l
}

// reference folds the first n loaded events in memory with the engine,
// at the sequences and times the log gave them, as the service would.
func (l *loaded) reference(t *testing.T, n int) *domain.Pool {
	t.Helper()
	p := domain.NewPool(l.pool)
	for i := range n {
		if _, err := p.Apply(domain.Event{Seq: l.seqs[i], Time: l.times[i], Payload: domain.StampRules(l.payloads[i])}); err != nil {
			t.Fatalf("reference fold of event %d: %v", i, err)
		}
	}
	return p
}

// TestWhatIfOnSeedPools is issue 23's acceptance of what-if: each seed
// scenario is loaded through the service (snapshots every 2 events, so
// forks start from a snapshot and replay), then a reader asks what a
// plan change and more demand would do. The answer must equal folding
// the same events after the same prefix in memory, for a fork of the
// present and of the past (by sequence and by time), and nothing may be
// appended. On seed 001 the plan change moves slots, and `ledger
// what-if` prints it.
func TestWhatIfOnSeedPools(t *testing.T) {
	files, err := filepath.Glob("scenarios/seed/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no seed scenarios: %v", err)
	}
	var pools []string
	for _, f := range files {
		pools = append(pools, poolFor(f))
	}
	s := testservice.Start(t, testservice.Config{SnapshotEvery: 2, Pools: pools})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	reader := s.Client(testservice.Reader)
	var seed001 *loaded
	for _, f := range files {
		l := loadScenario(t, s, f, poolFor(f))
		if strings.Contains(f, "seed-001-share-ratio-subconsumers") {
			seed001 = l
		}
		t.Run(l.pool, func(t *testing.T) {
			// The forks start from a snapshot, then replay.
			var snapshots int
			if err := s.DB.QueryRow(ctx, `SELECT count(*) FROM snapshots WHERE pool = $1 AND seq < $2`, l.pool, int64(l.seqs[len(l.seqs)-1])).Scan(&snapshots); err != nil || snapshots == 0 {
				t.Fatalf("pool %s has %d snapshots before its last event (%v)", l.pool, snapshots, err)
			}
			hypo := l.changes(t)
			lastBefore := streamLastSeq(t, s)
			allocBefore, err := reader.Allocations(ctx, l.pool)
			if err != nil {
				t.Fatal(err)
			}
			// Now, and in the past: after the first step, by sequence and
			// by time.
			first := l.stepEnd[0]
			for _, c := range []struct {
				name string
				rq   client.WhatIfRequest
				n    int
			}{
				{"now", client.WhatIfRequest{}, len(l.seqs)},
				{"at_seq", client.WhatIfRequest{AtSeq: l.seqs[first]}, first + 1},
				{"at_time", client.WhatIfRequest{AtTime: &l.times[first]}, first + 1},
			} {
				c.rq.Events = hypo
				res, err := reader.WhatIf(ctx, l.pool, c.rq)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				l.check(t, c.name, res, c.n, hypo)
			}
			if got := streamLastSeq(t, s); got != lastBefore {
				t.Errorf("the stream's last sequence moved from %d to %d: a what-if appended", lastBefore, got)
			}
			allocAfter, err := reader.Allocations(ctx, l.pool)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(allocBefore, allocAfter) {
				t.Errorf("the projection changed: %+v, then %+v", allocBefore, allocAfter)
			}
		})
	}
	if seed001 == nil {
		t.Fatal("seed 001 is not among the seeds")
	}
	t.Run("seed 001 moves slots", func(t *testing.T) { whatIfMovesSlots(t, s, seed001) })
	t.Run("identities", func(t *testing.T) { whatIfIdentities(t, s, seed001.pool) })
}

// changes are the hypothetical events asked about a loaded pool: its
// plan with the shares and priorities turned around and a max on the
// first consumer, then every leaf asking for twice what it holds plus 10.
func (l *loaded) changes(t *testing.T) []client.WhatIfEvent {
	t.Helper()
	p := l.reference(t, len(l.seqs))
	plan, ok := p.Plan()
	if !ok {
		t.Fatal("no plan")
	}
	n := int64(len(plan.Consumers))
	for i := range plan.Consumers {
		c := &plan.Consumers[i]
		share := n - int64(i)
		c.Share, c.Priority = &share, int64(i%3)
	}
	plan.Consumers[0].Max = &events.Max{Percent: 50, IsPercent: true}
	d := &events.Demand{Demands: map[string]int64{}}
	for _, c := range p.Consumers() {
		if c.Leaf {
			d.Demands[c.Path] = 2*c.Allocated + 10
		}
	}
	var out []client.WhatIfEvent
	for _, ev := range []events.Payload{&events.PlanChange{Plan: plan}, d} {
		w, err := client.NewWhatIfEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, w)
	}
	return out
}

// check compares an answer with the reference: the first n loaded events
// folded in memory, then the hypothetical ones at the sequences and times
// the answer gives them.
func (l *loaded) check(t *testing.T, name string, res *client.WhatIf, n int, hypo []client.WhatIfEvent) {
	t.Helper()
	p := l.reference(t, n)
	if res.Appended || res.Pool != l.pool || res.At.Seq != l.seqs[n-1] || !res.At.Time.Equal(l.times[n-1]) {
		t.Fatalf("%s: answer for pool %q at %+v appended %v; want pool %s at sequence %d (%s), nothing appended",
			name, res.Pool, res.At, res.Appended, l.pool, l.seqs[n-1], l.times[n-1])
	}
	plan, _ := p.Plan()
	if !reflect.DeepEqual(res.Plan, &plan) {
		t.Errorf("%s: the plan at the fork is %+v, want %+v", name, res.Plan, plan)
	}
	before := figuresOf(p)
	if len(res.Events) != len(hypo) {
		t.Fatalf("%s: %d outcomes for %d events", name, len(res.Events), len(hypo))
	}
	var want []client.Decision
	for i, out := range res.Events {
		if out.Refused != "" {
			t.Fatalf("%s: event %d refused: %s %s", name, i, out.Refused, out.Refusal)
		}
		payload, err := events.DecodePayload(events.Type(hypo[i].Type), hypo[i].Data)
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.Apply(domain.Event{Seq: out.Seq, Time: out.Time, Payload: domain.StampRules(payload)})
		if err != nil {
			t.Fatalf("%s: the reference refuses event %d: %v", name, i, err)
		}
		for _, d := range r.Decisions {
			want = append(want, client.Decision{EventSeq: d.Seq, Ordinal: d.Ordinal, Kind: string(d.Kind), Consumer: d.Consumer,
				FromConsumer: d.From, Host: d.Host, Slots: d.Slots, Rule: string(d.Rule), Deadline: d.Deadline})
		}
	}
	after := figuresOf(p)
	var got []client.Decision
	for _, d := range res.Decisions {
		got = append(got, d.Decision)
		if d.Text == "" || !strings.Contains(d.Text, d.Consumer) {
			t.Errorf("%s: decision %+v is not told in words: %q", name, d.Decision, d.Text)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: decisions\n got %+v\nwant %+v", name, got, want)
	}
	seen := map[string]bool{}
	for _, c := range res.Consumers {
		seen[c.Path] = true
		if !sameFigures(c.Before, before[c.Path]) || !sameFigures(c.After, after[c.Path]) {
			t.Errorf("%s: %s before %+v after %+v; the reference: before %+v after %+v", name, c.Path, c.Before, c.After, before[c.Path], after[c.Path])
		}
	}
	for path := range after {
		if !seen[path] {
			t.Errorf("%s: %s is missing from the answer", name, path)
		}
	}
}

// refFigures are what the reference says of a consumer.
type refFigures struct{ demand, allocated, target, planned, unmet int64 }

// figuresOf reads the reference's figures, each parent's unmet demand the
// sum of its leaves'.
func figuresOf(p *domain.Pool) map[string]refFigures {
	out := map[string]refFigures{}
	for _, c := range p.Consumers() {
		out[c.Path] = refFigures{demand: c.Demand, allocated: c.Allocated, target: c.Target, planned: c.Planned}
	}
	for _, c := range p.Consumers() {
		if !c.Leaf || c.Demand <= c.Allocated {
			continue
		}
		for path := c.Path; path != "/" && path != ""; path = parentPath(path) {
			f := out[path]
			f.unmet += c.Demand - c.Allocated
			out[path] = f
		}
	}
	return out
}

func parentPath(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

func sameFigures(got *client.ConsumerFigures, want refFigures) bool {
	if got == nil {
		return want == refFigures{}
	}
	return refFigures{got.Demand, got.Allocated, got.Target, got.Planned, got.Unmet} == want
}

func streamLastSeq(t *testing.T, s *testservice.Service) uint64 {
	t.Helper()
	seq, err := s.LastSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// whatIfMovesSlots asks seed 001, after its second step (/A holds 20,
// /B/B1 80), what giving /A four times /B's share would do: /A's target
// becomes 80 and 60 slots come back to it from /B/B1. The reader asks
// through the library and through `ledger what-if`.
func whatIfMovesSlots(t *testing.T, s *testservice.Service, l *loaded) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	file := filepath.Join(t.TempDir(), "shares.yaml")
	if err := os.WriteFile(file, []byte(`events:
  - {type: plan, plan: {policy: {reclaim: share_ratio}, consumers: [{path: /A, share: 4}, {path: /B, share: 1}, {path: /B/B1, share: 25}, {path: /B/B2, share: 75}]}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	evs, err := scenario.ParseEventsFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := client.NewWhatIfEvent(evs[0].Payload)
	if err != nil {
		t.Fatal(err)
	}
	second := l.stepEnd[1]
	rq := client.WhatIfRequest{AtSeq: l.seqs[second], Events: []client.WhatIfEvent{ev}}
	res, err := s.Client(testservice.Reader).WhatIf(ctx, l.pool, rq)
	if err != nil {
		t.Fatal(err)
	}
	l.check(t, "shares", res, second+1, rq.Events)
	byPath := map[string]client.ConsumerChange{}
	for _, c := range res.Consumers {
		byPath[c.Path] = c
	}
	a, b1 := byPath["/A"], byPath["/B/B1"]
	if a.Before.Allocated != 20 || a.After.Allocated != 80 || a.After.Target != 80 || b1.Before.Allocated != 80 || b1.After.Allocated != 20 || !a.Changed {
		t.Errorf("/A %+v -> %+v, /B/B1 %+v -> %+v; want /A 20 -> 80 (target 80), /B/B1 80 -> 20", a.Before, a.After, b1.Before, b1.After)
	}
	var reclaimed int64
	for _, d := range res.Decisions {
		if d.Kind == "reclaim" && d.Consumer == "/A" && d.FromConsumer == "/B/B1" {
			reclaimed += d.Slots
		}
	}
	if reclaimed != 60 {
		t.Errorf("decisions %+v: /A reclaims %d slots from /B/B1, want 60", res.Decisions, reclaimed)
	}

	// The command, as a reader runs it.
	cmd := exec.Command(ledgerBinary(t), "what-if", "--pool", l.pool, "--file", file, "--at", fmt.Sprint(l.seqs[second]))
	cmd.Env = append(os.Environ(), "LEDGER_URL="+s.URL, "LEDGER_TOKEN="+s.Token(testservice.Reader))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ledger what-if: %v\n%s", err, out)
	}
	for _, want := range []string{
		fmt.Sprintf("what-if on pool %s at sequence %d", l.pool, l.seqs[second]), "nothing was appended",
		"1. plan at ", "applied as sequence", "/A ", "20 -> 80", "/B/B1 ", "80 -> 20",
		"reclaimed ", "[share_ratio.reclaim]",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("ledger what-if prints no %q:\n%s", want, out)
		}
	}
	t.Logf("ledger what-if:\n%s", out)
}

// whatIfIdentities: a what-if needs the read scope on the pool; the
// producer's token (append) and a pool the reader may not read are
// refused, and the refusals are typed.
func whatIfIdentities(t *testing.T, s *testservice.Service, pool string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := s.Client(testservice.Producer).WhatIf(ctx, pool, client.WhatIfRequest{})
	var e *client.Error
	if !errors.Is(err, client.CodeMissingScope) || !errors.As(err, &e) || e.Status != http.StatusForbidden {
		t.Errorf("a what-if with the producer's token: %v, want 403 missing_scope", err)
	}
	if _, err := s.Client(testservice.Reader).WhatIf(ctx, "another", client.WhatIfRequest{}); !errors.Is(err, client.CodePoolNotAllowed) {
		t.Errorf("a what-if on a pool the reader may not read: %v, want 403 pool_not_allowed", err)
	}
}
