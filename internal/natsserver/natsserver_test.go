package natsserver

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

func TestRestartKeepsJetStreamMessages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := t.TempDir()

	s, err := Start(ctx, WithStoreDir(store), WithListen("127.0.0.1:0"), WithName("test"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if !strings.HasPrefix(s.URL(), "nats://127.0.0.1:") || strings.HasSuffix(s.URL(), ":4222") {
		t.Fatalf("URL() = %q, want a random port on 127.0.0.1", s.URL())
	}
	nc, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "LEDGER", Subjects: []string{"ledger.>"}, Storage: jetstream.FileStorage,
	}); err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx, "ledger.p1.demand", []byte(`{"n":1}`), jetstream.WithMsgID("e1"))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	s.Shutdown()
	s.Shutdown() // idempotent

	s2, err := Start(ctx, WithStoreDir(store), WithListen("127.0.0.1:-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Shutdown()
	nc2, err := nats.Connect(s2.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	js2, _ := jetstream.New(nc2)
	st, err := js2.Stream(ctx, "LEDGER")
	if err != nil {
		t.Fatalf("stream gone after restart: %v", err)
	}
	msg, err := st.GetMsg(ctx, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Subject != "ledger.p1.demand" || string(msg.Data) != `{"n":1}` {
		t.Fatalf("after restart: %s %s", msg.Subject, msg.Data)
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Start(ctx); !errors.Is(err, ErrNoStoreDir) {
		t.Errorf("no store dir: %v", err)
	}
	if _, err := Start(ctx, WithStoreDir(t.TempDir()), WithListen("nope")); !errors.Is(err, ErrBadListen) {
		t.Errorf("bad listen: %v", err)
	}
	// A taken port: the server cannot listen, so it never becomes ready.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = Start(ctx, WithStoreDir(t.TempDir()), WithListen(l.Addr().String()), WithReadyTimeout(time.Second), WithLogging(true))
	if !errors.Is(err, ErrStart) {
		t.Errorf("port in use: %v", err)
	}
}

func TestStartRefusesBadUsers(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	for name, users := range map[string][]User{
		"a seed, not a public key": {{Nkey: string(seed)}},
		"an account key":           {{Nkey: "A" + pub[1:]}},
		"twice":                    {{Nkey: pub}, {Nkey: pub, MaxConnections: 2}},
		"a negative bound":         {{Nkey: pub, MaxConnections: -1}},
	} {
		s, err := Start(context.Background(), WithStoreDir(t.TempDir()), WithListen("127.0.0.1:-1"), WithUsers(users))
		if err == nil {
			s.Shutdown()
		}
		if !errors.Is(err, ErrBadUsers) {
			t.Errorf("%s: %v, want ErrBadUsers", name, err)
		}
		if err != nil && strings.Contains(err.Error(), string(seed)) {
			t.Errorf("%s: the error shows the seed", name)
		}
	}
}
