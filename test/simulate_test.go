package test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/domain"
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

// TestScenarioWithoutRulesRunsUnderNewest: `ledger simulate` (scenario.Run)
// folds a plan that names no rules version under the newest. The twins of
// test/scenarios/versions differ only by the version their plan names;
// with it removed, the version 2 twin still passes (later versions keep
// version 2's host-down order) and the version 1 twin no longer does.
func TestScenarioWithoutRulesRunsUnderNewest(t *testing.T) {
	for file, wantPass := range map[string]bool{
		"scenarios/versions/v2-host-down-loses-first.yaml":          true,
		"scenarios/versions/v1-host-down-releases-before-loss.yaml": false,
	} {
		s, err := scenario.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if s.Plan.Rules == 0 {
			t.Fatalf("%s: its plan names no rules version", file)
		}
		s.Plan.Rules = 0
		res := scenario.Run(s)
		if res.Failed() == wantPass {
			t.Errorf("%s without its rules version: failed %t, want %t", file, res.Failed(), !wantPass)
		}
		for _, st := range res.Steps {
			if st.Policy.Rules != domain.RulesNewest {
				t.Errorf("%s without its rules version, step %d: runs under %v, want %v", file, st.Step, st.Policy.Rules, domain.RulesNewest)
			}
		}
	}
}
