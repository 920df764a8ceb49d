package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const ownScenario = "../../internal/scenario/testdata/ownership/own-lend-return.yaml"

// Ownership is rules version 3, the newest: these fold under it.

// TestSimulateShowsOwnership: a pool with ownership gets the ownership
// columns (owned, own used, lent out, sources) and the assignment; a
// pool without keeps today's table.
func TestSimulateShowsOwnership(t *testing.T) {
	var out bytes.Buffer
	if err := simulate(&out, []string{ownScenario}, false); err != nil {
		t.Fatalf("simulate: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"CONSUMER  DEMAND  SHARE  TARGET  ALLOC  BORROWED  OWNED  OWN USED  LENT OUT  SOURCES",
		// step 1: /A uses its own h1, /B's idle h2 (lent) and public h3
		"/A        12      9      12      12     3         4      4         0         own 4, public 4, public 4 from /B",
		"/B        0       3      0       0      0         4      0         4         -",
		"ownership: /A h1 4, /B h2 4",
		"lend    /A from /B: 4 on h2  [share_ratio.grant]",
		"return  /B from /A: 4 on h2  [own.return]",
		// step 3
		"/B        8       3      5       5      2         4      4         0         own 4, public 1",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("simulate output lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	if err := simulate(&out, []string{"../../test/scenarios/seed/seed-000-priority-reclaim.yaml"}, false); err != nil {
		t.Fatalf("simulate: %v\n%s", err, out.String())
	}
	if s := out.String(); strings.Contains(s, "OWNED") || strings.Contains(s, "ownership:") || !strings.Contains(s, "CONSUMER  DEMAND  SHARE  TARGET  ALLOC  BORROWED  \n") {
		t.Errorf("a pool without ownership shows ownership:\n%s", s)
	}
}

func TestSimulateJSONShowsOwnership(t *testing.T) {
	var out bytes.Buffer
	if err := simulate(&out, []string{ownScenario}, true); err != nil {
		t.Fatalf("simulate: %v\n%s", err, out.String())
	}
	var step struct {
		Consumers []struct {
			Path    string `json:"path"`
			Owned   int64  `json:"owned"`
			OwnUsed int64  `json:"own_used"`
			LentOut int64  `json:"lent_out"`
			Sources []struct {
				Pool   string `json:"pool"`
				Lender string `json:"lender"`
				Slots  int64  `json:"slots"`
			} `json:"sources"`
		} `json:"consumers"`
		Ownership []struct {
			Consumer, Host string
			Slots          int64
		} `json:"ownership"`
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	if err := json.Unmarshal([]byte(first), &step); err != nil {
		t.Fatal(err)
	}
	a, b := step.Consumers[0], step.Consumers[1]
	if a.Path != "/A" || a.Owned != 4 || a.OwnUsed != 4 || len(a.Sources) != 3 || a.Sources[1].Lender != "/B" || a.Sources[1].Slots != 4 {
		t.Errorf("/A after step 1: %+v", a)
	}
	if b.Path != "/B" || b.Owned != 4 || b.OwnUsed != 0 || b.LentOut != 4 {
		t.Errorf("/B after step 1: %+v", b)
	}
	if len(step.Ownership) != 2 || step.Ownership[1].Consumer != "/B" || step.Ownership[1].Host != "h2" || step.Ownership[1].Slots != 4 {
		t.Errorf("ownership after step 1: %+v", step.Ownership)
	}

	out.Reset()
	if err := simulate(&out, []string{"../../test/scenarios/seed/seed-000-priority-reclaim.yaml"}, true); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"ownership"`, `"owned"`, `"sources"`, `"lent_out"`} {
		if strings.Contains(out.String(), k) {
			t.Errorf("a pool without ownership has %s in --json", k)
		}
	}
}

// TestSimulateRulesDevelopment: simulate --rules-development folds the
// hand-worked scenarios of the rules version in development (part D's,
// naming rules 4) and they pass; without the switch their plans are
// refused, and the file fails.
func TestSimulateRulesDevelopment(t *testing.T) {
	files, _ := filepath.Glob("../../test/development/v4/d-*.yaml")
	if len(files) != 17 {
		t.Fatalf("%d d-* files", len(files))
	}
	out, _, err := runLedger(t, "", append([]string{"simulate", "--rules-development"}, files...)...)
	if err != nil || !strings.Contains(out, "17 scenarios: 17 passed, 0 failed") || !strings.Contains(out, "rules v4; policy: reclaim share_ratio, enforcement parent, preemption true, priority bands") {
		t.Fatalf("simulate --rules-development: %v\n%s", err, out)
	}
	out, _, err = runLedger(t, "", "simulate", files[0])
	if exitCode(err) != 1 || !strings.Contains(out, "FAIL setup event refused") || !strings.Contains(out, "in development") {
		t.Errorf("simulate without the switch: exit %d\n%s", exitCode(err), out)
	}
}

// A scenario file of two YAML documents fails, naming the file and the
// second document, instead of simulating the first and passing it.
func TestSimulateRefusesTwoDocuments(t *testing.T) {
	seed, err := os.ReadFile("../../test/scenarios/seed/seed-000-priority-reclaim.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "two.yaml")
	if err := os.WriteFile(file, append(append(seed, "---\n"...), seed...), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = simulate(&out, []string{file}, false)
	if err == nil || !strings.Contains(out.String(), "FAIL "+file) || !strings.Contains(out.String(), "more than one YAML document") {
		t.Errorf("simulate of two documents: %v\n%s", err, out.String())
	}
}
