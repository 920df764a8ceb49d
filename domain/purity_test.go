package domain_test

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEnginePurity keeps domain a pure state machine: its non-test files
// import nothing that reads a clock, draws random numbers or does I/O,
// never call time.Now, and never range over a map (type-checked: map order
// must not reach an output).
func TestEnginePurity(t *testing.T) {
	allowed := map[string]bool{
		"bytes": true, "cmp": true, "crypto/sha256": true, "encoding/binary": true, "encoding/json": true,
		"container/heap": true, "errors": true, "fmt": true, "hash": true, "maps": true, "math": true, "slices": true, "strings": true,
		"time": true, "unicode": true,
		"github.com/cluster-ledger/ledger/events": true, "github.com/google/btree": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !allowed[path] {
				t.Errorf("%s imports %s: the engine must stay free of I/O, clocks and randomness", name, path)
			}
		}
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	if _, err := conf.Check("github.com/cluster-ledger/ledger/domain", fset, parsed, info); err != nil {
		t.Fatalf("type-check domain: %v", err)
	}
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && id.Name == "time" && (x.Sel.Name == "Now" || x.Sel.Name == "Since") {
					t.Errorf("%s: time.%s in the engine; use the event's time", fset.Position(x.Pos()), x.Sel.Name)
				}
			case *ast.RangeStmt:
				if _, isMap := info.TypeOf(x.X).Underlying().(*types.Map); isMap {
					t.Errorf("%s: ranging over a map in the engine (its order is random)", fset.Position(x.Pos()))
				}
			}
			return true
		})
	}
}
