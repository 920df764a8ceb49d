package test

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/migrations"
)

// composeFile is the part of docker-compose.yml the checks read.
type composeFile struct {
	Services map[string]struct {
		Image       string    `yaml:"image"`
		Build       yaml.Node `yaml:"build"`
		Command     []string  `yaml:"command"`
		Environment yaml.Node `yaml:"environment"`
		Volumes     []string  `yaml:"volumes"`
		Ports       []string  `yaml:"ports"`
		Restart     string    `yaml:"restart"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
	Configs map[string]struct {
		Content string `yaml:"content"`
	} `yaml:"configs"`
}

func readRepoFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// buildOf returns a service's build context and Dockerfile ("" when it
// has no build); build may be a string or a mapping.
func buildOf(n yaml.Node) (context, dockerfile string) {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value, "Dockerfile"
	case yaml.MappingNode:
		var b struct{ Context, Dockerfile string }
		_ = n.Decode(&b)
		if b.Dockerfile == "" {
			b.Dockerfile = "Dockerfile"
		}
		return b.Context, b.Dockerfile
	}
	return "", ""
}

// envNames returns the variable names of an environment given as a
// mapping or as a list of NAME=value.
func envNames(t *testing.T, n yaml.Node) []string {
	var names []string
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i < len(n.Content); i += 2 {
			names = append(names, n.Content[i].Value)
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			name, _, _ := strings.Cut(item.Value, "=")
			names = append(names, name)
		}
	case 0:
	default:
		t.Errorf("environment of unexpected kind %v", n.Kind)
	}
	slices.Sort(names)
	return names
}

// TestDockerCompose checks the production shape of docker-compose.yml:
// three clustered NATS servers whose configuration nats-server itself
// loads with what `ledger nats init` writes (identities, authenticated
// routes to each other), two ledgers, two partitioned projectors,
// PostgreSQL reached through a role that is no superuser, healthchecks
// and restart policies; and every flag of every command exists in the
// binary it runs (nats-server's by its own flag parser).
func TestDockerCompose(t *testing.T) {
	var c composeFile
	if err := yaml.Unmarshal(readRepoFile(t, "docker-compose.yml"), &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	var natsNames, ledgers, projectors []string
	for name, svc := range c.Services {
		switch {
		case strings.HasPrefix(svc.Image, "nats:"):
			natsNames = append(natsNames, name)
		case slices.Equal(first(svc.Command, 2), []string{"ledger", "serve"}):
			ledgers = append(ledgers, name)
		case len(svc.Command) > 0 && svc.Command[0] == "projector":
			projectors = append(projectors, name)
		}
	}
	slices.Sort(natsNames)
	if len(natsNames) != 3 || len(ledgers) != 2 || len(projectors) != 2 {
		t.Fatalf("want 3 NATS servers, 2 ledgers, 2 projectors; got %v, %v, %v", natsNames, ledgers, projectors)
	}
	pg, ok := c.Services["postgres"]
	if !ok || !strings.HasPrefix(pg.Image, "postgres:15.") || len(pg.Volumes) == 0 || pg.Healthcheck == nil || len(pg.Healthcheck.Test) == 0 {
		t.Errorf("postgres: want image postgres:15 with a volume and a healthcheck")
	}

	ledgerBin, projectorBin := ledgerBinary(t), projectorBinary(t)
	checkFlags := func(name string, command []string) {
		t.Helper()
		if len(command) == 0 {
			return
		}
		var bin string
		switch command[0] {
		case "ledger":
			bin = ledgerBin
		case "projector":
			bin = projectorBin
		default:
			return // nats-server and postgres: checked below
		}
		sub := []string{}
		for _, a := range command[1:] {
			if strings.HasPrefix(a, "-") {
				break
			}
			sub = append(sub, a)
		}
		help, _ := exec.Command(bin, append(slices.Clone(sub), "--help")...).CombinedOutput() // projector's -h exits 2
		for _, a := range command[1:] {
			if !strings.HasPrefix(a, "-") {
				continue
			}
			flag, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			re := regexp.MustCompile(`(?m)^\s+(-\w, )?--?` + regexp.QuoteMeta(flag) + `\b`)
			if re.Match(help) {
				continue
			}
			t.Errorf("%s: %s has no flag --%s:\n%s", name, strings.Join(append([]string{command[0]}, sub...), " "), flag, help)
		}
	}
	for name, svc := range c.Services {
		checkFlags(name, svc.Command)
		if svc.Healthcheck != nil && len(svc.Healthcheck.Test) > 1 && svc.Healthcheck.Test[0] == "CMD" {
			checkFlags(name+" healthcheck", svc.Healthcheck.Test[1:])
		}
		_, long := map[string]bool{"secrets": true, "nats-setup": true, "migrate": true}[name]
		if !long && svc.Restart != "unless-stopped" && svc.Restart != "always" {
			t.Errorf("%s: restart %q, want unless-stopped (it must come back after a crash)", name, svc.Restart)
		}
		for _, v := range svc.Volumes {
			volume, _, _ := strings.Cut(v, ":")
			if _, ok := c.Volumes[volume]; !ok {
				t.Errorf("%s: volume %s used but not declared under volumes:", name, volume)
			}
		}
	}

	// What the secrets service writes, made by the binary with its own
	// arguments, then each NATS server's configuration loaded by
	// nats-server from the compose config beside it.
	secrets := c.Services["secrets"].Command
	dir := t.TempDir()
	args := slices.Clone(secrets[1:])
	if i := slices.Index(args, "--dir"); i < 0 || args[i+1] != "/secrets" {
		t.Fatalf("secrets: %v does not write /secrets", secrets)
	} else {
		args[i+1] = filepath.Join(dir, "secrets")
	}
	if out, err := exec.Command(ledgerBin, args...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", secrets, err, out)
	}
	conf := c.Configs["nats-conf"].Content
	if err := os.WriteFile(filepath.Join(dir, "ledger.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var volumes []string
	for _, name := range natsNames {
		svc := c.Services[name]
		if want := "nats:" + strings.TrimPrefix(testedNATSServer(t), "v") + "-alpine"; imageRef(svc.Image) != want {
			t.Errorf("%s: image %s, want %s: the nats-server the code is tested with (go.mod), alpine for the healthcheck's wget", name, svc.Image, want)
		}
		if svc.Healthcheck == nil || len(svc.Healthcheck.Test) == 0 {
			t.Errorf("%s: no healthcheck", name)
		}
		i := slices.Index(svc.Command, "-c")
		if i < 0 || i+1 >= len(svc.Command) || !slices.Contains(svc.Volumes, "secrets:"+filepath.Dir(svc.Command[i+1])+"/secrets:ro") {
			t.Errorf("%s: command %v must load a config (-c) beside the secrets volume (%v)", name, svc.Command, svc.Volumes)
			continue
		}
		// nats-server's own flag parsing, with the file where the test has it.
		cmdArgs := slices.Clone(svc.Command)
		cmdArgs[i+1] = filepath.Join(dir, "ledger.conf")
		fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		opts, err := server.ConfigureOptions(fs, cmdArgs, func() {}, func() {}, func() {})
		if err != nil {
			t.Errorf("%s: nats-server refuses %v: %v", name, svc.Command, err)
			continue
		}
		if opts.ServerName != name || !opts.JetStream || opts.StoreDir == "" || !opts.SyncAlways || opts.HTTPPort == 0 {
			t.Errorf("%s: server name %q (want the service's), jetstream %v, store %q, sync always %v, monitor %d",
				name, opts.ServerName, opts.JetStream, opts.StoreDir, opts.SyncAlways, opts.HTTPPort)
		}
		if len(opts.Nkeys) != len(natsauth.Roles) || opts.Users != nil {
			t.Errorf("%s: %d nkey identities, want %d and no anonymous access", name, len(opts.Nkeys), len(natsauth.Roles))
		}
		if opts.Cluster.Name != "ledger" || opts.Cluster.Port != 6222 || opts.Cluster.Username == "" || len(opts.Cluster.Password) < 32 {
			t.Errorf("%s: cluster %q on %d, route user %q: want cluster ledger on 6222 with authenticated routes",
				name, opts.Cluster.Name, opts.Cluster.Port, opts.Cluster.Username)
		}
		var routed []string
		for _, r := range opts.Routes {
			pw, _ := r.User.Password()
			if r.User.Username() != opts.Cluster.Username || pw != opts.Cluster.Password {
				t.Errorf("%s: route %s does not carry the route credentials", name, r.Host)
			}
			routed = append(routed, r.Hostname())
		}
		slices.Sort(routed)
		if !slices.Equal(routed, natsNames) {
			t.Errorf("%s: routes to %v, want to every NATS service %v", name, routed, natsNames)
		}
		volumes = append(volumes, svc.Volumes[0])
	}
	if slices.Sort(volumes); len(slices.Compact(volumes)) != 3 {
		t.Errorf("the NATS servers must each have their own store volume: %v", volumes)
	}

	// The services reach every NATS server and PostgreSQL as the
	// application role, never as the superuser.
	wantEnvs := map[string][]string{
		"ledger":    {"DATABASE_URL", "LEDGER_NATS_CREDS", "LEDGER_SIGNING_KEY", "LEDGER_TRUSTED_KEYS", "NATS_URL"},
		"projector": {"DATABASE_URL", "LEDGER_NATS_CREDS", "LEDGER_NATS_HEAL_CREDS", "LEDGER_TRUSTED_KEYS", "NATS_URL"},
	}
	for kind, names := range map[string][]string{"ledger": ledgers, "projector": projectors} {
		for _, name := range names {
			svc := c.Services[name]
			ctx, dockerfile := buildOf(svc.Build)
			if ctx != "." || dockerfile != "Dockerfile" {
				t.Errorf("%s: build = (%q, %q), want (\".\", \"Dockerfile\")", name, ctx, dockerfile)
			}
			if got := envNames(t, svc.Environment); !slices.Equal(got, wantEnvs[kind]) {
				t.Errorf("%s: environment names = %v, want %v", name, got, wantEnvs[kind])
			}
			env := envMap(svc.Environment)
			for _, n := range natsNames {
				if !strings.Contains(env["NATS_URL"], "nats://"+n+":4222") {
					t.Errorf("%s: NATS_URL %q lacks %s", name, env["NATS_URL"], n)
				}
			}
			// Each service with its own least role (migration 0008).
			if role := map[string]string{"ledger": "ledger_api", "projector": "ledger_projector"}[kind]; !strings.HasPrefix(env["DATABASE_URL"], "postgres://"+role+":") {
				t.Errorf("%s: DATABASE_URL %q: want the %s role", name, env["DATABASE_URL"], role)
			}
		}
	}
	for _, name := range projectors {
		cmd := c.Services[name].Command
		if i := slices.Index(cmd, "--partitions"); i < 0 || i+1 >= len(cmd) || cmd[i+1] != "8" {
			t.Errorf("%s: command %v, want --partitions 8 (the same on every projector)", name, cmd)
		}
	}
	for _, name := range ledgers {
		svc := c.Services[name]
		if !slices.ContainsFunc(svc.Ports, func(p string) bool { return strings.HasSuffix(p, ":8080") }) {
			t.Errorf("%s: port 8080 not published: %v", name, svc.Ports)
		}
		if svc.Healthcheck == nil || !slices.Contains(svc.Healthcheck.Test, "--healthz") {
			t.Errorf("%s: want the healthcheck `ledger status --healthz`", name)
		}
	}
	checkPinsHealthAndBinding(t, c)
	if pgEnv := envMap(pg.Environment); pgEnv["POSTGRES_USER"] == "ledger" {
		t.Errorf("postgres: the services' role must not be the superuser POSTGRES_USER")
	}
	for _, role := range []string{"ledger", "ledger_api", "ledger_projector", "ledger_reporting"} {
		if roles := c.Configs["pg-roles"].Content; !strings.Contains(roles, "CREATE ROLE "+role+" LOGIN NOSUPERUSER") {
			t.Errorf("postgres: no init script creating the %s role:\n%s", role, roles)
		}
	}
	// The superuser's part of the roles' bounds, as ledger dev applies it
	// (migrations/cluster.go): every line of ClusterSQL (compose writes
	// $ as $$), each role's connection limit and reporting's settings.
	initScript := strings.ReplaceAll(c.Configs["pg-roles"].Content, "$$", "$")
	for _, line := range strings.Split(migrations.ClusterSQL, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.Contains(initScript, line) {
			t.Errorf("postgres: the init script lacks %q of migrations.ClusterSQL", line)
		}
	}
	for role, limit := range migrations.ConnLimits {
		if want := fmt.Sprintf("ALTER ROLE %s CONNECTION LIMIT %d;", role, limit); !strings.Contains(initScript, want) {
			t.Errorf("postgres: the init script lacks %q", want)
		}
	}
	for name, value := range migrations.ReportingSettings {
		if want := fmt.Sprintf("ALTER ROLE %s SET %s = '%s';", migrations.RoleReporting, name, value); !strings.Contains(initScript, want) {
			t.Errorf("postgres: the init script lacks %q", want)
		}
	}
	if m := envMap(c.Services["migrate"].Environment); !strings.HasPrefix(m["DATABASE_URL"], "postgres://ledger:") {
		t.Errorf("migrate: DATABASE_URL %q: want the owner, ledger", m["DATABASE_URL"])
	}
}

// pinnedByVersionOnly are the images of the compose file pinned by an
// exact version tag without a digest, and why: each is said in the file
// too, with how to pin it by digest. Nothing else may go without one.
var pinnedByVersionOnly = map[string]string{
	"nats": "no manifest digest of the tested version's tag could be verified where the file was written (no container engine)",
}

// imageRef is an image without its digest (name:tag).
func imageRef(image string) string { ref, _, _ := strings.Cut(image, "@"); return ref }

var (
	exactVersionTag = regexp.MustCompile(`^[a-z0-9./-]+:\d+\.\d+(\.\d+)?(-[a-z0-9.]+)?$`)
	imageDigest     = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// testedNATSServer is the nats-server module version the code is built
// and tested with: go.mod's (the embedded servers of the tests are it).
func testedNATSServer(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*github\.com/nats-io/nats-server/v2 (v\S+)`).FindSubmatch(readRepoFile(t, "go.mod"))
	if m == nil {
		t.Fatal("go.mod names no github.com/nats-io/nats-server/v2")
	}
	return string(m[1])
}

// checkPinsHealthAndBinding: every image is pinned (an exact version tag
// and, but for pinnedByVersionOnly, a digest: a tag can be moved, a
// digest names the bytes); every long-running service has a healthcheck
// (the one-shot jobs are healthy when they exit 0, and the services wait
// for that); every published port is bound to loopback, but for a ledger
// serving TLS itself (a plain-HTTP API with bearer tokens must not be
// reachable from other machines as it is).
func checkPinsHealthAndBinding(t *testing.T, c composeFile) {
	t.Helper()
	for name, svc := range c.Services {
		if svc.Image != "" {
			ref, digest, hasDigest := strings.Cut(svc.Image, "@")
			repo, _, _ := strings.Cut(ref, ":")
			if !exactVersionTag.MatchString(ref) {
				t.Errorf("%s: image %s: want an exact version tag (name:X.Y.Z[-variant])", name, svc.Image)
			}
			_, versionOnly := pinnedByVersionOnly[repo]
			switch {
			case hasDigest && !imageDigest.MatchString(digest):
				t.Errorf("%s: image %s: malformed digest", name, svc.Image)
			case !hasDigest && !versionOnly:
				t.Errorf("%s: image %s is not pinned by digest (image@sha256:...)", name, svc.Image)
			}
		}
		_, job := map[string]bool{"secrets": true, "nats-setup": true, "migrate": true}[name]
		if !job && (svc.Healthcheck == nil || len(svc.Healthcheck.Test) == 0) {
			t.Errorf("%s: a long-running service without a healthcheck", name)
		}
		tls := slices.Contains(svc.Command, "--tls-cert")
		for _, p := range svc.Ports {
			parts := strings.Split(p, ":")
			if len(parts) < 3 && !tls {
				t.Errorf("%s: port %q is published on every address of the host: bind it to 127.0.0.1 (or serve TLS)", name, p)
			} else if len(parts) >= 3 && parts[0] != "127.0.0.1" && parts[0] != "[::1]" && !tls {
				t.Errorf("%s: port %q is published on %s: bind it to 127.0.0.1 (or serve TLS)", name, p, parts[0])
			}
		}
	}
}

// first returns at most n leading elements of xs.
func first(xs []string, n int) []string { return xs[:min(n, len(xs))] }

// envMap returns an environment mapping's values (list form: NAME=value).
func envMap(n yaml.Node) map[string]string {
	m := map[string]string{}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			v := n.Content[i+1]
			if v.Kind == yaml.AliasNode { // NATS_URL: *nats-urls
				v = v.Alias
			}
			m[n.Content[i].Value] = v.Value
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			k, v, _ := strings.Cut(item.Value, "=")
			m[k] = v
		}
	}
	return m
}

func TestDockerfile(t *testing.T) {
	df := string(readRepoFile(t, "Dockerfile"))
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^FROM golang:1\.26\S* AS build`),
		regexp.MustCompile(`CGO_ENABLED=0`),
		regexp.MustCompile(`go build .*\./cmd/ledger`),
		regexp.MustCompile(`go build .*\./cmd/projector`),
		regexp.MustCompile(`(?m)^FROM (gcr\.io/distroless/static|debian:\S*-slim)`),
	} {
		if !want.MatchString(df) {
			t.Errorf("Dockerfile does not match %s", want)
		}
	}
}
