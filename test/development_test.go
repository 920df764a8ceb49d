package test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/scenario"
)

// engineDiffers lists the hand-worked development scenarios the engine
// does not pass yet, each with the point of difference. The list is kept
// honest: a file on it that starts passing fails the test until it is
// taken off.
var engineDiffers = map[string]string{}

// TestDevelopmentScenarios folds the hand-worked scenarios of the rules
// version in development (test/development/*/*.yaml: ownership, rules v3)
// in memory under that version. They are not under test/scenarios, which
// holds what the released versions promise and what the service (ledger
// load --check) and the golden corpus replay.
func TestDevelopmentScenarios(t *testing.T) {
	files, err := filepath.Glob("development/*/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no development scenarios (%v)", err)
	}
	for _, f := range files {
		t.Run(strings.TrimPrefix(f, "development/"), func(t *testing.T) {
			s, err := scenario.ParseFile(f)
			if err != nil {
				t.Fatal(err)
			}
			res := scenario.Run(s, scenario.WithDevelopmentRules())
			var diffs []string
			diffs = append(diffs, res.Setup...)
			for _, st := range res.Steps {
				diffs = append(diffs, st.Diffs...)
			}
			why, known := engineDiffers[filepath.Base(f)]
			switch {
			case known && len(diffs) == 0:
				t.Errorf("passes now: take it off engineDiffers (%s)", why)
			case known:
				t.Logf("known difference (%s): %v", why, diffs)
			default:
				for _, d := range diffs {
					t.Error(d)
				}
			}
		})
	}
}
