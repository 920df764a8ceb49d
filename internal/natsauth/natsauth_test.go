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
	"github.com/cluster-ledger/ledger/projections"
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
		natsserver.WithListen("127.0.0.1:-1"), natsserver.WithUsers(natsauth.Users(keys)))
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
			if err := js.DeleteStream(short(t), stream.Name); err == nil {
				t.Error("delete stream allowed")
			}
			if err := s.Purge(short(t)); err == nil {
				t.Error("purge allowed")
			}
			cfg := stream.Config()
			cfg.DenyDelete, cfg.DenyPurge = false, false
			if _, err := js.UpdateStream(short(t), cfg); err == nil {
				t.Error("update stream allowed")
			}
			cfg.Name = "OTHER"
			cfg.Subjects = []string{"other.>"}
			if _, err := js.CreateStream(short(t), cfg); err == nil {
				t.Error("create stream allowed")
			}
			pctx := ctx
			if r != natsauth.Ledger {
				pctx = short(t)
			}
			_, err = js.Publish(pctx, stream.Subject("p", "demand"), []byte(`{}`), jetstream.WithMsgID("x-"+string(r)))
			// Message 1 exists from here on (the ledger's append).
			if err := s.DeleteMsg(short(t), 1); err == nil {
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
			// Readers read with direct gets (stream.Read) and hold no
			// consumer: creating one, durable or not, is refused.
			var got []uint64
			if err := stream.Read(ctx, js.Conn(), "", 1, 1, func(m stream.Msg) error { got = append(got, m.Seq); return nil }); err != nil || len(got) != 1 {
				t.Errorf("read the log: %v %v", got, err)
			}
			if _, err := js.CreateConsumer(short(t), stream.Name, jetstream.ConsumerConfig{Name: "e-" + string(r), MemoryStorage: true, InactiveThreshold: time.Second}); err == nil {
				t.Error("an ephemeral consumer was created")
			}
			if _, err := js.CreateConsumer(short(t), stream.Name, jetstream.ConsumerConfig{Durable: "d-" + string(r), AckPolicy: jetstream.AckAllPolicy}); err == nil {
				t.Error("a durable consumer was created")
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
	if err := natsauth.WriteServerConfig(&b, keys, natsauth.DefaultLayout); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{keys[natsauth.Admin], keys[natsauth.Auditor], `"ledger.*.*"`, `"$JS.API.STREAM.MSG.GET.LEDGER"`} {
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
	if opts.AuthTimeout != natsserver.DefaultAuthTimeout.Seconds() {
		t.Errorf("authorization timeout %vs, want the embedded server's %v", opts.AuthTimeout, natsserver.DefaultAuthTimeout)
	}
	for _, u := range opts.Nkeys {
		for _, r := range natsauth.Roles {
			if u.Nkey != keys[r] {
				continue
			}
			want := natsauth.Permissions(r, keys[r])
			if want == nil {
				if u.Permissions != nil {
					t.Errorf("%s: rights %+v, want none", r, u.Permissions)
				}
				continue
			}
			if !slices.Equal(u.Permissions.Publish.Allow, want.Publish.Allow) || !slices.Equal(u.Permissions.Subscribe.Allow, want.Subscribe.Allow) {
				t.Errorf("%s rights read back as %v / %v", r, u.Permissions.Publish.Allow, u.Permissions.Subscribe.Allow)
			}
		}
	}
}

// short is the context of a request the server is expected to refuse:
// a refused request gets no answer, only its time-out.
func short(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

// subscribe subscribes nc to subject and reports whether the server
// refused it (a permissions violation, sent asynchronously).
func subscribe(t *testing.T, url, seed, subject string) (refused bool, got <-chan *nats.Msg) {
	t.Helper()
	errs := make(chan error, 4)
	o, err := natsauth.Option(seed)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, o, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ch := make(chan *nats.Msg, 64)
	if _, err := nc.ChanSubscribe(subject, ch); err != nil {
		return true, ch
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		return errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(err.Error(), "Permissions Violation"), ch
	case <-time.After(500 * time.Millisecond):
		return false, ch
	}
}

// TestInboxesArePrivate: each identity but admin receives its replies
// under its own inbox prefix and may subscribe nowhere else: another
// identity's inbox and "_INBOX.>" are refused, and a snooper sees none
// of the replies the ledger gets.
func TestInboxesArePrivate(t *testing.T) {
	url, dir := start(t)
	keys, err := natsauth.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []natsauth.Role{natsauth.Ledger, natsauth.Projector, natsauth.Auditor} {
		seed := natsauth.SeedFile(dir, r)
		for _, subj := range []string{"_INBOX.>", "_INBOX.*.>", ">", natsauth.InboxPrefix(keys[natsauth.Ledger]) + ".>", "ledger.>"} {
			if subj == natsauth.InboxPrefix(keys[r])+".>" {
				continue
			}
			if refused, _ := subscribe(t, url, seed, subj); !refused {
				t.Errorf("%s may subscribe to %s", r, subj)
			}
		}
		if refused, _ := subscribe(t, url, seed, natsauth.InboxPrefix(keys[r])+".>"); refused {
			t.Errorf("%s may not subscribe to its own inbox", r)
		}
	}
	// The auditor tries to read the ledger's replies while the ledger
	// asks the stream for its state: it gets nothing.
	_, snooped := subscribe(t, url, natsauth.SeedFile(dir, natsauth.Auditor), "_INBOX.>")
	js := connect(t, url, dir, natsauth.Ledger)
	for range 5 {
		if _, err := js.Stream(context.Background(), stream.Name); err != nil {
			t.Fatalf("the ledger's own request: %v", err)
		}
	}
	select {
	case m := <-snooped:
		t.Fatalf("the auditor read a reply meant for the ledger on %s", m.Subject)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestConsumerRights: the projector manages the consumers of its layout
// (unpartitioned and partitions) and no other; nobody but admin may use
// the nameless or legacy create subjects; the readers may touch no
// consumer at all, the projector's included.
func TestConsumerRights(t *testing.T) {
	url, dir := start(t)
	ctx := context.Background()
	admin := connect(t, url, dir, natsauth.Admin)
	if _, err := admin.Publish(ctx, stream.Subject("p", "demand"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateConsumer(ctx, stream.Name, jetstream.ConsumerConfig{Durable: "admins", FilterSubject: "ledger.>"}); err != nil {
		t.Fatal(err)
	}
	proj := connect(t, url, dir, natsauth.Projector)
	for _, name := range []string{projections.DefaultName, projections.PartitionName(projections.DefaultName, 3, 4), projections.PartitionName(projections.DefaultName, 15, 16)} {
		c, err := proj.CreateConsumer(ctx, stream.Name, jetstream.ConsumerConfig{Durable: name, FilterSubject: "ledger.>", AckPolicy: jetstream.AckAllPolicy})
		if err != nil {
			t.Fatalf("projector creates %s: %v", name, err)
		}
		b, err := c.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Errorf("%s ack: %v", name, err)
			}
		}
		if _, err := c.Info(ctx); err != nil {
			t.Errorf("%s info: %v", name, err)
		}
		s, _ := proj.Stream(ctx, stream.Name)
		if _, err := s.ResetConsumerToSequence(ctx, name, 1); err != nil && !strings.Contains(err.Error(), "priority") {
			t.Errorf("%s reset: %v", name, err)
		}
		if err := proj.DeleteConsumer(ctx, stream.Name, name); err != nil {
			t.Errorf("%s delete: %v", name, err)
		}
	}
	// A partition's consumer filtered to its own subjects (several: the
	// create subject that names the consumer without a filter).
	own := []string{stream.PartitionFilter(1), stream.PartitionFilter(5)}
	name := projections.PartitionName(projections.DefaultName, 1, 4)
	if _, err := proj.CreateConsumer(ctx, stream.Name, jetstream.ConsumerConfig{Durable: name, FilterSubjects: own, AckPolicy: jetstream.AckAllPolicy}); err != nil {
		t.Fatalf("projector creates %s on its subjects: %v", name, err)
	}
	if err := proj.DeleteConsumer(ctx, stream.Name, name); err != nil {
		t.Errorf("%s delete: %v", name, err)
	}
	for _, name := range []string{"other", projections.PartitionName(projections.DefaultName, 0, 17), "projector-x"} {
		if _, err := proj.CreateConsumer(short(t), stream.Name, jetstream.ConsumerConfig{Durable: name, FilterSubject: "ledger.>"}); err == nil {
			t.Errorf("the projector created %s", name)
		}
		if _, err := proj.CreateConsumer(short(t), stream.Name, jetstream.ConsumerConfig{Durable: name, FilterSubjects: own}); err == nil {
			t.Errorf("the projector created %s on several subjects", name)
		}
	}
	if _, err := proj.Consumer(short(t), stream.Name, "admins"); err == nil {
		t.Error("the projector read another consumer's state")
	}
	if err := proj.DeleteConsumer(short(t), stream.Name, "admins"); err == nil {
		t.Error("the projector deleted another consumer")
	}
	// The nameless and legacy create subjects, by hand.
	nc := proj.Conn()
	for _, subj := range []string{"$JS.API.CONSUMER.CREATE.LEDGER", "$JS.API.CONSUMER.DURABLE.CREATE.LEDGER.projector"} {
		if _, err := nc.Request(subj, []byte(`{"stream_name":"LEDGER","config":{"durable_name":"projector","ack_policy":"none"}}`), 500*time.Millisecond); err == nil {
			t.Errorf("the projector used %s", subj)
		}
	}
	for _, r := range []natsauth.Role{natsauth.Ledger, natsauth.Auditor} {
		js := connect(t, url, dir, r)
		if _, err := js.CreateConsumer(short(t), stream.Name, jetstream.ConsumerConfig{Name: projections.DefaultName, FilterSubject: "ledger.>"}); err == nil {
			t.Errorf("%s created the projector's consumer", r)
		}
		if _, err := js.Consumer(short(t), stream.Name, "admins"); err == nil {
			t.Errorf("%s read a consumer's state", r)
		}
	}
	s, err := admin.Stream(ctx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Consumers; n != 1 {
		t.Errorf("%d consumers left, want admin's 1", n)
	}
}

// TestLayout: the consumer names the projector may manage are those the
// projector uses (projections.PartitionName), and a layout is checked.
func TestLayout(t *testing.T) {
	names := natsauth.Layout{Name: "p", MaxPartitions: 3}.Consumers()
	want := []string{"p"}
	for n := 1; n <= 3; n++ {
		for k := range n {
			want = append(want, projections.PartitionName("p", k, n))
		}
	}
	if !slices.Equal(names, want) {
		t.Errorf("names %v, want %v", names, want)
	}
	for _, l := range []natsauth.Layout{{Name: "", MaxPartitions: 1}, {Name: "a.b", MaxPartitions: 1}, {Name: "a*", MaxPartitions: 1}, {Name: "a", MaxPartitions: 257}} {
		if err := l.Validate(); !errors.Is(err, natsauth.ErrBadLayout) {
			t.Errorf("%+v: %v, want ErrBadLayout", l, err)
		}
	}
	if err := natsauth.DefaultLayout.Validate(); err != nil {
		t.Error(err)
	}
}
