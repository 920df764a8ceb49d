package events

import (
	"errors"
	"slices"
	"testing"
)

// TestKindsTable: every row's example decodes strictly into a payload of
// its own type and passes the limits, Types follows the table, every
// scope is one of the two write scopes, and a type no row names is
// refused as unknown.
func TestKindsTable(t *testing.T) {
	seen := map[Type]bool{}
	for i, k := range Kinds() {
		if seen[k.Type] {
			t.Fatalf("%s has two rows", k.Type)
		}
		seen[k.Type] = true
		if Types[i] != k.Type {
			t.Fatalf("Types[%d] is %s, the table's row %s", i, Types[i], k.Type)
		}
		p, err := DecodePayload(k.Type, []byte(k.Example))
		if err != nil {
			t.Fatalf("%s: its example %s: %v", k.Type, k.Example, err)
		}
		if p.EventType() != k.Type {
			t.Fatalf("%s decodes into a %s payload", k.Type, p.EventType())
		}
		if err := CheckLimits(p); err != nil {
			t.Fatalf("%s: its example is past a limit: %v", k.Type, err)
		}
		if !slices.Contains([]string{ScopeAppend, ScopePlan}, k.Scope) || k.Schema < 1 || k.Schema > Version || k.Rules < 1 || k.Limits == "" {
			t.Fatalf("%s: row %+v", k.Type, k)
		}
	}
	if _, err := DecodePayload("drain", []byte(`{}`)); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("a type no row names: %v, want %v", err, ErrUnknownType)
	}
}
