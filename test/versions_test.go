package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testenv"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections/query"
)

// TestRulesVersionsEndToEnd runs the same events in two pools, one under
// rules version 1 and one under version 2, through the real stream and a
// projector process: each pool gets its version's decisions; the
// projector, SIGKILLed and restarted, re-folds both from their snapshots
// without stopping; audit verify passes for both; the API refuses a plan
// naming an unknown version, and the same plan written straight into the
// stream stops the projector with a message naming its sequence.
func TestRulesVersionsEndToEnd(t *testing.T) {
	s := newStack(t)
	sc, err := scenario.ParseFile("scenarios/versions/v1-host-down-releases-before-loss.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []int{1, 2} {
		publishUnderRules(t, s.js, sc, fmt.Sprintf("rules%d", v), v)
	}
	bin := projectorBinary(t)
	proc := startProjector(t, bin, s)
	waitOffsetAbove(t, s.db, testenv.StreamLast(t, s.js)-1)

	wantDecisions := map[string]string{
		"rules1": "release /A 4 release.max_lowered; trim /A 2 trim.host_down; grant /A 2 priority.entitled",
		"rules2": "trim /A 2 trim.host_down; release /A 2 release.max_lowered",
	}
	for pool, want := range wantDecisions {
		if got := hostDownDecisions(t, s, pool); got != want {
			t.Errorf("%s: host_down decided %q, want %q", pool, got, want)
		}
		var rules, since int64
		if err := s.db.QueryRow(context.Background(), `SELECT rules, rules_since FROM checkpoints WHERE pool = $1`, pool).Scan(&rules, &since); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("rules%d", rules) != pool || since == 0 {
			t.Errorf("%s: checkpoint says rules %d since %d", pool, rules, since)
		}
	}

	// Killed and restarted, the projector rebuilds both pools from their
	// snapshots (every 2 events) and checks their chains, then carries on.
	_ = proc.Process.Signal(syscall.SIGKILL)
	_ = proc.Wait()
	more := map[string]uint64{}
	for _, v := range []int{1, 2} {
		pool := fmt.Sprintf("rules%d", v)
		more[pool] = publishRaw(t, s.js, pool, fmt.Sprintf("more-%d", v), &events.Demand{Demands: map[string]int64{"/B": 3}})
	}
	proc = startProjector(t, bin, s)
	waitOffsetAbove(t, s.db, testenv.StreamLast(t, s.js)-1)
	// Still running, neither pool halted, and both folded on past the
	// restart (a pool whose re-fold failed would be halted, not stopped).
	if err := proc.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("projector stopped after the restart: %v", err)
	}
	if halted, err := query.HaltedPools(context.Background(), s.db, 10); err != nil || len(halted) != 0 {
		t.Fatalf("halted pools after the restart: %+v (%v)", halted, err)
	}
	for pool, seq := range more {
		if cp, err := query.CheckpointOf(context.Background(), s.db, pool); err != nil || cp.LastSeq != seq {
			t.Fatalf("%s after the restart: checkpoint %+v (%v), want it at the new event %d", pool, cp, err, seq)
		}
	}
	rep, err := audit.Verify(context.Background(), s.js, s.db, nil, 1, "", nil)
	if err != nil {
		t.Fatalf("audit verify: %v", err)
	}
	if rep.Pools != 2 {
		t.Fatalf("verified %d pools, want 2", rep.Pools)
	}

	// The API refuses a plan naming a version it does not implement.
	token, tokens := testenv.AdminToken(t)
	srv, err := api.New(context.Background(), s.js, s.db, api.WithTokens(tokens))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(testenv.Authorized(srv, token))
	defer hs.Close()
	body := `{"type":"plan","data":{"plan":{"rules":99,"consumers":[{"path":"/A"}]}}}`
	resp, err := http.Post(hs.URL+"/v1/pools/rules2/events", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var answer client.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || answer.Reason != "unknown_rules_version" || !strings.Contains(answer.Error, "99") {
		t.Fatalf("plan with rules 99: %d %+v", resp.StatusCode, answer)
	}

	// Written straight into the stream (as a newer ledger would), it halts
	// that pool in the projector, naming the sequence and the version; the
	// other pools go on.
	seq := publishRaw(t, s.js, "rules2", "from-the-future", &events.PlanChange{Plan: events.Plan{Rules: 99, Consumers: []events.Consumer{{Path: "/A"}}}})
	other := publishRaw(t, s.js, "rules1", "after-the-future", &events.Demand{Demands: map[string]int64{"/B": 1}})
	waitHalted(t, s.db, "rules2", seq, "rules version 99")
	waitOffsetAbove(t, s.db, other-1)
	if cp, err := query.CheckpointOf(context.Background(), s.db, "rules1"); err != nil || cp.LastSeq != other {
		t.Fatalf("rules1 after rules2 halted: checkpoint %+v (%v), want it at %d", cp, err, other)
	}
	if err := proc.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the projector stopped over one pool's plan of rules 99: %v", err)
	}

	// `ledger replay` meets it too, and stops naming it.
	replay := exec.Command(ledgerBinary(t), "replay", "--from", "1", "--pool", "rules2", "--nats-url", s.natsURL,
		"--nats-creds", testenv.Creds(t, s.natsURL, natsauth.Auditor))
	out, err := replay.CombinedOutput()
	if err == nil {
		t.Fatalf("ledger replay went past a plan with rules 99:\n%s", out)
	}
	if msg := string(out); !strings.Contains(msg, fmt.Sprintf("sequence %d", seq)) || !strings.Contains(msg, "rules version 99") {
		t.Fatalf("ledger replay stopped without naming sequence %d and version 99:\n%s", seq, msg)
	}
}

func publishUnderRules(t *testing.T, js jetstream.JetStream, sc *scenario.Scenario, pool string, v int) {
	t.Helper()
	tl := scenario.NewTimeline()
	evs := sc.Events()
	for i, ev := range evs {
		p := ev.Payload
		if pc, ok := p.(*events.PlanChange); ok {
			stamped := *pc
			stamped.Plan.Rules = v
			p = &stamped
		}
		env, err := events.New(fmt.Sprintf("%s-%d", pool, i), pool, "test", tl.At(ev.Time), p)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(env)
		if _, err := js.Publish(context.Background(), stream.Subject(pool, env.Type), data, jetstream.WithMsgID(env.ID)); err != nil {
			t.Fatal(err)
		}
	}
}

func publishRaw(t *testing.T, js jetstream.JetStream, pool, id string, p events.Payload) uint64 {
	t.Helper()
	env, err := events.New(id, pool, "test", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), p)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(env)
	ack, err := js.Publish(context.Background(), stream.Subject(pool, env.Type), data, jetstream.WithMsgID(id))
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

func hostDownDecisions(t *testing.T, s *stack, pool string) string {
	t.Helper()
	rows, err := s.db.Query(context.Background(), `SELECT d.kind, d.consumer, d.slots, d.rule FROM decisions d
		JOIN events e ON e.pool = d.pool AND e.seq = d.event_seq
		WHERE d.pool = $1 AND e.type = 'host_down' ORDER BY d.event_seq, d.ordinal`, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var kind, consumer, rule string
		var slots int64
		if err := rows.Scan(&kind, &consumer, &slots, &rule); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s %d %s", kind, consumer, slots, rule))
	}
	return strings.Join(out, "; ")
}

func projectorBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "projector")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/projector").CombinedOutput(); err != nil {
		t.Fatalf("build projector: %v\n%s", err, out)
	}
	return bin
}

// startProjector starts the projector process with a snapshot every two
// events; it is killed at the end of the test.
func startProjector(t *testing.T, bin string, s *stack) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "--nats-url", s.natsURL, "--nats-creds", testenv.Creds(t, s.natsURL, natsauth.Projector), "--database-url", s.db.Config().ConnString(), "--snapshot-every", "2")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			os.Stderr.Write(stderr.Bytes())
		}
	})
	return cmd
}

// TestNewerEventTypeStopsReaders: an event a newer ledger wrote (here a
// type this build does not know, in an envelope of a later schema
// version, as events.Kind says a new type comes) halts its pool in the
// projector (the other pools go on) and stops `ledger replay`, each
// naming its sequence and type, instead of being recorded as refused
// (which the newer build would not do).
func TestNewerEventTypeStopsReaders(t *testing.T) {
	s := newStack(t)
	publishRaw(t, s.js, "newer", "plan-1", &events.PlanChange{Plan: events.Plan{Rules: 3, Consumers: []events.Consumer{{Path: "/A"}}}})
	env := events.Envelope{ID: "drain-1", Type: "drain", V: events.Version + 1, Pool: "newer",
		Time: time.Date(2026, 2, 1, 0, 0, 1, 0, time.UTC), Data: json.RawMessage(`{"host":"h1"}`)}
	data, _ := json.Marshal(env)
	ack, err := s.js.Publish(context.Background(), stream.Subject("newer", env.Type), data, jetstream.WithMsgID(env.ID))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("sequence %d", ack.Sequence), `"drain"`, "newer ledger"}

	other := publishRaw(t, s.js, "older", "plan-older", &events.PlanChange{Plan: events.Plan{Rules: 3, Consumers: []events.Consumer{{Path: "/A"}}}})
	proc := startProjector(t, projectorBinary(t), s)
	waitHalted(t, s.db, "newer", ack.Sequence, `"drain"`)
	waitOffsetAbove(t, s.db, other-1)
	if err := proc.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the projector stopped over one pool's newer event: %v", err)
	}
	var refused int
	if err := s.db.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE refused IS NOT NULL`).Scan(&refused); err != nil || refused != 0 {
		t.Fatalf("%d events recorded as refused (%v), want none", refused, err)
	}

	out, err := exec.Command(ledgerBinary(t), "replay", "--from", "1", "--pool", "newer", "--nats-url", s.natsURL,
		"--nats-creds", testenv.Creds(t, s.natsURL, natsauth.Auditor)).CombinedOutput()
	if err == nil {
		t.Fatalf("ledger replay went past an event of envelope version %d:\n%s", env.V, out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Fatalf("ledger replay stopped without naming %s:\n%s", w, out)
		}
	}
}

// waitHalted waits until pool is halted at seq with a reason naming want.
func waitHalted(t *testing.T, db *pgxpool.Pool, pool string, seq uint64, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var at int64
		var reason string
		err := db.QueryRow(context.Background(), `SELECT seq, reason FROM halted_pools WHERE pool = $1`, pool).Scan(&at, &reason)
		if err == nil {
			if uint64(at) != seq || !strings.Contains(reason, fmt.Sprintf("sequence %d", seq)) || !strings.Contains(reason, want) {
				t.Fatalf("pool %s halted at %d: %q; want sequence %d and %s", pool, at, reason, seq, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s not halted (%v)", pool, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
