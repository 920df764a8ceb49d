package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/projections"
)

// TestDevNATSIdentityAttacks runs the NATS attacks of issue 21 against
// `ledger dev`, each with the seed an attacker would hold (the auditor's,
// printed for read-only use; the ledger's for some), never admin: update
// the projector's durable (headers only), delete it, pull from it, create
// durables and ephemeral consumers (any number), take a name the projector
// would use before it starts, subscribe to "_INBOX.>" or another
// identity's inbox. Every one is refused, and afterwards the projector
// projects every new event, the only consumer on the stream is still its
// own as it was, and backup, replay and audit verify work with the
// auditor's identity.
func TestDevNATSIdentityAttacks(t *testing.T) {
	bin := ledgerBinary(t)
	data := testenv.DataDir(t)
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	dev := startDev(t, bin, data, httpAddr, natsAddr)
	defer dev.stop(t)
	base := "http://" + httpAddr
	natsURL := "nats://" + natsAddr
	tok, err := os.ReadFile(filepath.Join(data, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	devToken = strings.TrimSpace(string(tok))
	seed := func(r natsauth.Role) string { return natsauth.SeedFile(filepath.Join(data, "nats-auth"), r) }
	for _, ev := range []string{
		`{"id":"p1","type":"plan","data":{"plan":{"consumers":[{"path":"/A"},{"path":"/B"}]}}}`,
		`{"id":"h1","type":"host_up","data":{"host":"h1","slots":10}}`,
		`{"id":"d1","type":"demand","data":{"demands":{"/A":4}}}`,
	} {
		if code, body := post(t, base+"/v1/pools/demo/events", ev); code != 200 {
			t.Fatalf("append: %d %s", code, body)
		}
	}
	waitAllocations(t, base, "demo", 3)

	ctx := context.Background()
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	admin := connectAs(t, natsURL, seed(natsauth.Admin), nil)
	before, err := admin.Consumer(ctx, stream.Name, projections.DefaultName)
	if err != nil {
		t.Fatalf("the projector's durable: %v", err)
	}
	for _, r := range []natsauth.Role{natsauth.Auditor, natsauth.Ledger} {
		js := connectAs(t, natsURL, seed(r), nil)
		cfg := before.CachedInfo().Config
		cfg.HeadersOnly = true
		if _, err := js.UpdateConsumer(short(), stream.Name, cfg); err == nil {
			t.Errorf("%s made the projector's durable headers-only", r)
		}
		if err := js.DeleteConsumer(short(), stream.Name, projections.DefaultName); err == nil {
			t.Errorf("%s deleted the projector's durable", r)
		}
		// The ledger reads the state of the projector's durables (info only,
		// for /v1/status's live instance); the auditor may not.
		if _, err := js.Consumer(short(), stream.Name, projections.DefaultName); (err == nil) != (r == natsauth.Ledger) {
			t.Errorf("%s: the projector's durable's info: %v", r, err)
		}
		// Pulling from it by hand (stealing its messages).
		if _, err := js.Conn().Request("$JS.API.CONSUMER.MSG.NEXT.LEDGER."+projections.DefaultName, []byte(`{"batch":1}`), 500*time.Millisecond); err == nil {
			t.Errorf("%s pulled from the projector's durable", r)
		}
		if _, err := js.CreateConsumer(short(), stream.Name, jetstream.ConsumerConfig{Durable: "evil-" + string(r), FilterSubject: "ledger.>"}); err == nil {
			t.Errorf("%s created a durable", r)
		}
		// Squatting: the name a projector with --partitions 2 will use.
		if _, err := js.CreateConsumer(short(), stream.Name, jetstream.ConsumerConfig{Durable: projections.PartitionName(projections.DefaultName, 0, 2), FilterSubject: "ledger.>"}); err == nil {
			t.Errorf("%s took a partition's name before its projector started", r)
		}
		// Many ephemeral consumers (the server's limit is 1,000): the
		// bound for a reader is none.
		created := 0
		for i := range 25 {
			if _, err := js.CreateConsumer(short(), stream.Name, jetstream.ConsumerConfig{Name: fmt.Sprintf("r%d", i), MemoryStorage: true}); err == nil {
				created++
			}
		}
		if created > 0 {
			t.Errorf("%s created %d consumers", r, created)
		}
		// Inboxes.
		keys, err := natsauth.Load(filepath.Join(data, "nats-auth"))
		if err != nil {
			t.Fatal(err)
		}
		other := natsauth.Projector
		for _, subj := range []string{"_INBOX.>", natsauth.InboxPrefix(keys[other]) + ".>", "_INBOX.*.>"} {
			if !subscribeRefused(t, natsURL, seed(r), subj) {
				t.Errorf("%s subscribed to %s", r, subj)
			}
		}
	}

	// The projector is unharmed: its durable as it was, the only
	// consumer, and new events projected.
	after, err := admin.Consumer(ctx, stream.Name, projections.DefaultName)
	if err != nil {
		t.Fatalf("the projector's durable after the attacks: %v", err)
	}
	if c := after.CachedInfo().Config; c.HeadersOnly || c.FilterSubject != before.CachedInfo().Config.FilterSubject {
		t.Errorf("the projector's durable changed: %+v", c)
	}
	for i, ev := range []string{
		`{"id":"d2","type":"demand","data":{"demands":{"/A":6,"/B":4}}}`,
		`{"id":"r1","type":"release","data":{"consumer":"/A","slots":1}}`,
	} {
		if code, body := post(t, base+"/v1/pools/demo/events", ev); code != 200 {
			t.Fatalf("append %d after the attacks: %d %s", i, code, body)
		}
	}
	alloc := waitAllocations(t, base, "demo", 5)
	if !strings.Contains(alloc, `"path":"/A","leaf":true,"demand":5,`) || !strings.Contains(alloc, `"path":"/B","leaf":true,"demand":4,`) {
		t.Fatalf("allocations after the attacks: %s", alloc)
	}
	// Explain (the API reads the pool's log as the ledger) leaves nothing.
	for range 20 {
		if body := get(t, base+"/v1/pools/demo/decisions/3/0/explain"); !strings.Contains(body, `"decision":"/A was granted 4 slots`) {
			t.Fatalf("explain: %s", body)
		}
	}
	if n := consumerCount(t, admin); n != 1 {
		t.Errorf("%d consumers on the stream, want the projector's 1", n)
	}

	// The auditor's tools work with the auditor's identity.
	env := append(os.Environ(), "NATS_URL="+natsURL, "NATS_CREDS="+seed(natsauth.Auditor), "LEDGER_NATS_CREDS="+seed(natsauth.Auditor),
		"LEDGER_TRUSTED_KEYS="+filepath.Join(data, "signing", "trusted.pub"))
	for _, args := range [][]string{
		{"backup", "--out", filepath.Join(t.TempDir(), "backup.jsonl")},
		{"replay", "--from", "1", "--pool", "demo"},
		{"audit", "verify", "--pool", "demo"},
		{"explain", "--pool", "demo", "--consumer", "/B"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(env, dev.dbEnv()...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("ledger %s as the auditor: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if n := consumerCount(t, admin); n != 1 {
		t.Errorf("%d consumers on the stream after the auditor's tools, want 1", n)
	}
}

// dbEnv is the PostgreSQL address dev printed, under whichever name.
func (p *devProcess) dbEnv() []string {
	var env []string
	for k, v := range p.env {
		if strings.Contains(k, "DATABASE_URL") {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func connectAs(t *testing.T, url, seed string, errs chan<- error) jetstream.JetStream {
	t.Helper()
	// The refusals are the point: collected when asked for, not logged.
	opts := []nats.Option{nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errs != nil {
			select {
			case errs <- err:
			default:
			}
		}
	})}
	nc, err := natsauth.Connect(url, seed, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// subscribeRefused reports whether the server refuses the identity of
// seed a subscription to subject.
func subscribeRefused(t *testing.T, url, seed, subject string) bool {
	t.Helper()
	errs := make(chan error, 4)
	nc := connectAs(t, url, seed, errs).Conn()
	if _, err := nc.SubscribeSync(subject); err != nil {
		return true
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		return errors.Is(err, nats.ErrPermissionViolation)
	case <-time.After(time.Second):
		return false
	}
}

func consumerCount(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	s, err := js.Stream(context.Background(), stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.Consumers
}
