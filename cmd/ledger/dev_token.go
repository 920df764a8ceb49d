package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cluster-ledger/ledger/internal/auth"
)

// Files of `ledger dev`'s tokens in its data directory, both mode 0600.
const (
	devTokensFile = "tokens.jsonl" // every token's hash; add more with `ledger token add`
	devAdminFile  = "admin.token"  // the admin token itself, printed as LEDGER_TOKEN
	devAdminName  = "admin"
)

// devTokens returns the admin token of the data directory (creating it,
// with all scopes on all pools, on first run) and the tokens file's set.
func devTokens(data string) (string, *auth.Tokens, error) {
	tokensPath, adminPath := filepath.Join(data, devTokensFile), filepath.Join(data, devAdminFile)
	b, err := os.ReadFile(adminPath)
	token := strings.TrimSpace(string(b))
	switch {
	case errors.Is(err, os.ErrNotExist):
		var e auth.Entry
		token, e, err = auth.Generate(devAdminName, auth.Scopes, []string{auth.AllPools})
		if err != nil {
			return "", nil, err
		}
		if err := os.WriteFile(adminPath, []byte(token+"\n"), 0o600); err != nil {
			return "", nil, err
		}
		if err := auth.AppendFile(tokensPath, e); err != nil {
			return "", nil, fmt.Errorf("%s: %w", tokensPath, err)
		}
	case err != nil:
		return "", nil, err
	}
	tokens, err := auth.Load(tokensPath)
	if err != nil {
		return "", nil, err
	}
	id, ok := tokens.Authenticate(token)
	if !ok {
		return "", nil, fmt.Errorf("%s is not in %s: remove %s to create a new admin token", adminPath, tokensPath, adminPath)
	}
	if id.Name == devAdminName && slices.ContainsFunc(auth.Scopes, func(s auth.Scope) bool { return !id.Has(s) }) {
		// An admin token made before a scope existed (metrics) gets every scope.
		if err := auth.GrantFile(tokensPath, devAdminName, auth.Scopes...); err != nil {
			return "", nil, fmt.Errorf("%s: %w", tokensPath, err)
		}
		if tokens, err = auth.Load(tokensPath); err != nil {
			return "", nil, err
		}
	}
	return token, tokens, nil
}
