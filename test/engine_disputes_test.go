package test

import (
	"path/filepath"
	"testing"

	"github.com/cluster-ledger/ledger/internal/scenario"
)

// TestEngineDisputes folds the engine disputes that the reference model's
// differential test found (test/refmodel/testdata/engine-disputes: minimal
// scenario files, each with the spec passage and the hand computation in
// its comments) through the engine under the rules version in
// development. Each must still fail there: a file the engine passes is a
// dispute settled, and fails this test until it is taken out of the
// directory (or moved to test/development once the spec's side is the
// engine's too). The model's side: refmodel's TestEngineDisputeFiles.
func TestEngineDisputes(t *testing.T) {
	files, err := filepath.Glob("refmodel/testdata/engine-disputes/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Log("no engine dispute is open (refmodel/testdata/engine-disputes/README.md)")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			diffs := developmentDiffs(t, f)
			if len(diffs) == 0 {
				t.Errorf("the engine passes %s now: the dispute is settled, take the file out of engine-disputes", f)
				return
			}
			t.Logf("the engine still differs: %v", diffs)
		})
	}
}

// TestSettledDisputes folds the disputes settled on the engine's side
// (refmodel/testdata/settled-*.yaml, each naming the decision that settled
// it) through the engine under the rules version in development: each must
// pass. The model's side: refmodel's TestExistingScenarioFiles.
func TestSettledDisputes(t *testing.T) {
	files, err := filepath.Glob("refmodel/testdata/settled-*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no settled disputes (%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if diffs := developmentDiffs(t, f); len(diffs) > 0 {
				t.Errorf("the engine differs from %s: %v", f, diffs)
			}
		})
	}
}

// developmentDiffs folds scenario file f through the engine under the
// rules version in development and lists where it differs from the
// file's expectations.
func developmentDiffs(t *testing.T, f string) []string {
	t.Helper()
	s, err := scenario.ParseFile(f)
	if err != nil {
		t.Fatal(err)
	}
	res := scenario.Run(s, scenario.WithDevelopmentRules())
	diffs := append([]string(nil), res.Setup...)
	for _, st := range res.Steps {
		diffs = append(diffs, st.Diffs...)
	}
	return diffs
}
