package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/auth"
)

// --metrics-listen is refused without a tokens file, and a listener that
// cannot start stops the command at once, before it connects to anything.
func TestMetricsFlags(t *testing.T) {
	t.Setenv("LEDGER_METRICS_TOKENS", "")
	base := []string{"--nats-url", "nats://127.0.0.1:1", "--database-url", "postgres://127.0.0.1:1/x", "--connect-timeout", "1ms"}
	var buf bytes.Buffer
	err := run(context.Background(), append(base, "--metrics-listen", "127.0.0.1:0"), &buf)
	if err == nil || !strings.Contains(err.Error(), "--metrics-tokens") {
		t.Fatalf("--metrics-listen without tokens: %v", err)
	}

	tokens := filepath.Join(t.TempDir(), "tokens.jsonl")
	_, e, err := auth.Generate("prometheus", []auth.Scope{auth.ScopeMetrics}, []string{auth.AllPools})
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.AppendFile(tokens, e); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	err = run(context.Background(), append(base, "--metrics-listen", busy.Addr().String(), "--metrics-tokens", tokens), &buf)
	if err == nil || !strings.Contains(err.Error(), "metrics: listen") {
		t.Fatalf("--metrics-listen on a busy port: %v", err)
	}

	buf.Reset()
	_ = run(context.Background(), []string{"--help"}, &buf)
	for _, flag := range []string{"-metrics-listen", "-metrics-tokens"} {
		if !strings.Contains(buf.String(), flag) {
			t.Errorf("--help does not explain %s:\n%s", flag, buf.String())
		}
	}
}
