package test

import (
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"
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

func TestDockerCompose(t *testing.T) {
	var c composeFile
	if err := yaml.Unmarshal(readRepoFile(t, "docker-compose.yml"), &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, name := range []string{"nats", "postgres", "ledger", "projector"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("service %s missing", name)
		}
	}

	nats := c.Services["nats"]
	if !strings.HasPrefix(nats.Image, "nats:2.12") || !slices.Contains(nats.Command, "-js") || len(nats.Volumes) == 0 {
		t.Errorf("nats: want image nats:2.12 (atomic batch publish) with -js and a volume, got %q %v %v", nats.Image, nats.Command, nats.Volumes)
	}
	testComposeNATSSync(t, c, nats.Command)
	pg := c.Services["postgres"]
	if !strings.HasPrefix(pg.Image, "postgres:15") || len(pg.Volumes) == 0 || pg.Healthcheck == nil || len(pg.Healthcheck.Test) == 0 {
		t.Errorf("postgres: want image postgres:15 with a volume and a healthcheck")
	}
	for _, v := range append(append([]string{}, nats.Volumes...), pg.Volumes...) {
		volume, _, _ := strings.Cut(v, ":")
		if _, ok := c.Volumes[volume]; !ok {
			t.Errorf("volume %s used but not declared under volumes:", volume)
		}
	}

	// The names of service.md, the identity and the key of each.
	wantEnvs := map[string][]string{
		"ledger":    {"DATABASE_URL", "LEDGER_SIGNING_KEY", "NATS_CREDS", "NATS_URL"},
		"projector": {"DATABASE_URL", "LEDGER_TRUSTED_KEYS", "NATS_CREDS", "NATS_HEAL_CREDS", "NATS_URL"},
	}
	if !slices.Contains(nats.Command, "-c") {
		t.Errorf("nats: no -c: the server must load the authorization of `ledger nats init`: %v", nats.Command)
	}
	for name, wantCmd := range map[string][]string{
		"ledger":    {"ledger", "serve", "--http", "0.0.0.0:8080", "--tokens", "/run/secrets/ledger_tokens"},
		"projector": {"projector"},
	} {
		wantEnv := wantEnvs[name]
		svc := c.Services[name]
		ctx, dockerfile := buildOf(svc.Build)
		if ctx != "." || dockerfile != "Dockerfile" {
			t.Errorf("%s: build = (%q, %q), want (\".\", \"Dockerfile\")", name, ctx, dockerfile)
		}
		if !slices.Equal(svc.Command, wantCmd) {
			t.Errorf("%s: command = %v, want %v", name, svc.Command, wantCmd)
		}
		if got := envNames(t, svc.Environment); !slices.Equal(got, wantEnv) {
			t.Errorf("%s: environment names = %v, want %v", name, got, wantEnv)
		}
	}
	if !slices.ContainsFunc(c.Services["ledger"].Ports, func(p string) bool { return strings.HasSuffix(p, ":8080") || p == "8080" }) {
		t.Errorf("ledger: port 8080 not published: %v", c.Services["ledger"].Ports)
	}
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

// testComposeNATSSync requires the NATS service to sync every write (a
// single node has no other copy of the log): its command loads a config
// that nats-server itself reads as sync_interval: always.
func testComposeNATSSync(t *testing.T, c composeFile, command []string) {
	i := slices.Index(command, "-c")
	if i < 0 || i+1 >= len(command) {
		t.Errorf("nats: command %v loads no config (-c FILE) setting sync_interval: always", command)
		return
	}
	conf, ok := "", false
	for _, cfg := range c.Configs {
		conf, ok = cfg.Content, true
	}
	if !ok || len(c.Configs) != 1 {
		t.Errorf("nats: want one config with the server configuration, got %d", len(c.Configs))
		return
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "ledger.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// What `ledger nats init` writes into the secrets volume, mounted
	// beside the configuration.
	keys, err := natsauth.Init(filepath.Join(dir, "secrets", "nats-auth"))
	if err != nil {
		t.Fatal(err)
	}
	var auth strings.Builder
	if err := natsauth.WriteServerConfig(&auth, keys); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secrets", "nats-auth.conf"), []byte(auth.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatalf("nats config: %v", err)
	}
	if len(opts.Nkeys) != len(natsauth.Roles) {
		t.Errorf("nats config gives %d identities, want %d (anonymous clients must be refused)", len(opts.Nkeys), len(natsauth.Roles))
	}
	if !opts.SyncAlways {
		t.Errorf("nats config does not set sync_interval: always:\n%s", conf)
	}
}
