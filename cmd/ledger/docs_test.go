package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// commandLine finds a command written in the docs: in backquotes
// (`ledger status --json`) or at the start of a line of a code block
// (bin/ledger load ...).
var (
	quotedCommand = regexp.MustCompile("`(?:bin/)?ledger ([^`]+)`")
	blockCommand  = regexp.MustCompile(`(?m)^\s*(?:\$ )?(?:bin/|\./)?ledger ([^|#\n]+)`)
)

// checkCommand fails unless line (what follows "ledger ") names a
// command of the binary and flags it has.
func checkCommand(t *testing.T, where, line string) {
	t.Helper()
	var words []string
	for _, f := range strings.Fields(line) {
		if !regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(f) {
			break
		}
		words = append(words, f)
	}
	if len(words) == 0 {
		t.Errorf("%s: %q names no command", where, "ledger "+line)
		return
	}
	cmd, rest, err := root.Find(words)
	if err != nil || cmd == root || (len(rest) > 0 && cmd.HasSubCommands()) {
		t.Errorf("%s: `ledger %s`: no such command (%v); the binary has %s", where, strings.Join(words, " "), err, commandList(root))
		return
	}
	for _, f := range strings.Fields(line) {
		name, ok := strings.CutPrefix(f, "--")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(strings.Trim(name, ".,;:)"), "=")
		if name != "" && cmd.Flag(name) == nil {
			t.Errorf("%s: `ledger %s`: %s has no flag --%s", where, line, cmd.CommandPath(), name)
		}
	}
}

func commandList(c *cobra.Command) string {
	var names []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			if !s.Hidden && s.Name() != "help" && s.Name() != "completion" {
				names = append(names, s.CommandPath())
				walk(s)
			}
		}
	}
	walk(c)
	return strings.Join(names, ", ")
}

// Every command (and flag) the README, the docs and the alerting rules
// tell someone to run exists in the binary: an alert naming a command
// that is not there (issue 20: "ledger rebuild") fails here.
func TestDocumentedCommandsExist(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, path := range append(docs, "../../README.md") {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range quotedCommand.FindAllStringSubmatch(string(b), -1) {
			checkCommand(t, filepath.Base(path), m[1])
			checked++
		}
		inBlock := false
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inBlock = !inBlock
				continue
			}
			if m := blockCommand.FindStringSubmatch(line); inBlock && m != nil {
				checkCommand(t, filepath.Base(path), m[1])
				checked++
			}
		}
	}
	checked += checkAlerts(t)
	if checked < 50 {
		t.Errorf("only %d commands found in the docs: the patterns lost them", checked)
	}
}

// checkAlerts: every alert tells the operator paged for it what to run,
// a command of the binary in backquotes, and that command exists.
func checkAlerts(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("../../docs/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			text := r.Annotations["summary"] + " " + r.Annotations["description"]
			ms := quotedCommand.FindAllStringSubmatch(text, -1)
			if len(ms) == 0 {
				t.Errorf("alerts.yml: %s names no command to run (`ledger status`, ...)", r.Alert)
			}
			if bare := regexp.MustCompile(`(^|[^` + "`" + `/])ledger [a-z]+`).FindString(quotedCommand.ReplaceAllString(text, "")); bare != "" {
				t.Errorf("alerts.yml: %s: %q: write commands in backquotes", r.Alert, bare)
			}
			for _, m := range ms {
				checkCommand(t, "alerts.yml "+r.Alert, m[1])
				n++
			}
		}
	}
	return n
}
