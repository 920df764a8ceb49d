package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/natsauth"
)

// TestNATSInboxAndLayout: `ledger nats inbox` prints the identity's
// private inbox prefix, and `ledger nats init` writes the projector's
// consumer names of --projector-name and --max-partitions, refusing a
// name that cannot be a consumer's.
func TestNATSInboxAndLayout(t *testing.T) {
	dir := t.TempDir()
	if err := runNATSInit(io.Discard, natsInitFlags{dir: dir, projector: natsauth.Layout{Name: "proj", MaxPartitions: 2}}); err != nil {
		t.Fatal(err)
	}
	keys, err := natsauth.Load(filepath.Join(dir, devAuthDir))
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := runLedger(t, "", "nats", "inbox", "--nats-creds", natsauth.SeedFile(filepath.Join(dir, devAuthDir), natsauth.Auditor))
	if err != nil || strings.TrimSpace(out) != natsauth.InboxPrefix(keys[natsauth.Auditor]) {
		t.Fatalf("nats inbox: %q %v, want %s", out, err, natsauth.InboxPrefix(keys[natsauth.Auditor]))
	}
	conf, err := os.ReadFile(filepath.Join(dir, NATSConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"$JS.API.CONSUMER.CREATE.LEDGER.proj-p1of2.>"`, `"$JS.ACK.LEDGER.proj.>"`, `"_INBOX.` + keys[natsauth.Auditor] + `.>"`} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("%s lacks %s", NATSConfigFile, want)
		}
	}
	if strings.Contains(string(conf), "proj-p0of3") || strings.Contains(string(conf), `"_INBOX.>"`) {
		t.Errorf("%s names more than it should:\n%s", NATSConfigFile, conf)
	}
	if err := runNATSInit(io.Discard, natsInitFlags{dir: dir, projector: natsauth.Layout{Name: "a.b", MaxPartitions: 2}}); err == nil || !strings.Contains(err.Error(), "projector name") {
		t.Errorf("nats init with a bad projector name: %v", err)
	}
}
