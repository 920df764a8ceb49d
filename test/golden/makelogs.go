package golden

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
	"github.com/cluster-ledger/ledger/internal/scenario"
)

// RandomLogs is how many seeded random logs the corpus holds, and
// RandomEvents about how many events each has after its plan and hosts.
// OwnedLogs is how many seeded random logs with ownership it holds
// (gen.GenerateOwned, plans naming rules v3: versions 1 and 2 refuse
// them), made once rules v3 is released.
const (
	RandomLogs   = 300
	RandomEvents = 60
	OwnedLogs    = 100
)

// makeLogs writes the logs the corpus lacks: one per scenario file under
// scenarioDir, and the seeded random logs. An existing log is never
// rewritten, so the corpus only grows. It returns the names written.
func makeLogs(dir, scenarioDir string) ([]string, error) {
	var written []string
	add := func(name string, lines [][]byte) error {
		path := filepath.Join(dir, name+".jsonl")
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		written = append(written, name)
		return os.WriteFile(path, append(bytes.Join(lines, []byte{'\n'}), '\n'), 0o644)
	}
	files, err := filepath.Glob(filepath.Join(scenarioDir, "*", "*.yaml"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		sc, err := scenario.ParseFile(f)
		if err != nil {
			return nil, err
		}
		name := scenarioLogName(scenarioDir, f)
		lines, err := scenarioLog(name, sc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if err := add(name, lines); err != nil {
			return nil, err
		}
	}
	for seed := uint64(1); seed <= RandomLogs; seed++ {
		name := fmt.Sprintf("random-%03d", seed)
		lines, err := randomLog(name, seed)
		if err != nil {
			return nil, err
		}
		if err := add(name, lines); err != nil {
			return nil, err
		}
	}
	for seed := uint64(1); seed <= OwnedLogs && domain.RulesV3.Released(); seed++ { // a stored plan names a released version
		name := fmt.Sprintf("owned-%03d", seed)
		lines, err := generatedLog(name, gen.GenerateOwned(gen.NewRand(seed+70000), RandomEvents))
		if err != nil {
			return nil, err
		}
		if err := add(name, lines); err != nil {
			return nil, err
		}
	}
	return written, nil
}

// scenarioLogName is the corpus name of a scenario file's log.
func scenarioLogName(scenarioDir, file string) string {
	rel, _ := filepath.Rel(scenarioDir, file)
	return "scenario-" + strings.ReplaceAll(strings.TrimSuffix(rel, ".yaml"), string(filepath.Separator), "-")
}

// scenarioLog is the log a scenario file gives through the service: its
// plan, hosts and step events, timed as `ledger simulate` times them.
func scenarioLog(name string, sc *scenario.Scenario) ([][]byte, error) {
	tl := scenario.NewTimeline()
	evs := sc.Events()
	pool := sc.Pool
	if pool == "" {
		pool = "default"
	}
	var lines [][]byte
	for i, ev := range evs {
		at := tl.At(ev.Time)
		if pc, ok := ev.Payload.(*events.PlanChange); ok && pc.Plan.Rules != 0 && !domain.RulesVersion(pc.Plan.Rules).Released() {
			continue // refused at append: never stored (a stored one stops the fold)
		}
		line, err := envelope(fmt.Sprintf("%s-%d", name, i+1), pool, at, ev.Payload)
		if err != nil {
			return nil, err
		}
		lines = append(lines, line)
	}
	return lines, nil
}

func randomLog(name string, seed uint64) ([][]byte, error) {
	return generatedLog(name, gen.Generate(gen.NewRand(seed), RandomEvents))
}

func generatedLog(name string, sc gen.Scenario) ([][]byte, error) {
	at := scenario.Epoch
	var lines [][]byte
	for i, p := range sc.Events {
		line, err := envelope(fmt.Sprintf("%s-%d", name, i+1), "golden", at, p)
		if err != nil {
			return nil, err
		}
		lines = append(lines, line)
		at = at.Add(time.Second)
	}
	return lines, nil
}

func envelope(id, pool string, at time.Time, p events.Payload) ([]byte, error) {
	env, err := events.New(id, pool, "golden", at, p)
	if err != nil {
		return nil, err
	}
	return json.Marshal(env)
}
