package signing_test

import (
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
