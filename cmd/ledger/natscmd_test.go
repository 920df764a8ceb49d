package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/internal/datadir"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/signing"
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

// TestNATSInitRefusesUntrustedDir: `ledger nats init` keeps the seeds,
// the signing key and the route password it finds in --dir and
// authorizes the seeds' public keys, so a --dir another user could write
// (or a seed of theirs in it) would hand them the admin identity; and it
// writes its configurations over what is there, following a link. It
// refuses such a --dir as ledger dev refuses its data directory, naming
// the path, and writes nothing (decision 495). Before, every case here
// was taken: the planted seed authorized, the linked file written over.
func TestNATSInitRefusesUntrustedDir(t *testing.T) {
	initDir := func(dir string) error {
		return runNATSInit(io.Discard, natsInitFlags{dir: dir, projector: natsauth.Layout{Name: "projector", MaxPartitions: 2}})
	}
	good := t.TempDir()
	if err := initDir(good); err != nil {
		t.Fatal(err)
	}
	planted, err := os.ReadFile(natsauth.SeedFile(filepath.Join(good, devAuthDir), natsauth.Admin))
	if err != nil {
		t.Fatal(err)
	}
	type setup func(t *testing.T, dir string) (want string)
	cases := map[string]setup{
		"a --dir others may write": func(t *testing.T, dir string) string {
			must(t, os.Chmod(dir, 0o777))
			return dir
		},
		"a nats-auth/ others may write, holding an admin seed": func(t *testing.T, dir string) string {
			auth := filepath.Join(dir, devAuthDir)
			must(t, os.Mkdir(auth, 0o700))
			must(t, os.WriteFile(natsauth.SeedFile(auth, natsauth.Admin), planted, 0o600))
			must(t, os.Chmod(auth, 0o777))
			return auth
		},
		"a trusted keys file others may write": func(t *testing.T, dir string) string {
			sig := filepath.Join(dir, devSigningDir)
			must(t, os.Mkdir(sig, 0o700))
			must(t, os.WriteFile(filepath.Join(sig, signing.TrustedKeysFile), nil, 0o666))
			must(t, os.Chmod(filepath.Join(sig, signing.TrustedKeysFile), 0o666))
			return filepath.Join(sig, signing.TrustedKeysFile)
		},
		"nats-auth.conf a link to another file": func(t *testing.T, dir string) string {
			target := filepath.Join(t.TempDir(), "victim")
			must(t, os.WriteFile(target, []byte("keep me\n"), 0o644))
			must(t, os.Symlink(target, filepath.Join(dir, NATSConfigFile)))
			t.Cleanup(func() {
				if b, _ := os.ReadFile(target); string(b) != "keep me\n" {
					t.Errorf("nats init wrote through the link into %s", target)
				}
			})
			return filepath.Join(dir, NATSConfigFile)
		},
	}
	if os.Geteuid() == 0 {
		// As root, another user's seed (theirs, so known to them) with
		// the right mode in a directory of root's.
		cases["an admin seed another user owns"] = func(t *testing.T, dir string) string {
			auth := filepath.Join(dir, devAuthDir)
			must(t, os.Mkdir(auth, 0o700))
			seed := natsauth.SeedFile(auth, natsauth.Admin)
			must(t, os.WriteFile(seed, planted, 0o600))
			must(t, os.Lchown(seed, 65534, 65534))
			return seed
		}
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "secrets")
			must(t, os.Mkdir(dir, 0o700))
			want := c(t, dir)
			err := initDir(dir)
			if !errors.Is(err, datadir.ErrUntrusted) || !strings.Contains(err.Error(), want) {
				t.Errorf("nats init: %v, want refused naming %s", err, want)
			}
			if _, err := os.Lstat(filepath.Join(dir, NATSConfigFile)); err == nil && !strings.Contains(name, "link") {
				t.Errorf("nats init wrote %s after all", NATSConfigFile)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
