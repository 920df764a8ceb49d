package refmodel

import (
	"path/filepath"
	"testing"
)

// TestEngineDisputeFiles folds the engine disputes (testdata/engine-disputes:
// logs where the engine and this model differ and the spec, worked by hand
// in each file's comments, sides with the model) through the model: each
// must pass here. test.TestEngineDisputes checks that the engine still
// fails each one.
func TestEngineDisputeFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/engine-disputes/*.yaml")
	if len(files) == 0 {
		t.Log("no engine dispute is open (testdata/engine-disputes/README.md)")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runYAML(t, loadFile(t, f)) })
	}
}
