package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cluster-ledger/ledger/internal/auth"
)

// A data directory made before the metrics scope existed: dev gives its
// admin token every scope (so it may scrape /metrics) and leaves the
// other tokens as they were.
func TestDevAdminTokenGainsNewScopes(t *testing.T) {
	data := t.TempDir()
	token, admin, err := auth.Generate(devAdminName, []auth.Scope{auth.ScopeAppend, auth.ScopePlan, auth.ScopeRead}, []string{auth.AllPools})
	if err != nil {
		t.Fatal(err)
	}
	other, reader, _ := auth.Generate("dashboard", []auth.Scope{auth.ScopeRead}, []string{"gpu"})
	tokensPath := filepath.Join(data, devTokensFile)
	for _, e := range []auth.Entry{admin, reader} {
		if err := auth.AppendFile(tokensPath, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(data, devAdminFile), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, tokens, err := devTokens(data)
	if err != nil || got != token {
		t.Fatalf("devTokens: %q %v", got, err)
	}
	id, ok := tokens.Authenticate(token)
	if !ok || !id.Has(auth.ScopeMetrics) || !id.Allows(auth.ScopeAppend, "any") {
		t.Fatalf("admin after dev: %+v %v", id, ok)
	}
	id, ok = tokens.Authenticate(other)
	if !ok || id.Has(auth.ScopeMetrics) || id.Allows(auth.ScopeRead, "cpu") || !id.Allows(auth.ScopeRead, "gpu") {
		t.Fatalf("another token changed: %+v %v", id, ok)
	}
	if fi, err := os.Stat(tokensPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("tokens file after the rewrite: %v %v", fi.Mode(), err)
	}
}
