package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTokenAddKeepsEachPoolOnce: a pool named twice in --pools is stored
// once (it was stored twice, found by helper-39's round), as a scope
// named twice is; token list shows what the file holds.
func TestTokenAddKeepsEachPoolOnce(t *testing.T) {
	tokensFile := filepath.Join(t.TempDir(), "tokens.jsonl")
	if out, _, err := runLedger(t, "", "token", "add", "--file", tokensFile, "--name", "scheduler", "--scopes", "append,append", "--pools", "gpu, gpu,cpu,gpu"); err != nil {
		t.Fatalf("token add: %q %v", out, err)
	}
	out, _, err := runLedger(t, "", "token", "list", "--file", tokensFile, "--json")
	if err != nil {
		t.Fatalf("token list: %q %v", out, err)
	}
	var e struct {
		Name   string   `json:"name"`
		Scopes []string `json:"scopes"`
		Pools  []string `json:"pools"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &e); err != nil {
		t.Fatalf("token list --json: %q: %v", out, err)
	}
	if !slices.Equal(e.Pools, []string{"gpu", "cpu"}) || !slices.Equal(e.Scopes, []string{"append"}) {
		t.Errorf("stored scopes %q and pools %q, want [append] and [gpu cpu]", e.Scopes, e.Pools)
	}
}
