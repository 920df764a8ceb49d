package golden

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
)

var (
	makeLogsFlag   = flag.Bool("golden.make-logs", false, "write the logs the corpus lacks (new scenario files, new seeds); never rewrites one")
	addLogsFlag    = flag.Bool("golden.add-logs", false, "record logs that a released version has no record of yet; never changes a record")
	addVersionFlag = flag.Int("golden.add-version", 0, "record every log under this new rules version (refused if it has records already)")
)

const (
	logDir      = "logs"
	scenarioDir = "../scenarios"
)

// TestGolden re-folds every log of the corpus under every released rules
// version and requires exactly the recorded decisions and chain hashes.
func TestGolden(t *testing.T) {
	if *makeLogsFlag {
		written, err := makeLogs(logDir, scenarioDir)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d new logs: %v", len(written), written)
	}
	if *addVersionFlag != 0 {
		addVersion(t, domain.RulesVersion(*addVersionFlag))
	}
	names, err := logNames(logDir)
	if err != nil || len(names) == 0 {
		t.Fatalf("no golden logs in %s (%v)", logDir, err)
	}
	for _, v := range domain.RulesVersions {
		recorded, ok, err := readVersions(".", v)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("%v is released but has no golden records (v%d.json): record them with -golden.add-version %d", v, int(v), int(v))
		}
		checkVersion(t, v, names, recorded)
	}
}

func checkVersion(t *testing.T, v domain.RulesVersion, names []string, recorded Versions) {
	added := 0
	for _, name := range names {
		lines, err := readLog(logDir + "/" + name + ".jsonl")
		if err != nil {
			t.Fatal(err)
		}
		got, err := foldLog(lines, v)
		if err != nil {
			t.Fatalf("%s under %v: %v", name, v, err)
		}
		want, ok := recorded[name]
		if !ok {
			if !*addLogsFlag {
				t.Errorf("%s has no record under %v: record new logs with -golden.add-logs", name, v)
				continue
			}
			recorded[name] = got.record
			added++
			continue
		}
		if got.record != want {
			t.Errorf("%s under %v: %s", name, v, firstDifference(lines, got, want))
		}
	}
	if added > 0 {
		if err := writeVersions(".", v, recorded); err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: recorded %d new logs", v, added)
	}
	for name := range recorded {
		if !slices.Contains(names, name) {
			t.Errorf("%v has a record of %s, but the log is gone: logs are never removed", v, name)
		}
	}
}

// firstDifference names the first event whose chain link differs from
// the record, with what it decides now.
func firstDifference(lines [][]byte, got folded, want Record) string {
	wantLinks := strings.Fields(want.Links)
	for i, link := range got.links {
		if i >= len(wantLinks) || link != wantLinks[i] {
			var ds []string
			for _, d := range got.decisions[i] {
				ds = append(ds, fmt.Sprintf("%s %s<-%s %s %d %s", d.Kind, d.Consumer, d.From, d.Host, d.Slots, d.Rule))
			}
			return fmt.Sprintf("first differing event is #%d %s\n  now decides: [%s]\n  (events %d/%d, refused %d/%d, chain %s, recorded %s)",
				i+1, lines[i], strings.Join(ds, "; "), got.record.Events, want.Events, got.record.Refused, want.Refused, got.record.Chain, want.Chain)
		}
	}
	return fmt.Sprintf("same links but a different record: got %+v, recorded %+v", got.record, want)
}

// addVersion records every log under a version that has no records yet.
// Released versions are frozen: their records are never rewritten.
func addVersion(t *testing.T, v domain.RulesVersion) {
	if !v.Released() {
		t.Fatalf("%v is not implemented by this build", v)
	}
	if _, ok, err := readVersions(".", v); err != nil || ok {
		t.Fatalf("%v already has golden records (%v); released versions are frozen: add a new version instead", v, err)
	}
	names, err := logNames(logDir)
	if err != nil {
		t.Fatal(err)
	}
	vs := Versions{}
	for _, name := range names {
		lines, err := readLog(logDir + "/" + name + ".jsonl")
		if err != nil {
			t.Fatal(err)
		}
		f, err := foldLog(lines, v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		vs[name] = f.record
	}
	if err := writeVersions(".", v, vs); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d logs under %v", len(vs), v)
}

// TestGoldenCoversEveryScenario: every scenario file under test/scenarios
// has its log in the corpus, so a behaviour a scenario states is frozen
// under every released version (-golden.make-logs -golden.add-logs adds
// them).
func TestGoldenCoversEveryScenario(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(scenarioDir, "*", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files in %s (%v)", scenarioDir, err)
	}
	names, err := logNames(logDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if name := scenarioLogName(scenarioDir, f); !slices.Contains(names, name) {
			t.Errorf("%s has no golden log %s: make it with -golden.make-logs -golden.add-logs", f, name)
		}
	}
}

// TestGoldenV3KeepsV2WithoutOwnership: version 3 adds ownership and
// nothing else, so every log of the corpus whose plans name no ownership
// decides under version 3 exactly what it decides under version 2, event
// by event, refusals included (the chain hashes differ: the version is
// part of the state they cover).
func TestGoldenV3KeepsV2WithoutOwnership(t *testing.T) {
	names, err := logNames(logDir)
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, name := range names {
		lines, err := readLog(logDir + "/" + name + ".jsonl")
		if err != nil {
			t.Fatal(err)
		}
		if namesOwnership(lines) {
			continue
		}
		v2, err := foldLog(lines, domain.RulesV2)
		if err != nil {
			t.Fatal(err)
		}
		v3, err := foldLog(lines, domain.RulesV3)
		if err != nil {
			t.Fatal(err)
		}
		compared++
		if v2.record.Decisions != v3.record.Decisions || v2.record.Refused != v3.record.Refused {
			for i := range v2.decisions {
				if !slices.Equal(v2.decisions[i], v3.decisions[i]) {
					t.Errorf("%s: event #%d %s decides under v2 %v, under v3 %v", name, i+1, lines[i], v2.decisions[i], v3.decisions[i])
					break
				}
			}
		}
	}
	if compared < 300 {
		t.Errorf("only %d logs without ownership compared", compared)
	}
	t.Logf("%d logs without ownership decide the same under v2 and v3", compared)
}

// TestGoldenV4KeepsV3WithoutPartD: version 4 (in development) changes
// nothing for a plan without ownership and without its own fields
// (priority_bands, preemptable, a zero share under share_ratio): every
// such log of the corpus folds under version 4 exactly as under version 3,
// event by event: the same decisions, refusals and state of every consumer
// and host touched, so the same chain links once the plans' version
// stamps are set aside (each link is computed here over the version 3
// bytes of its event and version 4's result, and must equal version 3's).
func TestGoldenV4KeepsV3WithoutPartD(t *testing.T) {
	names, err := logNames(logDir)
	if err != nil {
		t.Fatal(err)
	}
	compared, skipped := 0, 0
	for _, name := range names {
		lines, err := readLog(logDir + "/" + name + ".jsonl")
		if err != nil {
			t.Fatal(err)
		}
		if namesOwnership(lines) || namesPartD(lines) {
			skipped++
			continue
		}
		v3, err := foldLog(lines, domain.RulesV3)
		if err != nil {
			t.Fatal(err)
		}
		v4, err := foldLog(lines, domain.RulesV4, domain.WithDevelopmentRules())
		if err != nil {
			t.Fatalf("%s under v4: %v", name, err)
		}
		compared++
		var chain domain.Hash
		for i := range lines {
			raw, err := underRules(lines[i], domain.RulesV3)
			if err != nil {
				t.Fatal(err)
			}
			chain = domain.Chain(chain, raw, &v4.results[i])
			if got := hex.EncodeToString(chain[:linkPrefix]); got != v3.links[i] {
				t.Errorf("%s: event #%d %s: under v4 decides %v (chain %s), under v3 %v (chain %s)", name, i+1, lines[i], v4.decisions[i], got, v3.decisions[i], v3.links[i])
				break
			}
		}
		if chain4 := hex.EncodeToString(chain[:]); chain4 != v3.record.Chain || v4.record.Decisions != v3.record.Decisions || v4.record.Refused != v3.record.Refused {
			t.Errorf("%s: v4 ends at chain %s (decisions %s, %d refused), v3 at %s (%s, %d)", name, chain4, v4.record.Decisions, v4.record.Refused, v3.record.Chain, v3.record.Decisions, v3.record.Refused)
		}
	}
	if compared < 300 {
		t.Errorf("only %d logs without ownership or part D compared", compared)
	}
	t.Logf("%d logs decide the same under v3 and v4 (%d with ownership or part D's fields left out)", compared, skipped)
}

// namesPartD reports whether any plan of the log names a field of
// version 4: priority_bands, preemptable, or a zero share under
// share_ratio (under priority every version refuses it alike).
func namesPartD(lines [][]byte) bool {
	for _, line := range lines {
		env, err := events.ParseEnvelope(line)
		if err != nil || env.Type != events.TypePlan {
			continue
		}
		var pc events.PlanChange
		if json.Unmarshal(env.Data, &pc) != nil {
			continue
		}
		pl := pc.Plan
		if pl.NamesYARNFields() || (pl.HasZeroShare() && pl.Policy.ReclaimOrDefault() == events.ReclaimShareRatio) {
			return true
		}
	}
	return false
}

// namesOwnership reports whether any plan of the log names ownership.
func namesOwnership(lines [][]byte) bool {
	for _, line := range lines {
		env, err := events.ParseEnvelope(line)
		if err != nil || env.Type != events.TypePlan {
			continue
		}
		var pc events.PlanChange
		if json.Unmarshal(env.Data, &pc) == nil && pc.Plan.HasOwnership() {
			return true
		}
	}
	return false
}
