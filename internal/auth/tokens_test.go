package auth_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/auth"
)

func TestAuthenticateAndAllow(t *testing.T) {
	tok1, e1, err := auth.Generate("scheduler", []auth.Scope{auth.ScopeAppend}, []string{"gpu"})
	if err != nil {
		t.Fatal(err)
	}
	tok2, e2, _ := auth.Generate("ops", auth.Scopes, []string{auth.AllPools})
	set, err := auth.New(e1, e2)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok1, auth.TokenPrefix) || e1.SHA256 != auth.Hash(tok1) || strings.Contains(e1.SHA256, tok1) {
		t.Errorf("token %q, entry %+v", tok1, e1)
	}
	id, ok := set.Authenticate(tok1)
	if !ok || id.Name != "scheduler" {
		t.Fatalf("scheduler's token: %v %v", id, ok)
	}
	for _, c := range []struct {
		scope auth.Scope
		pool  string
		want  bool
	}{
		{auth.ScopeAppend, "gpu", true}, {auth.ScopeAppend, "cpu", false},
		{auth.ScopePlan, "gpu", false}, {auth.ScopeRead, "", false}, {auth.ScopeAppend, "", true},
	} {
		if got := id.Allows(c.scope, c.pool); got != c.want {
			t.Errorf("scheduler %s on %q: %v, want %v", c.scope, c.pool, got, c.want)
		}
	}
	if id, ok := set.Authenticate(tok2); !ok || !id.Allows(auth.ScopePlan, "anything") {
		t.Errorf("ops: %v %v", id, ok)
	}
	for _, bad := range []string{"", tok1 + "x", auth.Hash(tok1), strings.ToUpper(tok1)} {
		if _, ok := set.Authenticate(bad); ok {
			t.Errorf("token %q accepted", bad)
		}
	}
}

func TestEntriesAreChecked(t *testing.T) {
	_, good, _ := auth.Generate("a", []auth.Scope{auth.ScopeRead}, []string{"p"})
	for name, e := range map[string]auth.Entry{
		"bad name":      {Name: "a b", SHA256: good.SHA256, Scopes: good.Scopes, Pools: good.Pools},
		"bad hash":      {Name: "a", SHA256: "abc", Scopes: good.Scopes, Pools: good.Pools},
		"no scopes":     {Name: "a", SHA256: good.SHA256, Pools: good.Pools},
		"unknown scope": {Name: "a", SHA256: good.SHA256, Scopes: []auth.Scope{"admin"}, Pools: good.Pools},
		"no pools":      {Name: "a", SHA256: good.SHA256, Scopes: good.Scopes},
		"bad pool":      {Name: "a", SHA256: good.SHA256, Scopes: good.Scopes, Pools: []string{"a.b"}},
	} {
		if _, err := auth.New(e); !errors.Is(err, auth.ErrInvalidEntry) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := auth.New(good, good); !errors.Is(err, auth.ErrInvalidEntry) {
		t.Errorf("a name twice: %v", err)
	}
	if _, err := auth.Parse([]byte(`{"name":"a","sha256":"` + good.SHA256 + `","scopes":["read"],"pools":["p"],"token":"x"}`)); err == nil {
		t.Error("unknown field accepted")
	}
	if _, err := auth.ParseScopes("append,write"); err == nil {
		t.Error("scope write accepted")
	}
	// A pool named twice is kept once (it was stored twice), in the order
	// given.
	if got := auth.ParsePools(" gpu,cpu , gpu,cpu"); !slices.Equal(got, []string{"gpu", "cpu"}) {
		t.Errorf("ParsePools: %q, want [gpu cpu]", got)
	}
}

func TestTokensFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.jsonl")
	tok, e, _ := auth.Generate("a", auth.Scopes, []string{auth.AllPools})
	if err := auth.AppendFile(path, e); err != nil {
		t.Fatal(err)
	}
	if err := auth.AppendFile(path, e); err == nil {
		t.Error("the same name added twice")
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("tokens file mode %v (%v), want 0600", fi.Mode(), err)
	}
	set, err := auth.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := set.Authenticate(tok); !ok {
		t.Error("token of the file refused")
	}
	if b, _ := os.ReadFile(path); strings.Contains(string(b), tok) {
		t.Error("the file holds the token itself")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Load(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a world-readable tokens file: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("# nobody\n"), 0o600)
	if _, err := auth.Load(empty); err == nil {
		t.Error("a tokens file without entries accepted")
	}
}
