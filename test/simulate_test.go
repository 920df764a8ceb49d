package test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/scenario"
)

// scenarioFiles lists every scenario under test/scenarios, seeds included.
func scenarioFiles(t testing.TB) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("scenarios", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenario files found under test/scenarios")
	}
	return files
}

// TestScenariosInMemory folds every scenario with the engine and checks
// every step's expectations.
func TestScenariosInMemory(t *testing.T) {
	for _, f := range scenarioFiles(t) {
		t.Run(strings.TrimPrefix(f, "scenarios/"), func(t *testing.T) {
			s, err := scenario.ParseFile(f)
			if err != nil {
				t.Fatal(err)
			}
			res := scenario.Run(s)
			for _, msg := range res.Setup {
				t.Errorf("setup refused: %s", msg)
			}
			for _, st := range res.Steps {
				for _, d := range st.Diffs {
					t.Errorf("step %d %q: %s", st.Step, st.Name, d)
				}
			}
		})
	}
}
