package stream

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/signing"
)

// historyKey prefixes the stream metadata entries that name the signing
// keys of a restored log: ledger.history.<key id> = "<up to>:<key>"
// (the last sequence the key may have signed, and the raw Ed25519 public
// key in standard base64). Only the admin identity may change the
// stream's configuration; every reader may read it (stream info).
const historyKey = "ledger.history."

// History reads the historical signing keys the stream's metadata names
// (a restore recorded them), by key id.
func History(ctx context.Context, js jetstream.JetStream) (map[string]signing.Historical, error) {
	s, err := js.Stream(ctx, Name)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", Name, err)
	}
	return historyOf(s.CachedInfo().Config.Metadata)
}

// HistorySource is History as a keyring's source (signing.Keyring.UseHistory).
func HistorySource(js jetstream.JetStream) signing.HistorySource {
	return func(ctx context.Context) (map[string]signing.Historical, error) { return History(ctx, js) }
}

func historyOf(md map[string]string) (map[string]signing.Historical, error) {
	out := map[string]signing.Historical{}
	for k, v := range md {
		id, ok := strings.CutPrefix(k, historyKey)
		if !ok {
			continue
		}
		upTo, key, ok := strings.Cut(v, ":")
		seq, err := strconv.ParseUint(upTo, 10, 64)
		raw, err2 := base64.StdEncoding.DecodeString(key)
		if !ok || err != nil || err2 != nil || len(raw) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("stream %s: metadata %s is not <sequence>:<Ed25519 public key>", Name, k)
		}
		h := signing.Historical{Key: ed25519.PublicKey(raw), UpTo: seq}
		if signing.KeyID(h.Key) != id {
			return nil, fmt.Errorf("stream %s: metadata %s holds the key of id %s", Name, k, signing.KeyID(h.Key))
		}
		out[id] = h
	}
	return out, nil
}

// RecordHistory adds keys to the stream's historical keys (admin
// identity: it updates the stream's configuration). A key already there
// keeps the larger bound.
func RecordHistory(ctx context.Context, js jetstream.JetStream, keys map[string]signing.Historical) error {
	s, err := js.Stream(ctx, Name)
	if err != nil {
		return fmt.Errorf("stream %s: %w", Name, err)
	}
	cfg := s.CachedInfo().Config
	have, err := historyOf(cfg.Metadata)
	if err != nil {
		return err
	}
	md := map[string]string{}
	for k, v := range cfg.Metadata {
		md[k] = v
	}
	changed := false
	for id, h := range keys {
		if signing.KeyID(h.Key) != id {
			return fmt.Errorf("historical key named %s has id %s", id, signing.KeyID(h.Key))
		}
		if old, ok := have[id]; ok && old.UpTo >= h.UpTo {
			continue
		}
		md[historyKey+id] = strconv.FormatUint(h.UpTo, 10) + ":" + base64.StdEncoding.EncodeToString(h.Key)
		changed = true
	}
	if !changed {
		return nil
	}
	cfg.Metadata = md
	// A refused request (an identity without the right) gets no answer:
	// bound the wait.
	uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := js.UpdateStream(uctx, cfg); err != nil {
		return fmt.Errorf("record the historical keys in stream %s (admin identity): %w", Name, err)
	}
	return nil
}
