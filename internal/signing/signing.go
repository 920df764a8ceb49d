package signing

import (
	"bytes"
	"context"
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
	"runtime"
	"sync"
	"time"

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

// separator separates these signatures from any other use of the key.
const separator = "ledger-event-v1\x00"

func message(subject string, data []byte) []byte {
	m := make([]byte, 0, len(separator)+len(subject)+1+len(data))
	m = append(m, separator...)
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

// SignAll signs every message of msgs, over the cores (an Ed25519
// signature costs tens of microseconds; an array append holds up to a
// thousand events).
func (s *Signer) SignAll(msgs []*nats.Msg) {
	workers := min(runtime.GOMAXPROCS(0), len(msgs))
	if workers <= 1 {
		for _, m := range msgs {
			s.Sign(m)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(msgs); i += workers {
				s.Sign(msgs[i])
			}
		})
	}
	wg.Wait()
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
// an operator added stay. A key without a trusted-keys file (an Init
// stopped between the two writes) gets one holding its public key
// (decision 498).
func Init(dir string) (*Signer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	keyPath := filepath.Join(dir, PrivateKeyFile)
	var s *Signer
	if _, err := os.Stat(keyPath); err == nil {
		if s, err = LoadSigner(keyPath); err != nil {
			return nil, err
		}
	} else {
		s = Generate()
		der, err := x509.MarshalPKCS8PrivateKey(s.key)
		if err != nil {
			return nil, err
		}
		if err := secretfile.WriteNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err != nil {
			return nil, err
		}
	}
	trusted := filepath.Join(dir, TrustedKeysFile)
	if _, err := os.Lstat(trusted); errors.Is(err, os.ErrNotExist) {
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

// Keyring is a set of trusted public keys by id, and the historical keys
// of a restored log (see Historical), trusted for the events up to their
// bound only. Safe for concurrent use.
type Keyring struct {
	keys map[string]ed25519.PublicKey

	mu      sync.Mutex
	history map[string]Historical // by key id
	source  HistorySource         // where history is (re)read; nil: none
	asked   map[string]bool       // key ids the source was asked for and lacked
}

// Historical is a public key of the deployment a restored log comes from
// (its backup named it): it makes authentic the events stored at
// sequences up to UpTo, the last of the backup, and none after, so a key
// of the old deployment cannot sign anything new.
type Historical struct {
	Key  ed25519.PublicKey
	UpTo uint64
}

// HistorySource returns the historical keys by key id (the LEDGER
// stream's metadata holds them after a restore: stream.History).
type HistorySource func(ctx context.Context) (map[string]Historical, error)

// maxAsked bounds the key ids a Keyring asks its source about: a log of
// forged events signed by ever new ids costs a bounded number of reads.
const maxAsked = 1024

// NewKeyring trusts pubs.
func NewKeyring(pubs ...ed25519.PublicKey) *Keyring {
	k := &Keyring{keys: map[string]ed25519.PublicKey{}, history: map[string]Historical{}, asked: map[string]bool{}}
	for _, p := range pubs {
		k.keys[KeyID(p)] = p
	}
	return k
}

// Public is the trusted keys by id (the historical keys not included).
func (k *Keyring) Public() map[string]ed25519.PublicKey {
	out := make(map[string]ed25519.PublicKey, len(k.keys))
	for id, p := range k.keys {
		out[id] = p
	}
	return out
}

// UseHistory makes k read its historical keys from source, unless it has
// one already (the API and the projector of one process share a
// keyring: the first to come sets it). The source is asked when an event
// names a key id k does not know, once per id: a restore records the
// keys before it stores any event they signed, so an id unknown when
// first asked stays unknown. A nil k ignores it.
func (k *Keyring) UseHistory(source HistorySource) {
	if k == nil || source == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.source == nil {
		k.source = source
	}
}

// AddHistory trusts historical keys (by key id) as UseHistory's source
// would; a key whose id is not its own is refused.
func (k *Keyring) AddHistory(h map[string]Historical) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.addHistory(h)
}

func (k *Keyring) addHistory(h map[string]Historical) error {
	for id, hk := range h {
		if KeyID(hk.Key) != id {
			return fmt.Errorf("%w: historical key named %s has id %s", ErrBadKey, id, KeyID(hk.Key))
		}
		if old, ok := k.history[id]; !ok || old.UpTo < hk.UpTo {
			k.history[id] = hk
		}
	}
	return nil
}

// History is the historical keys k knows now, by key id.
func (k *Keyring) History() map[string]Historical {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]Historical, len(k.history))
	for id, h := range k.history {
		out[id] = h
	}
	return out
}

// historical returns the historical key id names, asking the source the
// first time the id is unknown.
func (k *Keyring) historical(id string) (Historical, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if h, ok := k.history[id]; ok {
		return h, true, nil
	}
	if k.source == nil || k.asked[id] || len(k.asked) >= maxAsked {
		return Historical{}, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), historyTimeout)
	defer cancel()
	h, err := k.source(ctx)
	if err != nil {
		// Not remembered as asked: the next event asks again.
		return Historical{}, false, fmt.Errorf("%w: %w", ErrHistory, err)
	}
	k.asked[id] = true
	if err := k.addHistory(h); err != nil {
		return Historical{}, false, err
	}
	hk, ok := k.history[id]
	return hk, ok, nil
}

// historyTimeout bounds one read of the historical keys.
const historyTimeout = 10 * time.Second

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

// Verify checks the signature headers of a message against the trusted
// keys (historical keys not included: see VerifyAt).
func (k *Keyring) Verify(subject string, h nats.Header, data []byte) error {
	id, sig, err := signatureOf(h)
	if err != nil {
		return err
	}
	pub, ok := k.keys[id]
	if !ok {
		return fmt.Errorf("%w (key id %q)", ErrUnknownKey, id)
	}
	return check(pub, id, subject, data, sig)
}

// VerifyAt checks the signature headers of the message stored at stream
// sequence seq: a trusted key, or a historical key whose bound covers
// seq, must have signed it. An error reading the historical keys is
// returned as it is (not ErrUnknownKey): the caller must not take the
// event for unauthenticated because the source did not answer.
func (k *Keyring) VerifyAt(seq uint64, subject string, h nats.Header, data []byte) error {
	id, sig, err := signatureOf(h)
	if err != nil {
		return err
	}
	if pub, ok := k.keys[id]; ok {
		return check(pub, id, subject, data, sig)
	}
	hk, ok, err := k.historical(id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w (key id %q)", ErrUnknownKey, id)
	}
	if seq > hk.UpTo {
		return fmt.Errorf("%w (key id %s: a restored log's key, trusted up to sequence %d only)", ErrUnknownKey, id, hk.UpTo)
	}
	return check(hk.Key, id, subject, data, sig)
}

// ErrHistory wraps a failure to read the historical keys.
var ErrHistory = errors.New("signing: historical keys unavailable")

func signatureOf(h nats.Header) (id string, sig []byte, err error) {
	id, sig64 := h.Get(HeaderKeyID), h.Get(HeaderSignature)
	if id == "" || sig64 == "" {
		return "", nil, ErrUnsigned
	}
	sig, err = base64.StdEncoding.DecodeString(sig64)
	if err != nil {
		return id, nil, fmt.Errorf("%w (key id %s)", ErrBadSignature, id)
	}
	return id, sig, nil
}

func check(pub ed25519.PublicKey, id, subject string, data, sig []byte) error {
	if !ed25519.Verify(pub, message(subject, data), sig) {
		return fmt.Errorf("%w (key id %s)", ErrBadSignature, id)
	}
	return nil
}
