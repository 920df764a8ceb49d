package natsauth_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/natsserver"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// start runs a server with the roles of dir and the LEDGER stream
// created by admin.
func start(t *testing.T) (url, dir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "auth")
	keys, err := natsauth.Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := natsserver.Start(context.Background(), natsserver.WithStoreDir(t.TempDir()),
		natsserver.WithListen("127.0.0.1:-1"), natsserver.WithNkeyUsers(natsauth.Users(keys)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	js := connect(t, s.URL(), dir, natsauth.Admin)
	if _, err := stream.Ensure(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	return s.URL(), dir
}

func connect(t *testing.T, url, dir string, r natsauth.Role) jetstream.JetStream {
	t.Helper()
	nc, err := natsauth.Connect(url, natsauth.SeedFile(dir, r))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestInitFilesArePrivateAndStable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	k1, err := natsauth.Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(dir)
	if st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", st.Mode().Perm())
	}
	for _, r := range natsauth.Roles {
		st, err := os.Stat(natsauth.SeedFile(dir, r))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s seed: %v %v, want mode 0600", r, st.Mode(), err)
		}
	}
	k2, err := natsauth.Init(dir)
	if err != nil || k2[natsauth.Ledger] != k1[natsauth.Ledger] {
		t.Errorf("a second Init changed the keys (%v)", err)
	}
	os.Chmod(natsauth.SeedFile(dir, natsauth.Ledger), 0o644)
	if _, err := natsauth.Option(natsauth.SeedFile(dir, natsauth.Ledger)); !errors.Is(err, natsauth.ErrUnsafe) {
		t.Errorf("a world-readable seed: %v, want ErrUnsafe", err)
	}
}

func TestAnonymousRefused(t *testing.T) {
	url, _ := start(t)
	_, err := natsauth.Connect(url, "")
	if err == nil || !errors.Is(err, nats.ErrAuthorization) || !strings.Contains(err.Error(), "LEDGER_NATS_CREDS") {
		t.Fatalf("anonymous connection: %v, want an authorization error naming LEDGER_NATS_CREDS", err)
	}
}

// TestLeastPrivilege re-runs the attacks of issue 9 with each identity
// but admin: none may delete, purge or reconfigure the stream or delete
// a message of it, and only the ledger may append.
func TestLeastPrivilege(t *testing.T) {
	url, dir := start(t)
	ctx := context.Background()
	for _, r := range []natsauth.Role{natsauth.Ledger, natsauth.Projector, natsauth.Auditor} {
		t.Run(string(r), func(t *testing.T) {
			js := connect(t, url, dir, r)
			s, err := js.Stream(ctx, stream.Name)
			if err != nil {
				t.Fatalf("stream info: %v", err)
			}
			if err := js.DeleteStream(ctx, stream.Name); err == nil {
				t.Error("delete stream allowed")
			}
			if err := s.Purge(ctx); err == nil {
				t.Error("purge allowed")
			}
			cfg := stream.Config()
			cfg.DenyDelete, cfg.DenyPurge = false, false
			if _, err := js.UpdateStream(ctx, cfg); err == nil {
				t.Error("update stream allowed")
			}
			cfg.Name = "OTHER"
			cfg.Subjects = []string{"other.>"}
			if _, err := js.CreateStream(ctx, cfg); err == nil {
				t.Error("create stream allowed")
			}
			_, err = js.Publish(ctx, stream.Subject("p", "demand"), []byte(`{}`), jetstream.WithMsgID("x-"+string(r)))
			// Message 1 exists from here on (the ledger's append).
			if err := s.DeleteMsg(ctx, 1); err == nil {
				t.Error("message delete allowed")
			}
			if r == natsauth.Ledger {
				if err != nil {
					t.Errorf("the ledger cannot append: %v", err)
				}
				if _, err := s.GetMsg(ctx, 1); err != nil {
					t.Errorf("the ledger cannot read back: %v", err)
				}
				return
			}
			if err == nil {
				t.Error("a reader appended to the log")
			}
			// Readers read with consumers (ordered, as audits do; durable,
			// as the projector does) and acknowledge.
			oc, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
			if err != nil {
				t.Fatalf("ordered consumer: %v", err)
			}
			if _, err := oc.Info(ctx); err != nil {
				t.Errorf("consumer info: %v", err)
			}
			dc, err := js.CreateConsumer(ctx, stream.Name, jetstream.ConsumerConfig{Durable: "d-" + string(r), AckPolicy: jetstream.AckAllPolicy})
			if err != nil {
				t.Fatalf("durable consumer: %v", err)
			}
			b, err := dc.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for m := range b.Messages() {
				n++
				if err := m.DoubleAck(ctx); err != nil {
					t.Errorf("ack: %v", err)
				}
			}
			if n != 1 {
				t.Errorf("read %d messages, want the ledger's 1", n)
			}
		})
	}
	info, err := connect(t, url, dir, natsauth.Admin).Stream(ctx, stream.Name)
	if err != nil {
		t.Fatalf("the stream is gone: %v", err)
	}
	if got := info.CachedInfo().State.Msgs; got != 1 {
		t.Errorf("stream holds %d messages, want 1 (the ledger's)", got)
	}
}

func TestServerConfig(t *testing.T) {
	keys, err := natsauth.Init(filepath.Join(t.TempDir(), "a"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := natsauth.WriteServerConfig(&b, keys); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{keys[natsauth.Admin], keys[natsauth.Auditor], `"ledger.>"`, `"$JS.API.STREAM.MSG.GET.LEDGER"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("config lacks %s:\n%s", want, b.String())
		}
	}
	// nats-server itself reads it back with the same rights.
	path := filepath.Join(t.TempDir(), "auth.conf")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server rejects the config: %v\n%s", err, b.String())
	}
	if len(opts.Nkeys) != len(natsauth.Roles) {
		t.Fatalf("%d users, want %d", len(opts.Nkeys), len(natsauth.Roles))
	}
	for _, u := range opts.Nkeys {
		if u.Nkey == keys[natsauth.Projector] && !slices.Equal(u.Permissions.Publish.Allow, natsauth.Permissions(natsauth.Projector).Publish.Allow) {
			t.Errorf("projector rights read back as %v", u.Permissions.Publish.Allow)
		}
	}
}
