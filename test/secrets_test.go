package test

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// Secrets a user has in the environment (the lines `ledger dev` prints):
// no --help and no error may show them.
const (
	secretPassword = "HelpSecretPassword0451"
	secretToken    = "HelpSecretToken0451"
)

func secretEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "LEDGER_TOKEN=") {
			env = append(env, kv)
		}
	}
	return append(append(env,
		"DATABASE_URL=postgres://ledger_reporting:"+secretPassword+"@127.0.0.1:1/ledger?sslmode=disable",
		"LEDGER_TOKEN="+secretToken), extra...)
}

// subcommands lists the commands of a cobra "Available Commands:"
// section of a help text.
func subcommands(help string) []string {
	var names []string
	sc := bufio.NewScanner(strings.NewReader(help))
	in := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Available Commands:"):
			in = true
		case in && strings.TrimSpace(line) == "":
			in = false
		case in:
			if f := strings.Fields(line); len(f) > 0 && f[0] != "help" && f[0] != "completion" {
				names = append(names, f[0])
			}
		}
	}
	return names
}

func checkNoSecret(t *testing.T, what, out string) {
	t.Helper()
	for _, s := range []string{secretPassword, secretToken} {
		if strings.Contains(out, s) {
			t.Errorf("%s shows a secret (%s):\n%s", what, s, out)
		}
	}
}

// TestHelpShowsNoSecret runs --help of every subcommand of both
// binaries, with a database password and a token in the environment as
// a user of `ledger dev` has them, and finds neither in any output.
func TestHelpShowsNoSecret(t *testing.T) {
	ledger, projector := ledgerBinary(t), projectorBinary(t)
	env := secretEnv()
	run := func(bin string, args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	seen := 0
	var walk func(path []string)
	walk = func(path []string) {
		out := run(ledger, append(append([]string{}, path...), "--help")...)
		seen++
		checkNoSecret(t, "ledger "+strings.Join(path, " ")+" --help", out)
		for _, sub := range subcommands(out) {
			walk(append(append([]string{}, path...), sub))
		}
	}
	walk(nil)
	if seen < 20 {
		t.Fatalf("walked only %d commands: the help format changed?", seen)
	}
	out := run(projector, "-help")
	checkNoSecret(t, "projector -help", out)
	if !strings.Contains(out, "-database-url") {
		t.Fatalf("projector -help does not list its flags:\n%s", out)
	}
	t.Logf("%d ledger commands and the projector checked", seen)
}

// TestErrorsShowNoSecret: commands that fail to reach PostgreSQL (a
// password in the URL of the environment or of a flag) say so without
// the password.
func TestErrorsShowNoSecret(t *testing.T) {
	ledger, projector := ledgerBinary(t), projectorBinary(t)
	natsURL := testenv.NATS(t)
	env := secretEnv("NATS_URL="+natsURL, "LEDGER_NATS_CREDS="+testenv.Creds(t, natsURL, natsauth.Auditor))
	flagURL := "postgres://ledger:" + secretPassword + "@127.0.0.1:1/rebuilt?sslmode=disable"
	for _, args := range [][]string{
		{"replay", "--into", flagURL},
		{"replay", "--into", "postgres://ledger:" + secretPassword + "@[::1/broken"},
		{"audit", "verify"},
		{"audit", "verify", "--database-url", flagURL},
		{"migrate"},
		{"recover"},
		{"replay", "--from", "1"},
		{"load", "--check", "--ledger-url", "http://127.0.0.1:1", "scenarios/seed/seed-000-priority-reclaim.yaml"},
		{"serve", "--tokens", "/nonexistent", "--connect-timeout", "1s"},
		{"status", "--ledger-url", "http://127.0.0.1:1", "--timeout", "1s"},
	} {
		cmd := exec.Command(ledger, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err == nil && args[0] != "replay" {
			t.Errorf("ledger %v succeeded against an unreachable database:\n%s", args, out)
		}
		checkNoSecret(t, "ledger "+strings.Join(args, " "), string(out))
	}
	cmd := exec.Command(projector, "--connect-timeout", "1s")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Errorf("the projector started without its database:\n%s", out)
	}
	checkNoSecret(t, "projector", string(out))
	if !strings.Contains(string(out), "127.0.0.1:1") {
		t.Errorf("the projector's error should still say where it could not connect:\n%s", out)
	}
}
