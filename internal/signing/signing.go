package signing

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cluster-ledger/ledger/internal/secretfile"
	"github.com/nats-io/nats.go"
)

// Headers of a signed message.
const (
	HeaderKeyID     = "Ledger-Key-Id"
	HeaderSignature = "Ledger-Signature"
)

// Files of [Init] in its directory.
const (
	PrivateKeyFile  = "ledger.key"
	TrustedKeysFile = "trusted.pub"
)

// Errors; match with errors.Is.
var (
	ErrUnsigned     = errors.New("event not signed")
	ErrUnknownKey   = errors.New("event signed by an untrusted key")
	ErrBadSignature = errors.New("event signature does not match")
	ErrBadKey       = errors.New("signing: bad key file")
)

// context separates these signatures from any other use of the key.
const context = "ledger-event-v1\x00"

func message(subject string, data []byte) []byte {
	m := make([]byte, 0, len(context)+len(subject)+1+len(data))
	m = append(m, context...)
	m = append(m, subject...)
	m = append(m, 0)
	return append(m, data...)
}

// KeyID names a public key: 16 hex digits of the SHA-256 of its PKIX DER.
func KeyID(pub ed25519.PublicKey) string {
	der, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:8])
}

// Signer signs messages with one private key.
type Signer struct {
	id  string
	key ed25519.PrivateKey
}

// ID is the signer's key id.
func (s *Signer) ID() string { return s.id }

// Public is the signer's public key.
func (s *Signer) Public() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// Sign sets the signature headers of m (subject and body as they are
// now: sign last).
func (s *Signer) Sign(m *nats.Msg) {
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	sig := ed25519.Sign(s.key, message(m.Subject, m.Data))
	m.Header.Set(HeaderKeyID, s.id)
	m.Header.Set(HeaderSignature, base64.StdEncoding.EncodeToString(sig))
}

// NewSigner wraps a private key.
func NewSigner(key ed25519.PrivateKey) *Signer {
	return &Signer{id: KeyID(key.Public().(ed25519.PublicKey)), key: key}
}

// Generate makes a new signer with a fresh key (tests, forgers).
func Generate() *Signer {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return NewSigner(key)
}

// LoadSigner reads a PEM PKCS#8 Ed25519 private key, refusing a file
// others may read.
func LoadSigner(path string) (*Signer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %v; chmod 600 it", ErrBadKey, path, st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: %s is not a PEM PRIVATE KEY", ErrBadKey, path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadKey, path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not an Ed25519 key", ErrBadKey, path)
	}
	return NewSigner(key), nil
}

// Init creates dir (0700) with a private key (0600) and a trusted-keys
// file holding its public key, unless the key exists; it returns the
// signer. The trusted-keys file is only created, never rewritten: keys
// an operator added stay.
func Init(dir string) (*Signer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	keyPath := filepath.Join(dir, PrivateKeyFile)
	if _, err := os.Stat(keyPath); err == nil {
		return LoadSigner(keyPath)
	}
	s := Generate()
	der, err := x509.MarshalPKCS8PrivateKey(s.key)
	if err != nil {
		return nil, err
	}
	if err := secretfile.WriteNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err != nil {
		return nil, err
	}
	trusted := filepath.Join(dir, TrustedKeysFile)
	if _, err := os.Stat(trusted); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(trusted, PublicPEM(s.Public()), 0o644); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// PublicPEM encodes a public key as a PEM PUBLIC KEY block.
func PublicPEM(pub ed25519.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(pub)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// Keyring is a set of trusted public keys by id.
type Keyring struct{ keys map[string]ed25519.PublicKey }

// NewKeyring trusts pubs.
func NewKeyring(pubs ...ed25519.PublicKey) *Keyring {
	k := &Keyring{keys: map[string]ed25519.PublicKey{}}
	for _, p := range pubs {
		k.keys[KeyID(p)] = p
	}
	return k
}

// LoadKeyring reads a file of PEM PUBLIC KEY blocks (Ed25519).
func LoadKeyring(path string) (*Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: trusted keys: %w", ErrBadKey, err)
	}
	var pubs []ed25519.PublicKey
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "PUBLIC KEY" {
			continue
		}
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadKey, path, err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("%w: %s holds a key that is not Ed25519", ErrBadKey, path)
		}
		pubs = append(pubs, pub)
	}
	if len(bytes.TrimSpace(data)) != 0 || len(pubs) == 0 {
		return nil, fmt.Errorf("%w: %s must hold PEM PUBLIC KEY blocks only, at least one", ErrBadKey, path)
	}
	return NewKeyring(pubs...), nil
}

// Verify checks the signature headers of a stored message against the
// trusted keys.
func (k *Keyring) Verify(subject string, h nats.Header, data []byte) error {
	id, sig64 := h.Get(HeaderKeyID), h.Get(HeaderSignature)
	if id == "" || sig64 == "" {
		return ErrUnsigned
	}
	pub, ok := k.keys[id]
	if !ok {
		return fmt.Errorf("%w (key id %q)", ErrUnknownKey, id)
	}
	sig, err := base64.StdEncoding.DecodeString(sig64)
	if err != nil || !ed25519.Verify(pub, message(subject, data), sig) {
		return fmt.Errorf("%w (key id %s)", ErrBadSignature, id)
	}
	return nil
}
