package signing_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/cluster-ledger/ledger/internal/signing"
)

func TestSignVerify(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sig")
	s, err := signing.Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dir, signing.PrivateKeyFile)); st.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %v, want 0600", st.Mode().Perm())
	}
	again, err := signing.Init(dir)
	if err != nil || again.ID() != s.ID() {
		t.Fatalf("a second Init changed the key: %v", err)
	}
	ring, err := signing.LoadKeyring(filepath.Join(dir, signing.TrustedKeysFile))
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg("ledger.p.demand")
	m.Data = []byte(`{"type":"demand"}`)
	s.Sign(m)
	if err := ring.Verify(m.Subject, m.Header, m.Data); err != nil {
		t.Fatalf("own signature: %v", err)
	}
	cases := map[string]struct {
		subject string
		h       nats.Header
		data    string
		want    error
	}{
		"unsigned":      {m.Subject, nats.Header{}, string(m.Data), signing.ErrUnsigned},
		"other subject": {"ledger.q.demand", m.Header, string(m.Data), signing.ErrBadSignature},
		"other body":    {m.Subject, m.Header, `{"type":"plan"}`, signing.ErrBadSignature},
	}
	forged := nats.NewMsg(m.Subject)
	forged.Data = m.Data
	signing.Generate().Sign(forged)
	cases["untrusted key"] = struct {
		subject string
		h       nats.Header
		data    string
		want    error
	}{m.Subject, forged.Header, string(m.Data), signing.ErrUnknownKey}
	for name, c := range cases {
		if err := ring.Verify(c.subject, c.h, []byte(c.data)); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	os.Chmod(filepath.Join(dir, signing.PrivateKeyFile), 0o644)
	if _, err := signing.LoadSigner(filepath.Join(dir, signing.PrivateKeyFile)); !errors.Is(err, signing.ErrBadKey) {
		t.Errorf("world-readable key: %v", err)
	}
}

// TestHistoricalKeys: a historical key makes authentic the events up to
// its bound and none after; an unknown key id is looked up in the source
// once; a source that fails is an error, not a refusal.
func TestHistoricalKeys(t *testing.T) {
	old, current := signing.Generate(), signing.Generate()
	signed := func(s *signing.Signer) *nats.Msg {
		m := nats.NewMsg("ledger.p.demand")
		m.Data = []byte(`{"type":"demand"}`)
		s.Sign(m)
		return m
	}
	m := signed(old)
	ring := signing.NewKeyring(current.Public())
	if err := ring.VerifyAt(5, m.Subject, m.Header, m.Data); !errors.Is(err, signing.ErrUnknownKey) {
		t.Fatalf("an old key without history: %v", err)
	}
	asked := 0
	var fail error
	ring = signing.NewKeyring(current.Public())
	ring.UseHistory(func(context.Context) (map[string]signing.Historical, error) {
		asked++
		if fail != nil {
			return nil, fail
		}
		return map[string]signing.Historical{old.ID(): {Key: old.Public(), UpTo: 10}}, nil
	})
	fail = errors.New("NATS away")
	if err := ring.VerifyAt(5, m.Subject, m.Header, m.Data); !errors.Is(err, signing.ErrHistory) {
		t.Fatalf("a failing source: %v, want ErrHistory (not a refusal)", err)
	}
	fail = nil
	if err := ring.VerifyAt(10, m.Subject, m.Header, m.Data); err != nil {
		t.Fatalf("an old key's event within its bound: %v", err)
	}
	if err := ring.VerifyAt(11, m.Subject, m.Header, m.Data); !errors.Is(err, signing.ErrUnknownKey) {
		t.Fatalf("an old key's event after its bound: %v", err)
	}
	forged := signed(signing.Generate())
	for range 3 {
		if err := ring.VerifyAt(3, forged.Subject, forged.Header, forged.Data); !errors.Is(err, signing.ErrUnknownKey) {
			t.Fatalf("a forger's key: %v", err)
		}
	}
	if asked != 3 { // the failure, the old key, the forger's key once
		t.Errorf("the source was asked %d times, want 3", asked)
	}
	tampered := signed(old)
	tampered.Data = []byte(`{"type":"release"}`)
	if err := ring.VerifyAt(2, tampered.Subject, tampered.Header, tampered.Data); !errors.Is(err, signing.ErrBadSignature) {
		t.Errorf("an edited event of the old key: %v", err)
	}
	if err := ring.AddHistory(map[string]signing.Historical{"0000000000000000": {Key: old.Public(), UpTo: 1}}); !errors.Is(err, signing.ErrBadKey) {
		t.Errorf("a historical key under another id: %v", err)
	}
}

// TestSignAll: SignAll over the cores signs every message as Sign does,
// each with its own signature.
func TestSignAll(t *testing.T) {
	s := signing.Generate()
	ring := signing.NewKeyring(s.Public())
	msgs := make([]*nats.Msg, 101)
	for i := range msgs {
		msgs[i] = nats.NewMsg("ledger.p.demand")
		msgs[i].Data = []byte(`{"n":` + string(rune('0'+i%10)) + `}`)
	}
	s.SignAll(msgs)
	for i, m := range msgs {
		if err := ring.Verify(m.Subject, m.Header, m.Data); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		one := nats.NewMsg(m.Subject)
		one.Data = m.Data
		s.Sign(one)
		if one.Header.Get(signing.HeaderSignature) != m.Header.Get(signing.HeaderSignature) {
			t.Fatalf("message %d: SignAll and Sign differ", i)
		}
	}
}

// TestInitCompletesTrustedKeys: an Init stopped between writing the key
// and the trusted-keys file (killed) left a key whose public half no
// file trusted, and every later Init kept it so: nats init said it wrote
// signing/ and the projectors had no trusted keys to load. Init now
// writes the missing file from the key; one that exists is kept as it is
// (decision 498).
func TestInitCompletesTrustedKeys(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sig")
	s, err := signing.Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	trusted := filepath.Join(dir, signing.TrustedKeysFile)
	if err := os.Remove(trusted); err != nil {
		t.Fatal(err)
	}
	again, err := signing.Init(dir)
	if err != nil || again.ID() != s.ID() {
		t.Fatalf("Init after a lost trusted-keys file: %v", err)
	}
	ring, err := signing.LoadKeyring(trusted)
	if err != nil {
		t.Fatalf("the trusted-keys file was not written again: %v", err)
	}
	m := nats.NewMsg("ledger.p.demand")
	m.Data = []byte(`{"type":"demand"}`)
	s.Sign(m)
	if err := ring.Verify(m.Subject, m.Header, m.Data); err != nil {
		t.Fatalf("the key's own signature: %v", err)
	}
	// An operator's file stays as it is.
	other := signing.Generate()
	kept := append(signing.PublicPEM(s.Public()), signing.PublicPEM(other.Public())...)
	if err := os.WriteFile(trusted, kept, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := signing.Init(dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(trusted); string(b) != string(kept) {
		t.Errorf("Init rewrote an existing trusted-keys file")
	}
}
