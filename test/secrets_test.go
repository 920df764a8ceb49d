package test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
// section of a help text, help and completion included.
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
			if f := strings.Fields(line); len(f) > 0 {
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

// TestHelpShowsNoSecret runs --help and --version of every command and
// subcommand of both binaries (help and completion included), with a
// database password, a NATS password and a token in the environment as
// a user of `ledger dev` has them: each exits 0, and no output shows a
// secret. Both binaries take the same flag style (cobra's long
// --kebab-case flags).
func TestHelpShowsNoSecret(t *testing.T) {
	ledger, projector := ledgerBinary(t), projectorBinary(t)
	env := secretEnv("NATS_URL=nats://ledger:" + secretPassword + "@127.0.0.1:4222")
	run := func(bin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		what := filepath.Base(bin) + " " + strings.Join(args, " ")
		if err != nil {
			t.Errorf("%s: %v (want exit 0)\n%s", what, err, out)
		}
		checkNoSecret(t, what, string(out))
		return string(out)
	}
	seen := 0
	helps := map[string]string{} // each command's --help, by its path
	commands := map[string]bool{"ledger": true, "projector": true}
	var walk func(path []string)
	walk = func(path []string) {
		out := run(ledger, append(slices.Clone(path), "--help")...)
		helps["ledger "+strings.Join(path, " ")] = out
		for _, p := range path {
			commands[p] = true
		}
		if !strings.Contains(out, "Usage:") {
			t.Errorf("ledger %s --help shows no usage:\n%s", strings.Join(path, " "), out)
		}
		if v := run(ledger, append(slices.Clone(path), "--version")...); !strings.HasPrefix(v, "ledger ") || !strings.Contains(v, "commit: ") {
			t.Errorf("ledger %s --version: %q", strings.Join(path, " "), v)
		}
		seen++
		for _, sub := range subcommands(out) {
			if len(path) > 0 && path[len(path)-1] == "help" {
				continue // help's "subcommands" are every command again
			}
			walk(append(slices.Clone(path), sub))
		}
	}
	walk(nil)
	if seen < 30 {
		t.Fatalf("walked only %d commands: the help format changed?", seen)
	}
	for _, want := range [][]string{{"token", "list"}, {"token", "revoke"}, {"token", "rotate"}, {"completion", "bash"}} {
		if out := run(ledger, append(want, "--help")...); !strings.Contains(out, "ledger "+strings.Join(want, " ")) {
			t.Errorf("ledger %v --help:\n%s", want, out)
		}
	}
	out := run(projector, "--help")
	helps["projector"] = out
	for what, help := range helps {
		checkPlaceholders(t, what, help, commands)
	}
	for _, flag := range []string{"--database-url", "--nats-url", "--log-format", "--log-level", "--metrics-listen", "--version"} {
		if !strings.Contains(out, flag) {
			t.Errorf("projector --help does not list %s:\n%s", flag, out)
		}
	}
	if v := run(projector, "--version"); !strings.HasPrefix(v, "projector ") || !strings.Contains(v, "commit: ") {
		t.Errorf("projector --version: %q", v)
	}
	// The style of the old flag package is gone: one dash is a shorthand.
	cmd := exec.Command(projector, "-database-url", "x")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("projector took a long flag with one dash:\n%s", out)
	}
	t.Logf("%d ledger commands and the projector checked", seen)
}

// flagLine is a flag of a --help text: its name, and the placeholder of
// its value (none for a switch).
var flagLine = regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9-]+)(?: (\S+))?(?:\s{2,}|$)`)

// placeholder is what a flag's value may be called in --help: a word in
// capitals (FILE, URL, ADDR, SEQ|TIME, HOST:PORT), a number's or a
// duration's type, or the values it takes (text|json, level).
var placeholder = regexp.MustCompile(`^([A-Z][A-Z0-9_:|-]*|int|uint|float|duration|level|[a-z]+(\|[a-zA-Z:]+)+)$`)

// checkPlaceholders fails for each flag of help whose placeholder is a
// command's name (pflag takes the first `quoted` word of a flag's usage
// as its placeholder: "--nats-creds ledger dev"), Go's type name of a
// string (say what the value is: FILE, URL, POOL ...), or not a
// placeholder at all.
func checkPlaceholders(t *testing.T, what, help string, commands map[string]bool) {
	t.Helper()
	flags := 0
	for _, line := range strings.Split(help, "\n") {
		m := flagLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		flags++
		ph := m[2]
		switch {
		case ph == "":
		case commands[ph]:
			t.Errorf("%s --help: --%s's placeholder is the command %q: %s", what, m[1], ph, strings.TrimSpace(line))
		case ph == "string" || ph == "strings" || ph == "stringArray":
			t.Errorf("%s --help: --%s's placeholder is Go's type %q: name what the value is (FILE, URL, POOL ...): %s", what, m[1], ph, strings.TrimSpace(line))
		case !placeholder.MatchString(ph):
			t.Errorf("%s --help: --%s's placeholder %q is not one: %s", what, m[1], ph, strings.TrimSpace(line))
		}
	}
	if flags == 0 {
		t.Errorf("%s --help lists no flag:\n%s", what, help)
	}
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
		// A ledger URL with credentials (behind a proxy): load printed
		// its failure with the URL whole.
		{"load", "--ledger-url", "http://u:" + secretPassword + "@127.0.0.1:1", "scenarios/seed/seed-000-priority-reclaim.yaml"},
		{"status", "--ledger-url", "http://u:" + secretPassword + "@127.0.0.1:1", "--timeout", "1s"},
		{"publish", "--ledger-url", "http://u:" + secretPassword + "@127.0.0.1:1", "--pool", "p", "--type", "demand", "--data", `{"demands":{"/a":1}}`},
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

// TestErrorsShowNoOddPassword: a password that is not percent-encoded in
// its URL (a space, a tab, a quote, a '#', '?', '/' or '@' typed as it
// is, as a user copies it from a password manager) is still hidden in
// every error of the commands and the projector that connect with it,
// whether the URL comes from DATABASE_URL or a flag, and whether the
// driver takes the URL or refuses it (decision 424). Before, the
// redaction ended the URL's authority at the first space or quote, so
// "postgres://ledger:my Secret@host" showed "my Secret" whole.
func TestErrorsShowNoOddPassword(t *testing.T) {
	ledger, projector := ledgerBinary(t), projectorBinary(t)
	natsURL := testenv.NATS(t)
	for _, pw := range []string{
		"OddSecret0451 Xq7Tail",
		"OddSecret0451\tXq7Tail",
		`OddSecret0451"Xq7Tail`,
		"OddSecret0451'Xq7Tail",
		"OddSecret0451`Xq7Tail",
		"OddSecret0451#Xq7Tail",
		"OddSecret0451?Xq7Tail",
		"OddSecret0451/Xq7Tail",
		"OddSecret0451@Xq7Tail",
		" OddSecret0451",
	} {
		url := "postgres://ledger_reporting:" + pw + "@127.0.0.1:1/ledger?sslmode=disable"
		env := append(secretEnv("NATS_URL="+natsURL, "LEDGER_NATS_CREDS="+testenv.Creds(t, natsURL, natsauth.Auditor)), "DATABASE_URL="+url)
		check := func(what, out string) {
			t.Helper()
			for _, part := range append(strings.Fields(pw), "OddSecret0451", "Xq7Tail") {
				if strings.Contains(out, part) {
					t.Errorf("%s with the password %q shows %q of it:\n%s", what, pw, part, out)
				}
			}
		}
		for _, args := range [][]string{
			{"audit", "verify"},
			{"recover"},
			{"migrate"},
			{"replay", "--from", "1"},
			{"replay", "--into", url},
			{"audit", "verify", "--database-url", url},
		} {
			cmd := exec.Command(ledger, args...)
			cmd.Env = env
			out, _ := cmd.CombinedOutput()
			check("ledger "+args[0], string(out))
		}
		cmd := exec.Command(projector, "--connect-timeout", "1s")
		cmd.Env = env
		out, _ := cmd.CombinedOutput()
		check("projector", string(out))
	}
}

// TestRestoreQuotesNoFileGivenByMistake: `ledger restore --in` given a
// file that is not a backup (tab completion picked a secret: an nkey
// seed, a password file, the tokens file) is refused without quoting
// the file; it quoted its first line (decision 429).
func TestRestoreQuotesNoFileGivenByMistake(t *testing.T) {
	ledger := ledgerBinary(t)
	natsURL := testenv.NATS(t)
	dir := t.TempDir()
	for name, content := range map[string]string{
		"admin.nk":        "SUAC" + strings.Repeat("Q", 52) + secretPassword + "\n",
		"ledger.password": secretPassword + "\n",
		"tokens.jsonl":    `{"name":"x","sha256":"` + secretPassword + `","scopes":["read"],"pools":["*"]}` + "\n",
		"quoted":          `"` + secretPassword + `"` + "\n",
	} {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(ledger, "restore", "--in", file, "--trust-backup-keys")
		cmd.Env = secretEnv("NATS_URL="+natsURL, "LEDGER_NATS_CREDS="+testenv.Creds(t, natsURL, natsauth.Admin))
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "not the header of a backup") {
			t.Errorf("restore --in %s: %v, want a refusal\n%s", name, err, out)
		}
		checkNoSecret(t, "ledger restore --in "+name, string(out))
	}
}
