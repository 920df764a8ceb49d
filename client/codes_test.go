package client_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEveryRefusalCodeHasAConstant reads the ledger's sources and checks
// that every code the service can answer with has its Code constant
// here, and that every constant here is a code the service has: each
// refusal reason declared with events.NewRefusal (the engine's,
// decoding's, the projector's) and each Reason/reason constant of the
// API and the console.
func TestEveryRefusalCodeHasAConstant(t *testing.T) {
	server := serverCodes(t, "..")
	ours := clientCodes(t, "errors.go")
	for code, where := range server {
		if _, ok := ours[code]; !ok {
			t.Errorf("the service answers with code %q (%s), and package client has no Code constant for it", code, where)
		}
	}
	for code, name := range ours {
		if _, ok := server[code]; !ok {
			t.Errorf("client.%s = %q is a code the service does not have", name, code)
		}
	}
	if len(server) < 50 {
		t.Fatalf("found only %d codes in the sources: the scan is broken", len(server))
	}
}

// serverCodes returns each code of the sources under root with where it
// is declared.
func serverCodes(t *testing.T, root string) map[string]string {
	t.Helper()
	codes := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "client", "test", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		consts := stringConsts(f)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if name := calleeName(n.Fun); name == "NewRefusal" && len(n.Args) > 0 {
					if v, ok := stringValue(n.Args[0], consts); ok {
						codes[v] = path
					} else {
						t.Errorf("%s: NewRefusal with a code this test cannot read", path)
					}
				}
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if (strings.HasPrefix(id.Name, "Reason") || strings.HasPrefix(id.Name, "reason")) && i < len(n.Values) {
						if v, ok := stringValue(n.Values[i], consts); ok {
							codes[v] = path
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The code of a refusal that carries none, which the projection's
	// events table can show (events.CodeUnclassified).
	codes["refused"] = "events/errors.go"
	return codes
}

// clientCodes returns this package's Code constants: value -> name.
func clientCodes(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			for i, name := range vs.Names {
				v, err := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				if prev, dup := out[v]; dup {
					t.Errorf("client.%s and client.%s are both %q", prev, name.Name, v)
				}
				out[v] = name.Name
			}
		}
	}
	return out
}

func stringConsts(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	return out
}

func calleeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

func stringValue(e ast.Expr, consts map[string]string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			v, err := strconv.Unquote(e.Value)
			return v, err == nil
		}
	case *ast.Ident:
		v, ok := consts[e.Name]
		return v, ok
	}
	return "", false
}
